package view

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"
)

// recordSet is the run's live records as the handlers read them, record i
// being the i-th live row in ledger order: served by the index once it is
// built (indexed), and by the folders through the plan until then
// (streamed). Every query is written once over it (Find, Near, meta, the
// record pages); what differs is only what each source can tell cheaply.
type recordSet interface {
	// len is the number of records.
	len() int
	// indexing is how far the build is; nil when the index answers.
	indexing() *Indexing
	// walk is the list q gives: its order (an errIndexing when the source
	// cannot give it yet) and its filters.
	walk(q Query) (*walk, error)
	// line reads record i.
	line(i int) ([]byte, error)
	// where is record i's folder and key.
	where(i int) (dir, key string, err error)
	// locate reads record i for its page.
	locate(i int) (located, error)
	// meta is what /api/meta says of the records.
	meta() map[string]any
}

// source is the record set the handlers read now: the index once it is
// built, else the folders through the plan (waiting for the plan, a pass
// over the ledgers).
func (s *Server) source(ctx context.Context) (recordSet, error) {
	if ix := s.idx(); ix != nil {
		return indexed{s: s, ix: ix}, nil
	}
	p, err := s.bld.waitPlan(ctx)
	if err != nil {
		return nil, err
	}
	return streamed{s: s, b: s.bld, p: p}, nil
}

// walk is a query's list over a record set: n positions in its order, the
// record at each, and its filters (not the text) split by what they cost.
// free tests what the source knows without reading a record (nil: every
// record passes); when reads is set, a record must be read (line) for the
// rest of the filter (check) or for the text search.
type walk struct {
	n     int
	at    func(k int) int  // the record at position k
	pos   func(i int) int  // the position of record i; -1 when it has none
	free  func(i int) bool // nil: every record passes
	reads bool
	line  func(i int) ([]byte, error)
	check func(i int) bool // nil: a record read passes; else called after line(i)
	row   func(i int) (Row, error)
	close func()
	rule  scanRule
	in    *Indexing // the build's progress when the walk began; nil from the index
	order string    // Result.Order
}

// scanRule is when a walk that reads records stops: it reads the clock every
// every reads, and gives up filling after filling, or once its page is full
// after full (negative: at once).
type scanRule struct {
	every         int
	full, filling time.Duration
}

func (r scanRule) stop(start time.Time, scanned int, full bool) bool {
	if full && r.full < 0 {
		return true
	}
	if scanned%r.every != 0 {
		return false
	}
	limit := r.filling
	if full {
		limit = r.full
	}
	return !time.Now().Before(start.Add(limit))
}

// text is a text search's needle (lower case) and its case-folding buffer.
type text struct {
	needle []byte
	low    lineScanner
}

func newText(q Query) *text { return &text{needle: []byte(strings.ToLower(q.Text))} }

// readPasses reports whether record i, read, passes the text search and the
// rest of the filter.
func (w *walk) readPasses(i int, t *text) (bool, error) {
	line, err := w.line(i)
	if err != nil {
		return false, err
	}
	if len(t.needle) > 0 && !t.low.contains(line, t.needle) {
		return false, nil
	}
	return w.check == nil || w.check(i), nil
}

// indexed is the record set of the index: the filters read its columns,
// any sort is there, and a record is read only for a text search.
type indexed struct {
	s  *Server
	ix *Index
}

func (x indexed) len() int            { return x.ix.Len() }
func (x indexed) indexing() *Indexing { return nil }

