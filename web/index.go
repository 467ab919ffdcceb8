package web

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"unsafe"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/pipeline/report"
)

// indexVersion changes when the index layout does; older cache files are
// rebuilt.
const indexVersion = 2

// Index is what the viewer knows of every live record: where it is and the
// fields its filters and sort read, column by column (about 90 bytes per
// record plus its key). Names (outcomes, tools, shards) are interned.
type Index struct {
	Version int
	Dirs    []string // the run's folders, in order
	Kind    string
	Names   []string // interned strings; columns hold their positions

	Dir        []uint16
	Shard      []uint32 // Names position of the shard path
	Off        []int64
	N          []int32
	Key        []string
	ID         []string
	Outcome    []uint32 // Names position
	Compress   []uint32 // Names position; 0 = "" (no compression metrics)
	Toolsets   []uint64 // bit i = ToolsetBits[i]
	Tools      []uint64 // bit i = ToolBits[i]
	Failures   []int32
	Turns      []int32
	Tokens     []int64
	DurationMS []int64
	Cost       []float32 // NaN = unpriced
	Ratio      []float32

	ToolsetBits []string // at most 64; more are folded into the last
	ToolBits    []string
}

func (ix *Index) Len() int { return len(ix.Key) }

type interner struct {
	ix  *Index
	pos map[string]uint32
}

func (in *interner) id(s string) uint32 {
	if p, ok := in.pos[s]; ok {
		return p
	}
	p := uint32(len(in.ix.Names))
	in.ix.Names = append(in.ix.Names, s)
	in.pos[s] = p
	return p
}

func bit(names *[]string, name string) uint64 {
	for i, n := range *names {
		if n == name {
			return 1 << i
		}
	}
	if len(*names) == 64 {
		return 1 << 63
	}
	*names = append(*names, name)
	return 1 << (len(*names) - 1)
}

// BuildIndex reads every live record of dirs once (pipeline.EachRecord) and
// summarises it (report.Summarize).
func BuildIndex(dirs []string) (*Index, error) {
	ix := &Index{Version: indexVersion, Dirs: dirs, Names: []string{""}}
	in := &interner{ix: ix, pos: map[string]uint32{"": 0}}
	for d, dir := range dirs {
		man, _, err := outdir.ReadManifest(dir)
		if err != nil {
			return nil, err
		}
		ix.Kind = man.Kind
		err = pipeline.EachRecord(dir, func(ref pipeline.RecordRef, line []byte) error {
			s := report.Summarize(line, &man)
			if s.Outcome == "" {
				s.Outcome = string(ref.Outcome)
			}
			var ts, tl uint64
			for _, t := range s.Toolsets {
				ts |= bit(&ix.ToolsetBits, t)
			}
			for _, t := range s.Tools {
				tl |= bit(&ix.ToolBits, t)
			}
			cost := float32(math.NaN())
			if s.Priced {
				cost = float32(s.CostUSD)
			}
			ix.Dir = append(ix.Dir, uint16(d))
			ix.Shard = append(ix.Shard, in.id(ref.Shard))
			ix.Off = append(ix.Off, ref.Off)
			ix.N = append(ix.N, ref.N)
			ix.Key = append(ix.Key, ref.Key)
			ix.ID = append(ix.ID, s.ID)
			ix.Outcome = append(ix.Outcome, in.id(s.Outcome))
			ix.Compress = append(ix.Compress, in.id(s.CompressOutcome))
			ix.Toolsets = append(ix.Toolsets, ts)
			ix.Tools = append(ix.Tools, tl)
			ix.Failures = append(ix.Failures, int32(s.ToolFailures))
			ix.Turns = append(ix.Turns, int32(s.Turns))
			ix.Tokens = append(ix.Tokens, s.Tokens)
			ix.DurationMS = append(ix.DurationMS, s.DurationMS)
			ix.Cost = append(ix.Cost, cost)
			ix.Ratio = append(ix.Ratio, float32(s.Ratio))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return ix, nil
}

// Ref returns where record i lives.
func (ix *Index) Ref(i int) (dir string, ref pipeline.RecordRef) {
	return ix.Dirs[ix.Dir[i]], pipeline.RecordRef{Key: ix.Key[i], Shard: ix.Names[ix.Shard[i]], Off: ix.Off[i], N: ix.N[i]}
}

// cacheName names the index of dirs in their current state: the folders'
// absolute paths and each ledger's size and modification time (the ledger
// is append-only, so any commit changes it).
func cacheName(dirs []string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "v%d\n", indexVersion)
	for _, dir := range dirs {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", err
		}
		fi, err := os.Stat(filepath.Join(dir, pipeline.LedgerFile))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\n%d\n%d\n", abs, fi.Size(), fi.ModTime().UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil))[:32] + ".idx", nil
}

// DefaultCacheDir is where view keeps its indexes: hermes-pipe/view under the
// user cache dir (XDG_CACHE_HOME or ~/.cache on Linux).
func DefaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no user cache dir (%w): give --cache-dir", err)
	}
	return filepath.Join(d, "hermes-pipe", "view"), nil
}

