package view

import (
	"bufio"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// A plan is what one pass over the ledgers of a run tells: where each
// ledger line is, and which rows are live records (the latest row of their
// key, with a line in a shard). It holds no key: 48 bytes a ledger line and
// one bit a row, so 1,000,000 records cost about 130 KB once planned (about
// 32 MB while the pass runs, for the keys' hashes: lastRows).
//
// The index lists the live records in ledger order (folder by folder, then
// the ledger's lines and rows), so a record's position is the same whether
// it was found through the plan (while the index is being built) or
// through the index: record i is the i-th live row.
type plan struct {
	dirs     []dirPlan
	live     int            // live records in all folders
	outcomes map[string]int // live records per ledger outcome
}

type dirPlan struct {
	dir    string
	ledger string // path of ledger.jsonl
	size   int64  // bytes of the ledger the plan covers (its size when named)
	mod    time.Time
	man    outdir.Manifest
	lines  []planLine
	dead   []uint64 // bit r set: row r is superseded, a marker, or has no shard
	base   int      // live records of the folders before this one
	live   int
}

type planLine struct {
	off  int64 // ledger byte offset of the line
	n    int   // its length without the newline
	row  int   // number of its first row in the folder's ledger
	rows int
	base int // live records before the line, in all folders
	live int
}

func (d *dirPlan) isDead(r int) bool { return d.dead[r/64]&(1<<(r%64)) != 0 }

// ledgerState is a folder's ledger as the cache name records it.
type ledgerState struct {
	size int64
	mod  time.Time
}

// checkFolders fails early, before anything is served, on what would make
// the whole view fail: a folder that is not an output folder, a missing
// ledger beside shards. It returns each folder's ledger state (size 0 when
// the folder has no ledger yet) and manifest, read once for the open.
func checkFolders(dirs []string) ([]ledgerState, []outdir.Manifest, error) {
	states, mans := make([]ledgerState, len(dirs)), make([]outdir.Manifest, len(dirs))
	for d, dir := range dirs {
		man, ok, err := outdir.ReadManifest(dir)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", dir, err)
		} else if !ok {
			return nil, nil, fmt.Errorf("read %s: not an output folder: no %s", dir, pipeline.ManifestFile)
		}
		mans[d] = man
		fi, err := os.Stat(filepath.Join(dir, pipeline.LedgerFile))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, nil, err
		}
		if err == nil {
			states[d] = ledgerState{size: fi.Size(), mod: fi.ModTime()}
		}
		if states[d].size == 0 {
			// pipeline.EachRecord says what an empty folder is, or
			// that its ledger is missing beside shards; it reads
			// nothing more here.
			if err := pipeline.EachRecord(dir, func(pipeline.RecordRef, []byte) error { return nil }); err != nil {
				return nil, nil, err
			}
		}
	}
	return states, mans, nil
}

// makePlan reads the ledgers of dirs up to the sizes in states (a run may
// append to them meanwhile; the index is named by those states). A torn or
// unparsable last line is left out, as cat does; an unparsable line before
// it is an error naming it. states and mans are checkFolders'.
func makePlan(dirs []string, states []ledgerState, mans []outdir.Manifest) (*plan, error) {
	p := &plan{outcomes: map[string]int{}}
	for d, dir := range dirs {
		dp := dirPlan{dir: dir, ledger: filepath.Join(dir, pipeline.LedgerFile), size: states[d].size, mod: states[d].mod, man: mans[d], base: p.live}
		if err := dp.scan(p); err != nil {
			return nil, fmt.Errorf("read %s: %w", dir, err)
		}
		p.live += dp.live
		p.dirs = append(p.dirs, dp)
	}
	return p, nil
}

var hashSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// lastRows is an open-addressing table from a key to the last ledger row
// naming it. A key is known by 96 bits of two independent hashes (two keys
// agree on them with a chance of about 2^-96 per pair): a slot is the first
// 64 and the second's high 32 beside the row, 16 bytes, at most three
// quarters full: about 32 MB for a million keys while the plan is made,
// outside the Go heap (scratchWords), given back once the plan is made
// (free): the table never sets the collector's goal for what follows (the
// index build).
type lastRows struct {
	a    []uint64
	brow []uint64 // high 32 bits of b | row+1; 0 = empty
	used int
	free func() // releases a and brow
}

func newLastRows(hint int) *lastRows {
	size := 1024
	for size*3 < hint*4 {
		size <<= 1
	}
	return makeLastRows(size)
}

func makeLastRows(size int) *lastRows {
	w, free := scratchWords(2 * size)
	return &lastRows{a: w[:size:size], brow: w[size:], free: free}
}

// put makes row the last of its key and returns the row it replaces (-1:
// none).
func (t *lastRows) put(key string, row uint32) int {
	if 4*(t.used+1) > 3*len(t.a) {
		t.grow()
	}
	return t.set(maphash.String(hashSeeds[0], key), maphash.String(hashSeeds[1], key)&^0xffffffff|uint64(row+1))
}

func (t *lastRows) set(a, brow uint64) int {
	mask := uint64(len(t.a) - 1)
	for s := a & mask; ; s = (s + 1) & mask {
		if t.brow[s] == 0 {
			t.a[s], t.brow[s] = a, brow
			t.used++
			return -1
		}
		if t.a[s] == a && t.brow[s]>>32 == brow>>32 {
			old := int(uint32(t.brow[s])) - 1
			t.brow[s] = brow
			return old
		}
	}
}

func (t *lastRows) grow() {
	old := *t
	*t = *makeLastRows(2 * len(old.a))
	for s, v := range old.brow {
		if v != 0 {
			t.set(old.a[s], v)
		}
	}
	old.free()
}

// scan is the plan's pass over one ledger: it reads it line by line,
// keeping each line's place, and marks the rows that are not live: marker
// rows, and every row of a key but its last.
func (d *dirPlan) scan(p *plan) error {
	if d.size == 0 {
		return nil // no ledger yet, or an empty one
	}
	f, err := os.Open(d.ledger)
	if err != nil {
		return err
	}
	defer f.Close()
	// Most ledger lines fit the reader's buffer and are parsed in place.
	br := bufio.NewReaderSize(io.LimitReader(f, d.size), int(min(max(d.size, 4096), 8<<20)))
	var (
		last     = newLastRows(int(min(d.size/48, 1<<26)))
		outcomes []uint16 // per row, into names, until the live ones are known
		names    []string
		nameID   = map[string]uint16{}
		long     []byte
		l        outdir.Line
		off      int64
		rows     int
	)
	defer func() {
		if last != nil {
			last.free()
		}
	}()
	dead := func(r int) {
		for r/64 >= len(d.dead) {
			d.dead = append(d.dead, 0)
		}
		d.dead[r/64] |= 1 << (r % 64)
	}
	for n := 1; ; n++ {
		buf, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long[:0], buf...)
			for err == bufio.ErrBufferFull {
				buf, err = br.ReadSlice('\n')
				long = append(long, buf...)
			}
			buf = long
		}
		if err == io.EOF {
			break // nothing, or a remainder without newline: a torn end (outdir.TornEnd)
		}
		if err != nil {
			return err
		}
		line := buf[:len(buf)-1]
		if perr := outdir.ParseLine(unsafe.String(unsafe.SliceData(line), len(line)), &l); perr != nil {
			if outdir.TornEnd(off+int64(len(buf)) == d.size, perr) {
				break
			}
			return fmt.Errorf("%s line %d: %w", pipeline.LedgerFile, n, perr)
		}
		pl := planLine{off: off, n: len(line), row: rows, rows: len(l.Rows)}
		for k := range l.Rows {
			r := &l.Rows[k]
			if rows == 1<<32-2 { // row+1 must fit 32 bits
				return fmt.Errorf("%s line %d: more than %d rows", pipeline.LedgerFile, n, rows)
			}
			if old := last.put(r.Key, uint32(rows)); old >= 0 {
				dead(old) // the latest row of a key wins
			}
			if !l.Record(r) {
				dead(rows)
			}
			id, ok := nameID[string(r.Outcome)]
			if !ok {
				if len(names) > 1<<16-1 {
					return fmt.Errorf("%s line %d: more than %d distinct outcomes", pipeline.LedgerFile, n, 1<<16)
				}
				id = uint16(len(names))
				names = append(names, string([]byte(r.Outcome)))
				nameID[names[id]] = id
			}
			outcomes = append(outcomes, id)
			rows++
		}
		d.lines = append(d.lines, pl)
		off += int64(len(buf))
	}
	last.free()
	last = nil
	for len(d.dead) < (rows+63)/64 {
		d.dead = append(d.dead, 0)
	}
	live := p.live
	for i := range d.lines {
		pl := &d.lines[i]
		pl.base = live
		for r := pl.row; r < pl.row+pl.rows; r++ {
			if !d.isDead(r) {
				pl.live++
				p.outcomes[names[outcomes[r]]]++
			}
		}
		live += pl.live
	}
	d.live = live - p.live
	return nil
}