func (x indexed) walk(q Query) (*walk, error) {
	order, err := x.s.sorted(q.Sort)
	if err != nil {
		return nil, err
	}
	n, desc := x.ix.Len(), strings.HasPrefix(q.Sort, "-")
	w := &walk{n: n, reads: q.Text != "", row: func(i int) (Row, error) { return x.s.row(i), nil },
		rule: scanRule{every: 256, full: searchBudget, filling: 10 * searchBudget}}
	w.at = func(k int) int {
		if desc {
			k = n - 1 - k
		}
		if order == nil {
			return k
		}
		return int(order[k])
	}
	w.pos = func(i int) int {
		k := -1
		if order == nil {
			if i >= 0 && i < n {
				k = i
			}
		} else {
			for j, v := range order {
				if int(v) == i {
					k = j
					break
				}
			}
		}
		if desc && k >= 0 {
			k = n - 1 - k
		}
		return k
	}
	if q.filtered() {
		if w.free, err = x.s.matcher(q); err != nil {
			return nil, err
		}
	}
	sc := newLineScanner(x.s)
	w.line, w.close = sc.line, sc.close
	return w, nil
}

func (x indexed) line(i int) ([]byte, error) {
	if i < 0 || i >= x.ix.Len() {
		return nil, fmt.Errorf("%w: no record %d", errBadQuery, i)
	}
	dir, ref := x.ix.Ref(i)
	return x.s.readRef(dir, ref)
}

func (x indexed) where(i int) (dir, key string, err error) {
	dir, ref := x.ix.Ref(i)
	return dir, ref.Key, nil
}

func (x indexed) locate(i int) (located, error) {
	ix := x.ix
	line, err := x.line(i)
	if err != nil {
		return located{}, err
	}
	return located{dir: ix.Dirs[ix.Dir[i]], key: ix.Key(i), id: ix.ID(i), kind: ix.Kind, of: ix.Len(), line: line}, nil
}

// meta: the counts of every outcome and compression the index holds.
func (x indexed) meta() map[string]any {
	ix := x.ix
	outcomes := map[string]int{}
	compress := map[string]int{}
	for i, n := range ix.OutcomeCount {
		outcomes[ix.Outcomes[i]] += n
	}
	for i, n := range ix.CompressCount {
		if i != 0 && n != 0 {
			compress[ix.Compresses[i]] += n
		}
	}
	m := map[string]any{
		"kind": ix.Kind, "records": ix.Len(), "dirs": ix.Dirs, "outcomes": outcomes, "compress": compress,
		"toolsets": nonNil(ix.ToolsetBits), "tools": nonNil(ix.ToolBits),
	}
	if g := ix.graded(); g > 0 {
		m["graded"] = g // only then: an ungraded run's meta is as before
	}
	return m
}

// streamed is the record set while the index is built: the folders through
// the plan, in ledger order (also what the default order, cat's, reads as
// until then; the other sorts need the index). A filter reads each record
// (its line and report.Summarize) and tests it as a one-record index, with
// the index's own filter.
type streamed struct {
	s *Server
	b *building
	p *plan
}

func (st streamed) len() int            { return st.p.live }
func (st streamed) indexing() *Indexing { return st.b.indexing() }

// streamedRec is live record i read from its folder while the index is
// built.
type streamedRec struct {
	i    int
	row  liveRow
	line []byte
}

func (st streamed) read(i int) (streamedRec, error) {
	if i < 0 || i >= st.p.live {
		return streamedRec{}, fmt.Errorf("%w: no record %d", errBadQuery, i)
	}
	r, err := st.b.lines.row(i)
	if err != nil {
		return streamedRec{}, err
	}
	line, err := st.s.readRef(st.p.dirs[r.dir].dir, r.ref)
	return streamedRec{i: i, row: r, line: line}, err
}

func (st streamed) fields(rec streamedRec) recFields {
	return fieldsOf(rec.row.ref, rec.line, &st.p.dirs[rec.row.dir].man)
}

