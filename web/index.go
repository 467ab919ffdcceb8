package web

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"unsafe"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/pipeline/report"
)

// buildGC is the collector's GOGC while an index is built, and
// buildMemLimit its soft memory limit then (when none is set).
const (
	buildGC       = 40
	buildMemLimit = 240 << 20
)

// indexVersion changes when the index layout does; older cache files are
// rebuilt (the version is part of the cache file's name and its header).
const indexVersion = 3

// Index is what the viewer knows of every live record: where it is and the
// fields its filters and sort read, column by column. The columns are views
// of the cache file mapped into memory (read-only), so opening an index
// reads only its header, and a filter touches only the pages of the columns
// it reads: about 60 bytes per record in all, of which a filter by outcome
// reads 2. Names (shards, outcomes, tools) are in small dictionaries the
// columns refer to by position; counts are saturated to their column's
// width (65535 turns, 4294967295 tokens).
type Index struct {
	Dirs          []string // the run's folders, in order
	Kind          string
	Shards        []string // Shard column's dictionary
	Outcomes      []string // Outcome column's dictionary
	Compresses    []string // Compress column's dictionary; [0] = "" (no compression metrics)
	OutcomeCount  []int    // records per Outcomes entry
	CompressCount []int    // records per Compresses entry
	ToolsetBits   []string // at most 64; more are folded into the last
	ToolBits      []string

	Dir        []uint16
	Shard      []uint32
	Off        []int64
	N          []int32
	Outcome    []uint16
	Compress   []uint16
	Toolsets   []uint64 // bit i = ToolsetBits[i]
	Tools      []uint64 // bit i = ToolBits[i]
	Failures   []uint16
	Turns      []uint16
	Tokens     []uint32
	DurationMS []uint32
	Cost       []float32 // NaN = unpriced
	Ratio      []float32

	keys, ids strs
	n         int
	release   func() error // unmaps the file
}

// Len is the number of records.
func (ix *Index) Len() int { return ix.n }

// Key is record i's key (a copy: it outlives the index).
func (ix *Index) Key(i int) string { return ix.keys.at(i) }

// ID is record i's id ("" when it has none).
func (ix *Index) ID(i int) string { return ix.ids.at(i) }

// OutcomeName is record i's outcome.
func (ix *Index) OutcomeName(i int) string { return name(ix.Outcomes, int(ix.Outcome[i])) }

// CompressName is record i's compress outcome ("" when it has none).
func (ix *Index) CompressName(i int) string { return name(ix.Compresses, int(ix.Compress[i])) }

// name is dict[i], or "" for a position the dictionary does not have (a
// damaged cache file must not stop the viewer).
func name(dict []string, i int) string {
	if i < 0 || i >= len(dict) {
		return ""
	}
	return dict[i]
}

// Ref returns where record i lives.
func (ix *Index) Ref(i int) (dir string, ref pipeline.RecordRef) {
	return name(ix.Dirs, int(ix.Dir[i])), pipeline.RecordRef{Key: ix.Key(i), Shard: name(ix.Shards, int(ix.Shard[i])), Off: ix.Off[i], N: ix.N[i]}
}

// Close unmaps the index's file; the index must not be used after.
func (ix *Index) Close() error {
	if ix.release == nil {
		return nil
	}
	r := ix.release
	ix.release = nil
	return r()
}

// strs is a string column: the strings end to end in blob, ends[i] the end
// of string i.
type strs struct {
	blob []byte
	ends []uint64
}

func (s strs) at(i int) string {
	var start uint64
	if i > 0 {
		start = s.ends[i-1]
	}
	end := s.ends[i]
	if start > end || end > uint64(len(s.blob)) {
		return ""
	}
	return string(s.blob[start:end])
}