// OpenIndex loads the index of dirs from cacheDir, or builds it and stores
// it there (atomically; a cache that cannot be written is only a warning,
// returned as built=true with warn set). Stale indexes of the same folders
// are not removed: their names differ only by ledger state.
func OpenIndex(dirs []string, cacheDir string) (ix *Index, built bool, warn error, err error) {
	name, err := cacheName(dirs)
	if err != nil {
		return nil, false, nil, fmt.Errorf("view: %w", err)
	}
	path := filepath.Join(cacheDir, name)
	if ix, err := loadIndex(path); err == nil && len(ix.Dirs) == len(dirs) {
		ix.Dirs = dirs
		return ix, false, nil, nil
	}
	ix, err = BuildIndex(dirs)
	if err != nil {
		return nil, true, nil, fmt.Errorf("view: build index: %w", err)
	}
	return ix, true, saveIndex(ix, cacheDir, name), nil
}

func saveIndex(ix *Index, dir, name string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("view: index cache: %w", err)
	}
	f, err := os.CreateTemp(dir, name+".tmp*")
	if err != nil {
		return fmt.Errorf("view: index cache: %w", err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = writeIndex(bw, ix)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("view: index cache %s: %w", dir, err)
	}
	return nil
}

// The cache file: a magic line, the gob of the small fields (names, dirs)
// with the record count, then each column as its raw bytes in this
// machine's byte order (the file never leaves the machine; a file of another
// order fails the check word and is rebuilt), the key and id columns as a
// blob and its end offsets. Loading it costs one read of the file and no
// per-record allocation: strings point into the blob.
const indexMagic = "hermes-pipe view index\n"

type indexHeader struct {
	Version, Records             int
	Check                        uint32
	Dirs                         []string
	Kind                         string
	Names, ToolsetBits, ToolBits []string
	KeyBlob, IDBlob              int
}

const checkWord = 0x01020304

func rawBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

func blob(ss []string) ([]byte, []uint32) {
	n := 0
	for _, s := range ss {
		n += len(s)
	}
	b := make([]byte, 0, n)
	ends := make([]uint32, len(ss))
	for i, s := range ss {
		b = append(b, s...)
		ends[i] = uint32(len(b))
	}
	return b, ends
}

