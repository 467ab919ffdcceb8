package compress

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/pipeline/atomicfile"
)

// InputsFile lists, in the output folder, where the rows of every run of the
// folder came from, so a reader (`hermes-pipe view`) can find a compressed
// record's original row again by its key: the rows of an output folder by
// their own key, the rows of a file by the "NAME:LINE:HASH" key the source
// gives them (NAME is the input's Name, HASH the first 6 bytes of the
// SHA-256 of the trimmed line, in hex).
const InputsFile = "compress_inputs.json"

// FileKey is the key the source gives row number line (1-based, blank lines
// counted) of the file input name when the row has no key of its own:
// "NAME:LINE:HASH", HASH being RowHash of the row.
func FileKey(name string, line int, row []byte) string {
	return name + ":" + strconv.Itoa(line) + ":" + RowHash(row)
}

// RowHash is the first 6 bytes of the SHA-256 of row, in hex: the HASH of a
// FileKey.
func RowHash(row []byte) string {
	sum := sha256.Sum256(row)
	return hex.EncodeToString(sum[:6])
}

// ParseFileKey splits a FileKey into the input's name, the line number and
// the row's hash; ok is false when key does not have that form (a row's own
// key).
func ParseFileKey(key string) (name string, line int, hash string, ok bool) {
	i := strings.LastIndexByte(key, ':')
	if i < 0 || len(key)-i-1 != 12 {
		return "", 0, "", false
	}
	j := strings.LastIndexByte(key[:i], ':')
	if j <= 0 {
		return "", 0, "", false
	}
	n, err := strconv.Atoi(key[j+1 : i])
	if err != nil || n < 1 {
		return "", 0, "", false
	}
	return key[:j], n, key[i+1:], true
}

// ReadInputs returns the inputs dir's InputsFile lists (Path absolute, as
// the runs saw it). A missing file is an error that wraps os.ErrNotExist.
func ReadInputs(dir string) ([]Input, error) {
	p := filepath.Join(dir, InputsFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var doc inputsDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	ins := make([]Input, len(doc.Inputs))
	for i, e := range doc.Inputs {
		ins[i] = Input(e)
	}
	return ins, nil
}

// inputsDoc is the content of InputsFile.
type inputsDoc struct {
	Inputs []inputEntry `json:"inputs"`
}

// inputEntry is one input: Path absolute (as the run saw it), Name as keys
// use it, Kind one of jsonl, gzip, zstd, parquet, run.
type inputEntry struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Kind string `json:"kind"`
}

// recordInputs adds ins to dir's InputsFile (a --resume may read other
// inputs than the first run: every input a record may have come from is
// kept, in first-seen order). It blocks for one atomic write.
func recordInputs(dir string, ins []Input) error {
	var doc inputsDoc
	b, err := os.ReadFile(filepath.Join(dir, InputsFile))
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &doc); err != nil {
			// The file only helps a reader; a damaged one is replaced by
			// this run's inputs rather than stopping the run.
			doc = inputsDoc{}
		}
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("read %s: %w", InputsFile, err)
	}
	for _, in := range ins {
		p, err := filepath.Abs(in.Path)
		if err != nil {
			return fmt.Errorf("%s: input %s: %w", InputsFile, in.Path, err)
		}
		e := inputEntry{Path: p, Name: in.Name, Kind: in.Kind}
		if !slices.Contains(doc.Inputs, e) {
			doc.Inputs = append(doc.Inputs, e)
		}
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", InputsFile, err)
	}
	return atomicfile.Write(dir, InputsFile, append(out, '\n'))
}
