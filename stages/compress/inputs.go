package compress

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/hermes-pipe/hermes-pipe/pipeline/atomicfile"
)

// InputsFile lists, in the output folder, where the rows of every run of the
// folder came from, so a reader (`hermes-pipe view`) can find a compressed
// record's original row again by its key: the rows of an output folder by
// their own key, the rows of a file by the "NAME:LINE:HASH" key the source
// gives them (NAME is the input's Name, HASH the first 6 bytes of the
// SHA-256 of the trimmed line, in hex).
const InputsFile = "compress_inputs.json"

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
