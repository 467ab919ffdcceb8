package view

import (
	"bufio"
	"bytes"
	"cmp"
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
	"slices"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
)

// indexVersion changes when the index layout does; older cache files are
// rebuilt (the version is part of the cache file's name and its header).
const indexVersion = 6

// Index is what the viewer knows of every live record, in ledger order (the
// plan's numbering; Order holds cat's): where it is and the
// fields its filters and sort read, column by column. The columns are views
// of the cache file mapped into memory (read-only), so opening an index
// reads only its header, and a filter touches only the pages of the columns
// it reads: about 65 bytes per record in all plus the first line of its
// prompt (at most report.PromptRunes runes, read only for the rows of a
// page), of which a filter by outcome reads 2. Names (shards, outcomes, tools) are in small dictionaries the
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
	Reward     []float32 // NaN = no reward (ungraded, or the grader failed)
	Grade      []uint8   // report.Grade: 0 ungraded, passed, failed, errored
	// Order is the list's default order, cat's: by prompt_index, sample
	// and key (the records themselves are in ledger order).
	Order []int32

	keys, ids, prompts strs
	n                  int
	release            func() error // unmaps the file
}

// Len is the number of records.
func (ix *Index) Len() int { return ix.n }

// Key is record i's key (a copy: it outlives the index).
func (ix *Index) Key(i int) string { return ix.keys.at(i) }

// ID is record i's id ("" when it has none).
func (ix *Index) ID(i int) string { return ix.ids.at(i) }

// Prompt is the first line of record i's prompt, cut (report.Summary's
// Prompt; "" when it has none).
func (ix *Index) Prompt(i int) string { return ix.prompts.at(i) }

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
	{"order", 4}, {"prompt_ends", 8}, {"prompts", 0}, {"reward", 4}, {"grade", 1},
}

// The columns written while building that the file does not keep: what
// finish sorts the order column by.
var sortColumns = []string{"pi", "sample"}

// cacheName names the index of dirs in the ledger states given: prefix
// hashes the folders' absolute paths, so every index of the same folders
// starts with it (and writing one removes the others, of older index
// versions too); the rest hashes the index version and each ledger's size
// and modification time (the ledger is append-only, so any commit changes
// them).
func cacheName(dirs []string, states []ledgerState) (prefix, name string, err error) {
	hp, hs := sha256.New(), sha256.New()
	fmt.Fprintf(hs, "v%d\n", indexVersion)
	for d, dir := range dirs {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", "", err
		}
		fmt.Fprintf(hp, "%s\n", abs)
		fmt.Fprintf(hs, "%d\n%d\n", states[d].size, states[d].mod.UnixNano())
	}
	prefix = hex.EncodeToString(hp.Sum(nil))[:24]
	return prefix, prefix + "-" + hex.EncodeToString(hs.Sum(nil))[:16] + ".idx", nil
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

// OpenIndex maps the index of dirs from cacheDir, or builds it there first
// (what Open does in the background, done here before it returns). A cache
// folder that cannot be written is only a warning (returned as built=true
// with warn set): the index is then built in the temp dir and its file
// removed once mapped.
func OpenIndex(dirs []string, cacheDir string) (ix *Index, built bool, warn error, err error) {
	c, err := newCached(dirs, cacheDir)
	if err != nil {
		return nil, false, nil, err
	}
	if ix := c.mapped(); ix != nil {
		return ix, false, nil, nil
	}
	p, err := makePlan(dirs, c.states, c.mans)
	if err != nil {
		return nil, true, nil, fmt.Errorf("view: %w", err)
	}
	ix, warn, err = c.build(p, nil, nil)
	return ix, true, warn, err
}

// cached is where the index of dirs in their current state is kept.
type cached struct {
	dirs         []string
	states       []ledgerState
	mans         []outdir.Manifest
	dir          string // the cache folder
	prefix, name string
}