// liveRow is a live record found through the plan.
type liveRow struct {
	ref    pipeline.RecordRef // Outcome: the ledger's
	dir    int
	pi     int64 // the ledger's prompt_index and sample (cat's order)
	sample int64
}

// parsedLine is one ledger line read again: its live rows, in order.
type parsedLine struct {
	dir, line  int
	shard, sha string
	bytes      int64
	rows       []liveRow
}

// lineReader reads ledger lines again, reusing its buffers (the line's
// bytes and its parsed rows). Not safe for concurrent use.
type lineReader struct {
	buf  []byte
	line outdir.Line
}

// each reads ledger line li of folder d again and calls fn with its place
// (no rows) and then with each of its live rows, in order. The rows' keys
// and outcomes point into the reader's buffer and are valid only during the
// call: the index build, which copies what it keeps, reads a million rows
// without a string or a row copied.
func (lr *lineReader) each(p *plan, f *os.File, d, li int, start func(pl *parsedLine) error, fn func(r liveRow) error) error {
	dp := &p.dirs[d]
	pl := dp.lines[li]
	if cap(lr.buf) < pl.n {
		lr.buf = make([]byte, pl.n)
	}
	b := lr.buf[:pl.n]
	defer func() {
		if cap(lr.buf) > 4<<20 {
			lr.buf, lr.line.Rows = nil, nil // one long line does not stay
		}
	}()
	if _, err := f.ReadAt(b, pl.off); err != nil {
		return fmt.Errorf("read %s at byte %d: %w", dp.ledger, pl.off, err)
	}
	l := &lr.line
	if err := outdir.ParseLine(unsafe.String(unsafe.SliceData(b), len(b)), l); err != nil {
		return fmt.Errorf("%s at byte %d: the ledger changed since it was read: %w", dp.ledger, pl.off, err)
	}
	if len(l.Rows) != pl.rows || pl.live != liveRows(dp, pl, l) {
		return fmt.Errorf("%s at byte %d: the ledger changed since it was read", dp.ledger, pl.off)
	}
	head := &parsedLine{dir: d, line: li, shard: strings.Clone(l.Shard), sha: strings.Clone(l.SHA256), bytes: l.Bytes}
	if err := start(head); err != nil {
		return err
	}
	var off int64
	for k := range l.Rows {
		r := &l.Rows[k]
		if !dp.isDead(pl.row + k) {
			err := fn(liveRow{dir: d, pi: r.PromptIndex, sample: r.Sample,
				ref: pipeline.RecordRef{Key: r.Key, Outcome: r.Outcome, Shard: head.shard, Off: off, N: int32(r.Len)}})
			if err != nil {
				return err
			}
		}
		if !r.Marker() {
			off += r.Len
		}
	}
	return nil
}