func writeIndex(w io.Writer, ix *Index) error {
	keys, keyEnds := blob(ix.Key)
	ids, idEnds := blob(ix.ID)
	h := indexHeader{Version: indexVersion, Records: ix.Len(), Check: checkWord, Dirs: ix.Dirs, Kind: ix.Kind,
		Names: ix.Names, ToolsetBits: ix.ToolsetBits, ToolBits: ix.ToolBits, KeyBlob: len(keys), IDBlob: len(ids)}
	if _, err := io.WriteString(w, indexMagic); err != nil {
		return err
	}
	if err := gob.NewEncoder(w).Encode(h); err != nil {
		return err
	}
	for _, col := range [][]byte{rawBytes(ix.Dir), rawBytes(ix.Shard), rawBytes(ix.Off), rawBytes(ix.N), rawBytes(ix.Outcome),
		rawBytes(ix.Compress), rawBytes(ix.Toolsets), rawBytes(ix.Tools), rawBytes(ix.Failures), rawBytes(ix.Turns),
		rawBytes(ix.Tokens), rawBytes(ix.DurationMS), rawBytes(ix.Cost), rawBytes(ix.Ratio),
		rawBytes(keyEnds), keys, rawBytes(idEnds), ids} {
		if _, err := w.Write(col); err != nil {
			return err
		}
	}
	return nil
}

// loadIndex reads a cache file written by writeIndex.
func loadIndex(path string) (*Index, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(data, []byte(indexMagic)) {
		return nil, errors.New("not an index file")
	}
	r := bytes.NewReader(data[len(indexMagic):])
	var h indexHeader
	if err := gob.NewDecoder(r).Decode(&h); err != nil {
		return nil, err
	}
	if h.Version != indexVersion || h.Check != checkWord {
		return nil, errors.New("index of another version or byte order")
	}
	rest := data[len(data)-r.Len():]
	n := h.Records
	ix := &Index{Version: h.Version, Dirs: h.Dirs, Kind: h.Kind, Names: h.Names, ToolsetBits: h.ToolsetBits, ToolBits: h.ToolBits}
	short := false
	take := func(size int) []byte {
		if size > len(rest) {
			short = true
			return nil
		}
		b := rest[:size:size]
		rest = rest[size:]
		return b
	}
	ix.Dir = column[uint16](take, n)
	ix.Shard = column[uint32](take, n)
	ix.Off = column[int64](take, n)
	ix.N = column[int32](take, n)
	ix.Outcome = column[uint32](take, n)
	ix.Compress = column[uint32](take, n)
	ix.Toolsets = column[uint64](take, n)
	ix.Tools = column[uint64](take, n)
	ix.Failures = column[int32](take, n)
	ix.Turns = column[int32](take, n)
	ix.Tokens = column[int64](take, n)
	ix.DurationMS = column[int64](take, n)
	ix.Cost = column[float32](take, n)
	ix.Ratio = column[float32](take, n)
	keyEnds := column[uint32](take, n)
	keys := take(h.KeyBlob)
	idEnds := column[uint32](take, n)
	ids := take(h.IDBlob)
	if short || len(rest) != 0 {
		return nil, errors.New("index file has the wrong size")
	}
	ix.Key = unblob(keys, keyEnds)
	ix.ID = unblob(ids, idEnds)
	if ix.Key == nil || ix.ID == nil {
		return nil, errors.New("index file has bad string offsets")
	}
	return ix, nil
}

// column views the next n values of a column in place. The file's data is
// read into one []byte, whose start the Go allocator aligns to 8 bytes; the
// columns keep their alignment because each wider column comes first or
// after columns whose total size keeps it (checked, else copied).
func column[T any](take func(int) []byte, n int) []T {
	var zero T
	size := int(unsafe.Sizeof(zero))
	b := take(n * size)
	if b == nil || n == 0 {
		return make([]T, 0)
	}
	if uintptr(unsafe.Pointer(&b[0]))%unsafe.Alignof(zero) != 0 {
		out := make([]T, n)
		copy(rawBytes(out), b)
		return out
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

func unblob(b []byte, ends []uint32) []string {
	out := make([]string, len(ends))
	var start uint32
	for i, e := range ends {
		if e < start || int(e) > len(b) {
			return nil
		}
		if e > start {
			out[i] = unsafe.String(&b[start], int(e-start))
		}
		start = e
	}
	return out
}

var errBadQuery = errors.New("bad query")