// The columns of the cache file, in file order, with their element size (0
// = a blob of any length).
var columns = []struct {
	name string
	size int
}{
	{"dir", 2}, {"shard", 4}, {"off", 8}, {"n", 4}, {"outcome", 2}, {"compress", 2},
	{"toolsets", 8}, {"tools", 8}, {"failures", 2}, {"turns", 2}, {"tokens", 4}, {"duration", 4},
	{"cost", 4}, {"ratio", 4}, {"key_ends", 8}, {"keys", 0}, {"id_ends", 8}, {"ids", 0},
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

// OpenIndex maps the index of dirs from cacheDir, or builds it there first.
// A cache folder that cannot be written is only a warning (returned as
// built=true with warn set): the index is then built in the temp dir and
// its file removed once mapped. Stale indexes of the same folders are not
// removed: their names differ only by ledger state.
func OpenIndex(dirs []string, cacheDir string) (ix *Index, built bool, warn error, err error) {
	name, err := cacheName(dirs)
	if err != nil {
		return nil, false, nil, fmt.Errorf("view: %w", err)
	}
	path := filepath.Join(cacheDir, name)
	if ix, err := mapIndex(path); err == nil {
		if len(ix.Dirs) == len(dirs) {
			ix.Dirs = dirs
			return ix, false, nil, nil
		}
		ix.Close()
	}
	tmp, werr := makeTemp(cacheDir)
	if werr != nil {
		warn = fmt.Errorf("view: index cache %s: %w", cacheDir, werr)
		if tmp, err = makeTemp(""); err != nil {
			return nil, true, warn, fmt.Errorf("view: build index: %w", err)
		}
	}
	defer os.RemoveAll(tmp)
	file, err := buildFile(dirs, tmp)
	if err != nil {
		return nil, true, warn, fmt.Errorf("view: build index: %w", err)
	}
	if warn == nil {
		if err := os.Rename(file, path); err != nil {
			warn = fmt.Errorf("view: index cache %s: %w", cacheDir, err)
		} else {
			file = path
		}
	}
	ix, err = mapIndex(file)
	if err != nil {
		return nil, true, warn, fmt.Errorf("view: index %s: %w", file, err)
	}
	ix.Dirs = dirs
	return ix, true, warn, nil
}

func makeTemp(dir string) (string, error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
	}
	return os.MkdirTemp(dir, "build-*.tmp")
}

// BuildIndex reads every live record of dirs once and returns their index,
// kept in a temp file that is removed once mapped.
func BuildIndex(dirs []string) (*Index, error) {
	tmp, err := makeTemp("")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	file, err := buildFile(dirs, tmp)
	if err != nil {
		return nil, err
	}
	ix, err := mapIndex(file)
	if err != nil {
		return nil, err
	}
	ix.Dirs = dirs
	return ix, nil
}

// colFile is one column being written, to its own file in the build
// folder, so building holds no column in memory.
type colFile struct {
	f   *os.File
	w   *bufio.Writer
	len int64
	buf [8]byte
}

func (c *colFile) put(b []byte) {
	c.w.Write(b) // bufio keeps the first error for Flush
	c.len += int64(len(b))
}

func (c *colFile) str(s string) {
	c.w.WriteString(s)
	c.len += int64(len(s))
}

func (c *colFile) u16(v uint16) { c.put(binary.NativeEndian.AppendUint16(c.buf[:0], v)) }
func (c *colFile) u32(v uint32) { c.put(binary.NativeEndian.AppendUint32(c.buf[:0], v)) }
func (c *colFile) u64(v uint64) { c.put(binary.NativeEndian.AppendUint64(c.buf[:0], v)) }

// builder collects the index of dirs while it reads them.
type builder struct {
	h        indexHeader
	cols     []*colFile
	outcomes map[string]uint16
	compress map[string]uint16
	shards   map[string]uint32
	keyEnd   uint64
	idEnd    uint64
}