// read is each into a parsedLine a caller may keep: the rows' keys are
// copied into one string of the line's, their outcomes are the plan's.
func (lr *lineReader) read(p *plan, f *os.File, d, li int) (*parsedLine, error) {
	var out *parsedLine
	var keys string
	start := func(pl *parsedLine) error {
		out = pl
		out.rows = make([]liveRow, 0, p.dirs[d].lines[li].live)
		keys = liveKeys(&p.dirs[d], p.dirs[d].lines[li], &lr.line)
		return nil
	}
	err := lr.each(p, f, d, li, start, func(r liveRow) error {
		n := len(r.ref.Key)
		r.ref.Key, keys = keys[:n], keys[n:]
		r.ref.Outcome = p.outcomeName(r.ref.Outcome)
		out.rows = append(out.rows, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// liveRows counts line l's live rows.
func liveRows(dp *dirPlan, pl planLine, l *outdir.Line) int {
	n := 0
	for k := range l.Rows {
		if !dp.isDead(pl.row + k) {
			n++
		}
	}
	return n
}

// liveKeys returns the keys of line l's live rows, joined in one string.
func liveKeys(dp *dirPlan, pl planLine, l *outdir.Line) string {
	n := 0
	for k := range l.Rows {
		if !dp.isDead(pl.row + k) {
			n += len(l.Rows[k].Key)
		}
	}
	var sb strings.Builder
	sb.Grow(n)
	for k := range l.Rows {
		if !dp.isDead(pl.row + k) {
			sb.WriteString(l.Rows[k].Key)
		}
	}
	return sb.String()
}

// outcomeName returns the plan's copy of outcome name o (a ledger holds a
// handful of them).
func (p *plan) outcomeName(o schemas.Outcome) schemas.Outcome {
	for name := range p.outcomes {
		if name == string(o) {
			return schemas.Outcome(name)
		}
	}
	return schemas.Outcome(strings.Clone(string(o)))
}

// locate returns the folder and ledger line of live record i.
func (p *plan) locate(i int) (d, li int) {
	d = sort.Search(len(p.dirs), func(k int) bool { return p.dirs[k].base+p.dirs[k].live > i })
	lines := p.dirs[d].lines
	li = sort.Search(len(lines), func(k int) bool { return lines[k].base+lines[k].live > i })
	return d, li
}

// lineCache keeps the last few ledger lines read again for the list served
// while the index is built (a page is usually within one line), shared by
// the requests. Safe for concurrent use.
type lineCache struct {
	p     *plan
	mu    sync.Mutex
	files []*os.File
	lr    lineReader
	last  *parsedLine // the line read last
}

func newLineCache(p *plan) *lineCache {
	return &lineCache{p: p, files: make([]*os.File, len(p.dirs))}
}

// close releases its files and lines; a later row opens them again.
func (c *lineCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, f := range c.files {
		if f != nil {
			f.Close()
			c.files[i] = nil
		}
	}
	c.last = nil
}

// row returns live record i (0 <= i < p.live).
func (c *lineCache) row(i int) (liveRow, error) {
	d, li := c.p.locate(i)
	c.mu.Lock()
	defer c.mu.Unlock()
	pl := c.last
	if pl == nil || pl.dir != d || pl.line != li {
		f := c.files[d]
		if f == nil {
			var err error
			if f, err = os.Open(c.p.dirs[d].ledger); err != nil {
				return liveRow{}, err
			}
			c.files[d] = f
		}
		var err error
		if pl, err = c.lr.read(c.p, f, d, li); err != nil {
			return liveRow{}, err
		}
		c.last = pl
	}
	return pl.rows[i-c.p.dirs[d].lines[li].base], nil
}