// walk: ledger order, backwards for "-ledger"; the default order (cat's)
// reads as ledger order until the index is ready (Result.Order). Any other
// sort waits for the index.
func (st streamed) walk(q Query) (*walk, error) {
	in := st.b.indexing()
	if err := sortWhileBuilding(q.Sort, in); err != nil {
		return nil, err
	}
	n, desc := st.p.live, strings.HasPrefix(q.Sort, "-")
	flip := func(k int) int {
		if desc {
			return n - 1 - k
		}
		return k
	}
	w := &walk{n: n, at: flip, reads: q.filtered(), close: func() {}, in: in,
		rule: scanRule{every: 64, full: -1, filling: searchBudget}}
	w.pos = func(i int) int {
		if i < 0 || i >= n {
			return -1
		}
		return flip(i)
	}
	if q.Sort == "" {
		w.order = "ledger"
	}
	// The record read last, and its fields once summarised: a record
	// read to be filtered is not read again for its row.
	var last streamedRec
	var f recFields
	var summed bool
	w.line = func(i int) ([]byte, error) {
		rec, err := st.read(i)
		if err != nil {
			return nil, err
		}
		last, summed = rec, false
		return rec.line, nil
	}
	w.check = func(int) bool {
		f, summed = st.fields(last), true
		ff, ok := newIndexFilter(oneRecord(&f), q)
		return ok && ff.match(0)
	}
	w.row = func(i int) (Row, error) {
		if last.line == nil || last.i != i {
			if _, err := w.line(i); err != nil {
				return Row{}, err
			}
		}
		if !summed {
			f, summed = st.fields(last), true
		}
		return f.row(i, last.row.ref.Key), nil
	}
	return w, nil
}

func (st streamed) line(i int) ([]byte, error) {
	rec, err := st.read(i)
	return rec.line, err
}

func (st streamed) where(i int) (dir, key string, err error) {
	r, err := st.b.lines.row(i)
	if err != nil {
		return "", "", err
	}
	return st.p.dirs[r.dir].dir, r.ref.Key, nil
}

func (st streamed) locate(i int) (located, error) {
	rec, err := st.read(i)
	if err != nil {
		return located{}, err
	}
	dp := &st.p.dirs[rec.row.dir]
	f := st.fields(rec)
	return located{dir: dp.dir, key: rec.row.ref.Key, id: f.ID, kind: dp.man.Kind, of: st.p.live, line: rec.line}, nil
}

// meta: the outcomes the ledgers name (with their counts there) and those
// the build met so far; tools, toolsets and compress outcomes the build met
// so far.
func (st streamed) meta() map[string]any {
	p := st.p
	outcomes := map[string]int{}
	for o, n := range p.outcomes {
		outcomes[o] = n
	}
	seen := st.b.prog.seen.Load()
	compress := map[string]int{}
	var toolsets, tools []string
	if seen != nil {
		for _, o := range seen.outcomes {
			if _, ok := outcomes[o]; !ok {
				outcomes[o] = 0
			}
		}
		for _, c := range seen.compress {
			if c != "" {
				compress[c] = 0
			}
		}
		toolsets, tools = seen.toolsets, seen.tools
	}
	dirs := make([]string, len(p.dirs))
	for d := range p.dirs {
		dirs[d] = p.dirs[d].dir
	}
	kind := ""
	if len(p.dirs) > 0 {
		kind = p.dirs[len(p.dirs)-1].man.Kind
	}
	return map[string]any{
		"kind": kind, "records": p.live, "dirs": dirs, "outcomes": outcomes, "compress": compress,
		"toolsets": nonNil(toolsets), "tools": nonNil(tools), "indexing": st.b.indexing(),
	}
}

// oneRecord is f as a one-record index: what the index's filter reads of a
// record, so that a record read while the index is built is filtered by
// the same filter (its toolsets and tools are all its bits).
func oneRecord(f *recFields) *Index {
	all := func(names []string) []uint64 {
		if len(names) == 0 {
			return []uint64{0}
		}
		return []uint64{math.MaxUint64}
	}
	return &Index{n: 1, Outcomes: []string{f.Outcome}, Compresses: []string{f.Compress}, ToolsetBits: f.Toolsets, ToolBits: f.Tools,
		Outcome: []uint16{0}, Compress: []uint16{0}, Toolsets: all(f.Toolsets), Tools: all(f.Tools),
		Failures: []uint16{f.Failures}, Turns: []uint16{f.Turns}, Tokens: []uint32{f.Tokens}, Cost: []float32{f.Cost},
		Reward: []float32{f.Reward}, Grade: []uint8{uint8(f.Grade)}}
}