func dictPos[T uint16 | uint32](m map[string]T, dict *[]string, counts *[]int, s string) (T, error) {
	p, ok := m[s]
	if !ok {
		if uint64(len(*dict)) > uint64(^T(0)) {
			return 0, fmt.Errorf("more than %d distinct values", uint64(^T(0))+1)
		}
		p = T(len(*dict))
		*dict = append(*dict, s)
		m[s] = p
		if counts != nil {
			*counts = append(*counts, 0)
		}
	}
	if counts != nil {
		(*counts)[p]++
	}
	return p, nil
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

func sat16[T int | int32 | int64](v T) uint16 { return uint16(min(max(v, 0), math.MaxUint16)) }
func sat32(v int64) uint32                    { return uint32(min(max(v, 0), math.MaxUint32)) }

// buildFile reads every live record of dirs once (pipeline.EachRecord),
// summarises it (report.Summarize) and writes the index file into tmp,
// returning its path.
//
// Its own memory is a few buffers; the live heap while it runs is
// pipeline.EachRecord's ledger index (about 200 bytes a record) and most
// allocation is the decoders' short-lived garbage, so the collector runs at
// buildGC percent of the live heap rather than 100 for the build: on 1M
// records that lowers the peak RSS by a quarter at no measurable CPU.
func buildFile(dirs []string, tmp string) (string, error) {
	if old := debug.SetGCPercent(buildGC); old > buildGC {
		defer debug.SetGCPercent(old)
	} else {
		debug.SetGCPercent(old) // GOGC already lower, or off
	}
	// A soft memory limit too, unless one is set: the folder's ledger index
	// (pipeline, about 200 bytes a record) is most of the live heap, and the
	// collector then runs as often as staying under the limit needs (Go
	// caps its CPU share) instead of letting garbage double the heap.
	if old := debug.SetMemoryLimit(-1); old == math.MaxInt64 {
		debug.SetMemoryLimit(buildMemLimit)
		defer debug.SetMemoryLimit(old)
	}
	if len(dirs) > math.MaxUint16+1 {
		return "", fmt.Errorf("%d folders: the index holds at most %d", len(dirs), math.MaxUint16+1)
	}
	b := &builder{outcomes: map[string]uint16{}, compress: map[string]uint16{"": 0}, shards: map[string]uint32{}}
	b.h = indexHeader{Version: indexVersion, Check: checkWord, Dirs: dirs, Compresses: []string{""}, CompressCount: []int{0}}
	defer func() {
		for _, c := range b.cols {
			c.f.Close()
		}
	}()
	for _, col := range columns {
		f, err := os.Create(filepath.Join(tmp, col.name))
		if err != nil {
			return "", err
		}
		b.cols = append(b.cols, &colFile{f: f, w: bufio.NewWriterSize(f, 64<<10)})
	}
	for d, dir := range dirs {
		man, _, err := outdir.ReadManifest(dir)
		if err != nil {
			return "", err
		}
		b.h.Kind = man.Kind
		err = pipeline.EachRecord(dir, func(ref pipeline.RecordRef, line []byte) error {
			if err := b.add(uint16(d), ref, report.Summarize(line, &man)); err != nil {
				return fmt.Errorf("%s byte %d (record %s): index: %w", ref.Shard, ref.Off, ref.Key, err)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	return b.finish(filepath.Join(tmp, "index"))
}

func (b *builder) add(dir uint16, ref pipeline.RecordRef, s report.Summary) error {
	if s.Outcome == "" {
		s.Outcome = string(ref.Outcome)
	}
	oc, err := dictPos(b.outcomes, &b.h.Outcomes, &b.h.OutcomeCount, s.Outcome)
	if err != nil {
		return fmt.Errorf("outcome: %w", err)
	}
	co, err := dictPos(b.compress, &b.h.Compresses, &b.h.CompressCount, s.CompressOutcome)
	if err != nil {
		return fmt.Errorf("compress outcome: %w", err)
	}
	sh, err := dictPos(b.shards, &b.h.Shards, nil, ref.Shard)
	if err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	var ts, tl uint64
	for _, t := range s.Toolsets {
		ts |= bit(&b.h.ToolsetBits, t)
	}
	for _, t := range s.Tools {
		tl |= bit(&b.h.ToolBits, t)
	}
	cost := float32(math.NaN())
	if s.Priced {
		cost = float32(s.CostUSD)
	}
	c := b.cols
	c[0].u16(dir)
	c[1].u32(sh)
	c[2].u64(uint64(ref.Off))
	c[3].u32(uint32(ref.N))
	c[4].u16(oc)
	c[5].u16(co)
	c[6].u64(ts)
	c[7].u64(tl)
	c[8].u16(sat16(s.ToolFailures))
	c[9].u16(sat16(s.Turns))
	c[10].u32(sat32(s.Tokens))
	c[11].u32(sat32(s.DurationMS))
	c[12].u32(math.Float32bits(cost))
	c[13].u32(math.Float32bits(float32(s.Ratio)))
	b.keyEnd += uint64(len(ref.Key))
	c[14].u64(b.keyEnd)
	c[15].str(ref.Key)
	b.idEnd += uint64(len(s.ID))
	c[16].u64(b.idEnd)
	c[17].str(s.ID)
	b.h.Records++
	return nil
}

// finish writes the index file at path: the header, then the columns each
// copied from its build file.
func (b *builder) finish(path string) (string, error) {
	var off int64
	for i, c := range b.cols {
		if err := c.w.Flush(); err != nil {
			return "", err
		}
		if _, err := c.f.Seek(0, io.SeekStart); err != nil {
			return "", err
		}
		b.h.Cols = append(b.h.Cols, colSpan{Name: columns[i].name, Off: off, Len: c.len})
		off = align8(off + c.len)
	}
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	var hb bytes.Buffer
	if err := gob.NewEncoder(&hb).Encode(b.h); err != nil {
		return "", err
	}
	w.WriteString(indexMagic)
	w.Write(binary.NativeEndian.AppendUint64(nil, uint64(hb.Len())))
	w.Write(hb.Bytes())
	pos := int64(len(indexMagic) + 8 + hb.Len())
	var zeros [8]byte
	w.Write(zeros[:align8(pos)-pos])
	for _, c := range b.cols {
		if _, err := io.Copy(w, c.f); err != nil {
			return "", err
		}
		w.Write(zeros[:align8(c.len)-c.len])
	}
	if err := w.Flush(); err != nil {
		return "", err
	}
	return path, f.Close()
}

func align8(n int64) int64 { return (n + 7) &^ 7 }

// The cache file: a magic line, the length of the gob header that follows
// (the dictionaries, counts and where each column is), zero bytes up to a
// multiple of 8, then the columns, each starting at a multiple of 8, as raw
// values in this machine's byte order (the file never leaves the machine; a
// file of another order fails the check word and is rebuilt).
const indexMagic = "hermes-pipe view index\n"

type indexHeader struct {
	Version, Records             int
	Check                        uint32
	Dirs                         []string
	Kind                         string
	Shards, Outcomes, Compresses []string
	OutcomeCount, CompressCount  []int
	ToolsetBits, ToolBits        []string
	Cols                         []colSpan
}

type colSpan struct {
	Name     string
	Off, Len int64 // from the end of the header's padding
}

const checkWord = 0x01020304

// mapIndex maps the index file at path and views its columns.
func mapIndex(path string) (*Index, error) {
	data, release, err := mapFile(path)
	if err != nil {
		return nil, err
	}
	ix, err := viewIndex(data)
	if err != nil {
		release()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ix.release = release
	return ix, nil
}

func viewIndex(data []byte) (*Index, error) {
	head := len(indexMagic) + 8
	if len(data) < head || !bytes.HasPrefix(data, []byte(indexMagic)) {
		return nil, errors.New("not an index file")
	}
	hlen := binary.NativeEndian.Uint64(data[len(indexMagic):head])
	if hlen > uint64(len(data)-head) {
		return nil, errors.New("index header longer than the file")
	}
	var h indexHeader
	if err := gob.NewDecoder(bytes.NewReader(data[head : head+int(hlen)])).Decode(&h); err != nil {
		return nil, fmt.Errorf("index header: %w", err)
	}
	if h.Version != indexVersion || h.Check != checkWord {
		return nil, errors.New("index of another version or byte order")
	}
	if len(h.Cols) != len(columns) || len(h.OutcomeCount) != len(h.Outcomes) || len(h.CompressCount) != len(h.Compresses) || h.Records < 0 {
		return nil, errors.New("index header does not describe its columns")
	}
	body := data[align8(int64(head)+int64(hlen)):]
	n := h.Records
	raw := make([][]byte, len(columns))
	for i, c := range h.Cols {
		want := columns[i]
		if c.Name != want.name || c.Off < 0 || c.Len < 0 || c.Off > int64(len(body)) || c.Len > int64(len(body))-c.Off ||
			want.size > 0 && c.Len != int64(n)*int64(want.size) {
			return nil, fmt.Errorf("index column %d (%s) has the wrong place or size", i, c.Name)
		}
		raw[i] = body[c.Off : c.Off+c.Len : c.Off+c.Len]
	}
	ix := &Index{Kind: h.Kind, Dirs: h.Dirs, Shards: h.Shards, Outcomes: h.Outcomes, Compresses: h.Compresses,
		OutcomeCount: h.OutcomeCount, CompressCount: h.CompressCount, ToolsetBits: h.ToolsetBits, ToolBits: h.ToolBits, n: n}
	ix.Dir = view[uint16](raw[0], n)
	ix.Shard = view[uint32](raw[1], n)
	ix.Off = view[int64](raw[2], n)
	ix.N = view[int32](raw[3], n)
	ix.Outcome = view[uint16](raw[4], n)
	ix.Compress = view[uint16](raw[5], n)
	ix.Toolsets = view[uint64](raw[6], n)
	ix.Tools = view[uint64](raw[7], n)
	ix.Failures = view[uint16](raw[8], n)
	ix.Turns = view[uint16](raw[9], n)
	ix.Tokens = view[uint32](raw[10], n)
	ix.DurationMS = view[uint32](raw[11], n)
	ix.Cost = view[float32](raw[12], n)
	ix.Ratio = view[float32](raw[13], n)
	ix.keys = strs{ends: view[uint64](raw[14], n), blob: raw[15]}
	ix.ids = strs{ends: view[uint64](raw[16], n), blob: raw[17]}
	return ix, nil
}

// view is b seen as n values of T in place. b starts at a multiple of 8
// from the start of the data, which is page-aligned when mapped and 8-byte
// aligned when read into the Go heap; a misaligned b is copied.
func view[T any](b []byte, n int) []T {
	var zero T
	if n == 0 {
		return []T{}
	}
	if uintptr(unsafe.Pointer(&b[0]))%unsafe.Alignof(zero) != 0 {
		out := make([]T, n)
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(b)), b)
		return out
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

var errBadQuery = errors.New("bad query")