func newCached(dirs []string, cacheDir string) (*cached, error) {
	states, mans, err := checkFolders(dirs)
	if err != nil {
		return nil, fmt.Errorf("view: %w", err)
	}
	prefix, name, err := cacheName(dirs, states)
	if err != nil {
		return nil, fmt.Errorf("view: %w", err)
	}
	return &cached{dirs: dirs, states: states, mans: mans, dir: cacheDir, prefix: prefix, name: name}, nil
}

// mapped is the cached index, or nil when there is none (or it is damaged).
func (c *cached) mapped() *Index {
	ix, err := mapIndex(filepath.Join(c.dir, c.name))
	if err != nil {
		return nil
	}
	if len(ix.Dirs) != len(c.dirs) {
		ix.Close()
		return nil
	}
	ix.Dirs = c.dirs
	return ix
}

// build builds p's index into the cache folder and maps it; once it is
// there, the older indexes of the same folders are removed (a viewer that
// has one mapped keeps reading it: unlinking leaves a mapping whole). prog
// and hold are buildFile's.
func (c *cached) build(p *plan, prog *progress, hold func(done int)) (ix *Index, warn error, err error) {
	tmp, werr := makeTemp(c.dir)
	if werr != nil {
		warn = fmt.Errorf("view: index cache %s: %w", c.dir, werr)
		if tmp, err = makeTemp(""); err != nil {
			return nil, warn, fmt.Errorf("view: build index: %w", err)
		}
	}
	defer os.RemoveAll(tmp)
	file, err := buildFile(p, tmp, prog, hold)
	if err != nil {
		return nil, warn, fmt.Errorf("view: build index: %w", err)
	}
	path := filepath.Join(c.dir, c.name)
	if warn == nil {
		if err := os.Rename(file, path); err != nil {
			warn = fmt.Errorf("view: index cache %s: %w", c.dir, err)
		} else {
			file = path
		}
	}
	ix, err = mapIndex(file)
	if err != nil {
		return nil, warn, fmt.Errorf("view: index %s: %w", file, err)
	}
	ix.Dirs = c.dirs
	if file == path {
		c.removeOlder()
	}
	return ix, warn, nil
}

// removeOlder removes the other indexes of the same folders: their names
// differ only by ledger state, and the ledger only grows.
func (c *cached) removeOlder() {
	old, _ := filepath.Glob(filepath.Join(c.dir, c.prefix+"-*.idx"))
	for _, f := range old {
		if filepath.Base(f) != c.name {
			os.Remove(f) // best effort: another viewer may have removed it
		}
	}
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
	states, mans, err := checkFolders(dirs)
	if err != nil {
		return nil, err
	}
	p, err := makePlan(dirs, states, mans)
	if err != nil {
		return nil, err
	}
	tmp, err := makeTemp("")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	file, err := buildFile(p, tmp, nil, nil)
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

func (c *colFile) u8(v uint8)   { c.put(append(c.buf[:0], v)) }
func (c *colFile) u16(v uint16) { c.put(binary.NativeEndian.AppendUint16(c.buf[:0], v)) }
func (c *colFile) u32(v uint32) { c.put(binary.NativeEndian.AppendUint32(c.buf[:0], v)) }
func (c *colFile) u64(v uint64) { c.put(binary.NativeEndian.AppendUint64(c.buf[:0], v)) }

// builder collects the index of dirs while it reads them.
type builder struct {
	h         indexHeader
	cols      []*colFile
	sortCols  []*colFile // pi, sample
	outcomes  map[string]uint16
	compress  map[string]uint16
	shards    map[string]uint32
	keyEnd    uint64
	idEnd     uint64
	promptEnd uint64
}

func dictPos[T uint16 | uint32](m map[string]T, dict *[]string, counts *[]int, s string) (T, error) {
	p, ok := m[s]
	if !ok {
		if uint64(len(*dict)) > uint64(^T(0)) {
			return 0, fmt.Errorf("more than %d distinct values", uint64(^T(0))+1)
		}
		p = T(len(*dict))
		s = strings.Clone(s) // s may point into a reused buffer
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
	*names = append(*names, strings.Clone(name))
	return 1 << (len(*names) - 1)
}

func sat16[T int | int32 | int64](v T) uint16 { return uint16(min(max(v, 0), math.MaxUint16)) }
func sat32(v int64) uint32                    { return uint32(min(max(v, 0), math.MaxUint32)) }

// progress is how far a build is: live records indexed, of all.
type progress struct {
	done atomic.Int64
	stop chan struct{}             // closed: end the build (ErrClosed); nil = never
	seen atomic.Pointer[seenNames] // the build's dictionaries so far
}

// ErrClosed is why a build ended when its server was closed first.
var ErrClosed = errors.New("the viewer was closed before the index was built")

// stopped reports whether the build was asked to end.
func (p *progress) stopped() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

// buildFile reads every live record of p once, in ledger order, summarises
// it (report.Summarize) and writes the index file into tmp, returning its
// path. prog (may be nil) follows it; hold (may be nil: tests) is called
// before each ledger line with the records indexed so far.
//
// It streams the ledger: its memory is the plan (a bit a row), one ledger
// line read again at a time, a window of the shard it reads, the columns'
// write buffers, and the decoders' short-lived garbage.
func buildFile(p *plan, tmp string, prog *progress, hold func(done int)) (string, error) {
	if prog == nil {
		prog = &progress{}
	}
	if len(p.dirs) > math.MaxUint16+1 {
		return "", fmt.Errorf("%d folders: the index holds at most %d", len(p.dirs), math.MaxUint16+1)
	}
	dirs := make([]string, len(p.dirs))
	for d := range p.dirs {
		dirs[d] = p.dirs[d].dir
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
	for _, name := range sortColumns {
		f, err := os.Create(filepath.Join(tmp, name))
		if err != nil {
			return "", err
		}
		b.sortCols = append(b.sortCols, &colFile{f: f, w: bufio.NewWriterSize(f, 64<<10)})
	}
	defer func() {
		for _, c := range b.sortCols {
			c.f.Close()
		}
	}()
	var lr lineReader // its rows' keys point into its buffer: b.add copies what it keeps
	for d := range p.dirs {
		dp := &p.dirs[d]
		b.h.Kind = dp.man.Kind
		if err := b.addDir(p, d, prog, hold, &lr); err != nil {
			return "", fmt.Errorf("read %s: %w", dp.dir, err)
		}
	}
	return b.finish(tmp, filepath.Join(tmp, "index"))
}

// addDir indexes the live records of folder d, shard by shard, with cat's
// checks: each shard's size against its ledger line, and the SHA-256 of a
// shard not older than the ledger (written, copied or pulled since it was
// committed).
func (b *builder) addDir(p *plan, d int, prog *progress, hold func(done int), lr *lineReader) error {
	dp := &p.dirs[d]
	if dp.live == 0 {
		return nil // its ledger may not exist yet
	}
	lf, err := os.Open(dp.ledger)
	if err != nil {
		return err
	}
	defer lf.Close()
	rd := pipeline.NewRecordReader(dp.dir)
	defer rd.Close()
	var win shardWindow
	defer win.close()
	for li := range dp.lines {
		if hold != nil {
			hold(int(prog.done.Load()))
		}
		if dp.lines[li].live == 0 {
			continue
		}
		jsonl := false
		start := func(pl *parsedLine) error {
			if err := checkShard(dp, pl); err != nil {
				return err
			}
			if jsonl = strings.HasSuffix(pl.shard, ".jsonl"); jsonl {
				return win.open(dp.dir, pl.shard)
			}
			return nil
		}
		k := 0
		err := lr.each(p, lf, d, li, start, func(r liveRow) error {
			if k++; k%1024 == 0 && prog.stopped() {
				return ErrClosed
			}
			var line []byte
			var err error
			if jsonl {
				line, err = win.line(r.ref)
			} else {
				line, err = rd.Read(r.ref)
			}
			if err != nil {
				return err
			}
			if err := b.add(uint16(d), r, fieldsOf(r.ref, line, &dp.man)); err != nil {
				return fmt.Errorf("%s byte %d (record %s): index: %w", r.ref.Shard, r.ref.Off, r.ref.Key, err)
			}
			b.publish(prog)
			prog.done.Add(1)
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// checkShard holds a shard to its ledger line as cat does: its size always,
// its SHA-256 when it is not older than the ledger.
func checkShard(dp *dirPlan, pl *parsedLine) error {
	fi, err := pipeline.CheckShardSize(dp.dir, pl.shard, pl.bytes)
	if err != nil || fi.ModTime().Before(dp.mod) {
		return err
	}
	return pipeline.CheckShardHash(dp.dir, pl.shard, pl.sha)
}

// shardWindow reads the lines of one JSONL shard through a window: of
// searchWindow bytes when reading on in file order, else of the line.
type shardWindow struct {
	path   string
	f      *os.File
	win    []byte
	winOff int64
	next   int64 // where the previous line ended
}

// open opens the shard rel of the folder dir through outdir.OpenShard (a
// path out of the folder or a link is refused, never followed).
func (w *shardWindow) open(dir, rel string) error {
	path := filepath.Join(dir, filepath.FromSlash(rel))
	if w.path == path && w.f != nil {
		return nil
	}
	w.close()
	f, err := outdir.OpenShard(dir, rel)
	if err != nil {
		return fmt.Errorf("open shard: %w", err)
	}
	w.f, w.path, w.win, w.winOff, w.next = f, path, w.win[:0], 0, 0
	return nil
}

func (w *shardWindow) close() {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
}

// errNotALine: the bytes a record is said to take do not end with a
// newline.
var errNotALine = errors.New("does not end a line")

// shortShard: the shard ends, at byte end, before the bytes asked for.
type shortShard struct{ end int64 }

func (e shortShard) Error() string { return fmt.Sprintf("the shard ends at byte %d", e.end) }

// at returns the line of n bytes (n > 0) at off, valid until the next call:
// errNotALine, shortShard or a read error otherwise.
func (w *shardWindow) at(off, n int64) ([]byte, error) {
	if off < w.winOff || off+n > w.winOff+int64(len(w.win)) {
		size := n
		if off == w.next {
			size = max(n, searchWindow)
		}
		if int64(cap(w.win)) < size {
			w.win = make([]byte, size)
		}
		got, err := w.f.ReadAt(w.win[:size], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if int64(got) < n {
			return nil, shortShard{end: off + int64(got)}
		}
		w.win, w.winOff = w.win[:got], off
	}
	line := w.win[off-w.winOff : off-w.winOff+n]
	if line[n-1] != '\n' {
		return nil, errNotALine
	}
	w.next = off + n
	return line, nil
}

// line returns the line ref points at, valid until the next call.
func (w *shardWindow) line(ref pipeline.RecordRef) ([]byte, error) {
	off, n := ref.Off, int64(ref.N)
	if n <= 0 {
		return nil, fmt.Errorf("%s: record %s has no line", ref.Shard, ref.Key)
	}
	line, err := w.at(off, n)
	if err == nil {
		return line, nil
	}
	var short shortShard
	switch {
	case errors.As(err, &short):
		return nil, fmt.Errorf("shard %s ends at byte %d, but the ledger places record %s up to byte %d: the shard was cut short; %s", ref.Shard, short.end, ref.Key, off+n, pipeline.HealHint)
	case errors.Is(err, errNotALine):
		return nil, fmt.Errorf("%s: record %s at byte %d does not end a line: the ledger and the shard disagree (run verify)", ref.Shard, ref.Key, off)
	default:
		return nil, fmt.Errorf("read %s at byte %d: %w", ref.Shard, off, err)
	}
}

func (b *builder) add(dir uint16, r liveRow, f recFields) error {
	ref := r.ref
	b.sortCols[0].u64(uint64(r.pi))
	b.sortCols[1].u64(uint64(r.sample))
	oc, err := dictPos(b.outcomes, &b.h.Outcomes, &b.h.OutcomeCount, f.Outcome)
	if err != nil {
		return fmt.Errorf("outcome: %w", err)
	}
	co, err := dictPos(b.compress, &b.h.Compresses, &b.h.CompressCount, f.Compress)
	if err != nil {
		return fmt.Errorf("compress outcome: %w", err)
	}
	sh, err := dictPos(b.shards, &b.h.Shards, nil, ref.Shard)
	if err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	var ts, tl uint64
	for _, t := range f.Toolsets {
		ts |= bit(&b.h.ToolsetBits, t)
	}
	for _, t := range f.Tools {
		tl |= bit(&b.h.ToolBits, t)
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
	c[8].u16(f.Failures)
	c[9].u16(f.Turns)
	c[10].u32(f.Tokens)
	c[11].u32(f.Duration)
	c[12].u32(math.Float32bits(f.Cost))
	c[13].u32(math.Float32bits(f.Ratio))
	b.keyEnd += uint64(len(ref.Key))
	c[14].u64(b.keyEnd)
	c[15].str(ref.Key)
	b.idEnd += uint64(len(f.ID))
	c[16].u64(b.idEnd)
	c[17].str(f.ID)
	b.promptEnd += uint64(len(f.Prompt))
	c[19].u64(b.promptEnd)
	c[20].str(f.Prompt)
	c[21].u32(math.Float32bits(f.Reward))
	c[22].u8(uint8(f.Grade))
	b.h.Records++
	return nil
}

// finish writes the index file at path: the header, then the columns each
// copied from its build file.
func (b *builder) finish(tmp, path string) (string, error) {
	if err := b.writeOrder(tmp); err != nil {
		return "", err
	}
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

// writeOrder writes the order column: the records sorted by prompt_index,
// sample and key (ledger order among equals), read from the build files
// mapped (4 bytes a record in memory, the permutation).
func (b *builder) writeOrder(tmp string) error {
	n := b.h.Records
	var order []int32
	if n > 0 {
		maps := map[string][]byte{}
		for _, c := range append(append([]*colFile{}, b.sortCols...), b.cols[14], b.cols[15]) {
			if err := c.w.Flush(); err != nil {
				return err
			}
			data, release, err := mapFile(c.f.Name())
			if err != nil {
				return err
			}
			defer release()
			maps[filepath.Base(c.f.Name())] = data
		}
		pi, sample := view[int64](maps["pi"], n), view[int64](maps["sample"], n)
		keys := strs{ends: view[uint64](maps["key_ends"], n), blob: maps["keys"]}
		key := func(i int32) []byte {
			var start uint64
			if i > 0 {
				start = keys.ends[i-1]
			}
			return keys.blob[start:keys.ends[i]]
		}
		order = make([]int32, n)
		for i := range order {
			order[i] = int32(i)
		}
		// Keys are compared (and their pages read) only between records
		// of the same prompt_index and sample.
		slices.SortStableFunc(order, func(x, y int32) int {
			if c := cmp.Compare(pi[x], pi[y]); c != 0 {
				return c
			}
			if c := cmp.Compare(sample[x], sample[y]); c != 0 {
				return c
			}
			return bytes.Compare(key(x), key(y))
		})
	}
	c := b.cols[18]
	for _, i := range order {
		c.u32(uint32(i))
	}
	return nil
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
	ix.Order = view[int32](raw[18], n)
	ix.prompts = strs{ends: view[uint64](raw[19], n), blob: raw[20]}
	ix.Reward = view[float32](raw[21], n)
	ix.Grade = view[uint8](raw[22], n)
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
