package web

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/pipeline/report"
	"github.com/hermes-pipe/hermes-pipe/stages/compress"
)

// While a folder's index is first built, the server already answers: the
// list, records, neighbours and originals are read from the folder itself
// through the plan (one pass over the ledgers, about half a second for a million
// rows), in ledger order, which is also the index's order, so a record's
// number does not change when the index is ready. What needs the whole
// index (a sort other than ledger order, exact totals under a filter) says
// so and how far the build is; the page asks again once it is ready.

// building is the state of a server whose index is being built.
type building struct {
	planned chan struct{} // closed once plan or err is set
	plan    *plan
	planErr error
	lines   *lineCache

	prog     progress
	stopOnce sync.Once
	// scanBudget, when not 0, replaces searchBudget for the reads while
	// building (tests: a negative one stops them at once).
	scanBudget atomic.Int64
	ready      chan struct{} // closed once the build ended (ix set, or err)
	err        error
	warn       error
	took       time.Duration
}

// Indexing is how far the index build is, in answers given meanwhile.
type Indexing struct {
	Done    int    `json:"done"`  // records indexed
	Total   int    `json:"total"` // records to index (-1: not counted yet)
	Percent int    `json:"percent"`
	Error   string `json:"error,omitempty"` // the build failed: the list stays served from the folder
}

// Open serves the run of dirs (root is its folder). With the index of
// their current state in cacheDir it is mapped and used at once; otherwise
// the server answers at once from the folders while the index is built in
// the background and written to cacheDir (Ready is closed when that
// ended). A folder that is not an output folder is an error here.
func Open(dirs []string, cacheDir, root, token string) (*Server, error) {
	return open(dirs, cacheDir, root, token, nil)
}

func open(dirs []string, cacheDir, root, token string, hold func(done int)) (*Server, error) {
	c, err := newCached(dirs, cacheDir)
	if err != nil {
		return nil, err
	}
	if ix := c.mapped(); ix != nil {
		return NewServer(ix, root, token), nil
	}
	s := newServer(root, token)
	started := time.Now()
	b := &building{planned: make(chan struct{}), ready: make(chan struct{})}
	b.prog.hold, b.prog.stop = hold, make(chan struct{})
	s.bld = b
	go func() {
		defer close(b.ready)
		p, err := makePlan(dirs, c.states, c.mans)
		if err != nil {
			err = fmt.Errorf("view: %w", err)
			b.planErr, b.err = err, err
			close(b.planned)
			return
		}
		b.plan, b.lines = p, newLineCache(p)
		close(b.planned)
		ix, warn, err := c.build(p, &b.prog)
		b.took = time.Since(started)
		b.warn, b.err = warn, err
		if err == nil {
			s.ixp.Store(ix)
			b.lines.close() // its ledger lines are not read again
		}
	}()
	return s, nil
}

// Ready is closed when the server has its index, or its build failed
// (BuildResult).
func (s *Server) Ready() <-chan struct{} {
	if s.bld == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return s.bld.ready
}

// Built reports whether the index is built by this server (not found in
// the cache).
func (s *Server) Built() bool { return s.bld != nil }

// BuildResult waits until Ready is closed and returns how long the build
// took, a warning about the cache folder, and why the build failed (err:
// the list stays served from the folders).
func (s *Server) BuildResult() (took time.Duration, warn, err error) {
	if s.bld == nil {
		return 0, nil, nil
	}
	<-s.bld.ready
	return s.bld.took, s.bld.warn, s.bld.err
}

// Records is the number of records (-1 while it is not known yet).
func (s *Server) Records() int {
	if ix := s.idx(); ix != nil {
		return ix.Len()
	}
	select {
	case <-s.bld.planned:
		if s.bld.plan != nil {
			return s.bld.plan.live
		}
	default:
	}
	return -1
}

func (b *building) budget() time.Duration {
	if d := b.scanBudget.Load(); d != 0 {
		return time.Duration(max(d, 0))
	}
	return searchBudget
}

// waitPlan waits for the plan (a pass over the ledgers).
func (b *building) waitPlan(ctx context.Context) (*plan, error) {
	select {
	case <-b.planned:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return b.plan, b.planErr
}

func (b *building) indexing() *Indexing {
	in := &Indexing{Done: int(b.prog.done.Load()), Total: -1}
	select {
	case <-b.planned:
		if b.plan != nil {
			in.Total = b.plan.live
		}
	default:
	}
	if in.Total > 0 {
		in.Percent = int(int64(in.Done) * 100 / int64(in.Total))
	}
	select {
	case <-b.ready:
		if b.err != nil {
			in.Error = b.err.Error()
		}
	default:
	}
	return in
}

// errIndexing is a request that needs the whole index: 503 with the build's
// progress.
type errIndexing struct {
	what string
	in   *Indexing
}

func (e errIndexing) Error() string {
	if e.in.Error != "" {
		return fmt.Sprintf("%s needs the index, whose build failed: %s", e.what, e.in.Error)
	}
	return fmt.Sprintf("%s is available once the index is built (indexing %d %%: %d of %d records); ask again then", e.what, e.in.Percent, e.in.Done, e.in.Total)
}

// recFields is what the list knows of a record: the index's columns, or
// the same read from the record while the index is built.
type recFields struct {
	ID, Outcome, Compress string
	Toolsets, Tools       []string
	Failures, Turns       uint16
	Tokens, Duration      uint32
	Cost, Ratio           float32 // Cost NaN = unpriced
}

// fieldsOf reads the list's fields of one record line of a folder whose
// run.json is man: report.Summarize's, and compress's own (ShownOf).
func fieldsOf(ref pipeline.RecordRef, line []byte, man *outdir.Manifest) recFields {
	s := report.Summarize(line, man)
	c, _ := compress.ShownOf(line)
	f := recFields{ID: s.ID, Outcome: s.Outcome, Compress: c.Outcome, Toolsets: s.Toolsets, Tools: s.Tools,
		Failures: sat16(s.ToolFailures), Turns: sat16(s.Turns), Tokens: sat32(s.Tokens), Duration: sat32(s.DurationMS),
		Cost: float32(math.NaN()), Ratio: float32(c.Ratio)}
	if f.Outcome == "" {
		f.Outcome = string(ref.Outcome)
	}
	if s.Priced {
		f.Cost = float32(s.CostUSD)
	}
	return f
}

// matchFields is the index's filter (Server.matcher) on a record's fields.
func matchFields(q Query, f *recFields) bool {
	if q.Outcome != "" && f.Outcome != q.Outcome || q.Compress != "" && f.Compress != q.Compress {
		return false
	}
	if q.Toolset != "" && !slices.Contains(f.Toolsets, q.Toolset) || q.Tool != "" && !slices.Contains(f.Tools, q.Tool) {
		return false
	}
	if q.Failures == "yes" && f.Failures == 0 || q.Failures == "no" && f.Failures != 0 {
		return false
	}
	if t := int64(f.Turns); q.TurnsMin >= 0 && t < q.TurnsMin || q.TurnsMax >= 0 && t > q.TurnsMax {
		return false
	}
	if k := int64(f.Tokens); q.TokensMin >= 0 && k < q.TokensMin || q.TokensMax >= 0 && k > q.TokensMax {
		return false
	}
	if !math.IsNaN(q.CostMin) || !math.IsNaN(q.CostMax) {
		c := float64(f.Cost)
		if math.IsNaN(c) || !math.IsNaN(q.CostMin) && c < q.CostMin || !math.IsNaN(q.CostMax) && c > q.CostMax {
			return false
		}
	}
	return true
}

func (f *recFields) row(i int, key string) Row {
	r := Row{I: i, Key: key, ID: f.ID, Outcome: f.Outcome, Compress: f.Compress, Toolsets: nonNil(f.Toolsets), Tools: nonNil(f.Tools),
		Failures: f.Failures, Turns: f.Turns, Tokens: f.Tokens, Duration: f.Duration, Ratio: f.Ratio}
	if c := float64(f.Cost); !math.IsNaN(c) {
		r.Cost = &c
	}
	return r
}

// filtered reports whether q filters the list (a text search included).
func (q Query) filtered() bool {
	return q.Outcome != "" || q.Compress != "" || q.Toolset != "" || q.Tool != "" || q.Failures != "" || q.Text != "" ||
		q.TurnsMin >= 0 || q.TurnsMax >= 0 || q.TokensMin >= 0 || q.TokensMax >= 0 || !math.IsNaN(q.CostMin) || !math.IsNaN(q.CostMax)
}

// streamed is live record i read from its folder while the index is built.
type streamed struct {
	row  liveRow
	line []byte
}

func (s *Server) streamRecord(ctx context.Context, i int) (streamed, error) {
	p, err := s.bld.waitPlan(ctx)
	if err != nil {
		return streamed{}, err
	}
	if i < 0 || i >= p.live {
		return streamed{}, fmt.Errorf("%w: no record %d", errBadQuery, i)
	}
	r, err := s.bld.lines.row(i)
	if err != nil {
		return streamed{}, err
	}
	line, err := s.readRef(p.dirs[r.dir].dir, r.ref)
	return streamed{row: r, line: line}, err
}

func (s *Server) streamFields(st streamed) recFields {
	return fieldsOf(st.row.ref, st.line, &s.bld.plan.dirs[st.row.dir].man)
}

// sortWhileBuilding says whether the list can be read in the order sort
// names while the index is built: ledger order (also what the default
// order, cat's, reads as until then), either way.
func sortWhileBuilding(sort string, in *Indexing) error {
	switch sort {
	case "", "ledger", "-ledger":
		return nil
	}
	what := "the list sorted by " + strings.TrimPrefix(sort, "-")
	if strings.TrimPrefix(sort, "-") == "key" {
		what = "the list in prompt order"
	}
	return errIndexing{what: what, in: in}
}

// findBuilding is Find while the index is built: records are read from the
// folder in ledger order (or backwards for "-ledger"); the default order
// (cat's) reads as ledger order until the index is ready (Result.Order). Unfiltered, a page is
// read directly and the total is exact. Filtered, records are read from
// the start until the page is full, the search budget is spent or the end:
// Total then counts the matches among the Scanned records read, a lower
// bound unless Complete.
func (s *Server) findBuilding(ctx context.Context, q Query) (Result, error) {
	p, err := s.bld.waitPlan(ctx)
	if err != nil {
		return Result{}, err
	}
	in := s.bld.indexing()
	if err := sortWhileBuilding(q.Sort, in); err != nil {
		return Result{}, err
	}
	desc := strings.HasPrefix(q.Sort, "-")
	at := func(k int) int {
		if desc {
			return p.live - 1 - k
		}
		return k
	}
	res := Result{Rows: []Row{}, Complete: true, Indexing: in}
	if q.Sort == "" {
		res.Order = "ledger"
	}
	first := q.Page * q.Size
	if !q.filtered() {
		res.Total = p.live
		for k := first; k < min(first+q.Size, p.live); k++ {
			st, err := s.streamRecord(ctx, at(k))
			if err != nil {
				return res, err
			}
			f := s.streamFields(st)
			res.Rows = append(res.Rows, f.row(at(k), st.row.ref.Key))
		}
		return res, nil
	}
	needle := []byte(strings.ToLower(q.Text))
	var low lineScanner
	deadline := time.Now().Add(s.bld.budget())
	for k := 0; k < p.live; k++ {
		if res.Total >= first+q.Size || ctx.Err() != nil || k%64 == 0 && !time.Now().Before(deadline) {
			res.Complete = false
			break
		}
		st, err := s.streamRecord(ctx, at(k))
		if err != nil {
			return res, err
		}
		res.Scanned++
		if len(needle) > 0 && !low.contains(st.line, needle) {
			continue
		}
		f := s.streamFields(st)
		if !matchFields(q, &f) {
			continue
		}
		if res.Total >= first {
			res.Rows = append(res.Rows, f.row(at(k), st.row.ref.Key))
		}
		res.Total++
	}
	if !res.Complete && len(res.Rows) == 0 {
		res.Note = fmt.Sprintf("page %d of this list is past the matches among the %d records read so far; it is available once the index is built (indexing %d %%)", q.Page+1, res.Scanned, in.Percent)
	}
	return res, nil
}

// nearBuilding is Near while the index is built: the neighbours in ledger
// order that pass q, read outward from i, at most searchBudget a side.
func (s *Server) nearBuilding(ctx context.Context, q Query, i int) (Near, error) {
	res := Near{Prev: -1, Next: -1}
	p, err := s.bld.waitPlan(ctx)
	if err != nil {
		return res, err
	}
	if err := sortWhileBuilding(q.Sort, s.bld.indexing()); err != nil {
		return res, err
	}
	if i < 0 || i >= p.live {
		return res, nil
	}
	step := 1
	if strings.HasPrefix(q.Sort, "-") {
		step = -1
	}
	needle := []byte(strings.ToLower(q.Text))
	var low lineScanner
	return walkOut(ctx, i, p.live, step, s.bld.budget(), func(k int) int { return k }, func(j int) (bool, bool, error) {
		if !q.filtered() {
			return true, false, nil
		}
		st, err := s.streamRecord(ctx, j)
		if err != nil {
			return false, false, err
		}
		if len(needle) > 0 && !low.contains(st.line, needle) {
			return false, true, nil
		}
		f := s.streamFields(st)
		return matchFields(q, &f), true, nil
	})
}

// metaBuilding is meta while the index is built: the outcomes the ledgers
// name (with their counts there) and those the build met so far; tools,
// toolsets and compress outcomes the build met so far.
func (s *Server) metaBuilding(w http.ResponseWriter, r *http.Request) {
	p, err := s.bld.waitPlan(r.Context())
	if err != nil {
		httpError(w, err)
		return
	}
	outcomes := map[string]int{}
	for o, n := range p.outcomes {
		outcomes[o] = n
	}
	seen := s.bld.prog.seen.Load()
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
	writeJSON(w, map[string]any{
		"kind": kind, "records": p.live, "dirs": dirs, "outcomes": outcomes, "compress": compress,
		"toolsets": nonNil(toolsets), "tools": nonNil(tools), "swe": s.swe != nil, "indexing": s.bld.indexing(),
	})
}

// seenNames are the dictionaries of a build so far, published when one
// grows.
type seenNames struct {
	outcomes, compress, toolsets, tools []string
}

// publish stores b's dictionaries in prog when one grew.
func (b *builder) publish(prog *progress) {
	h := &b.h
	old := prog.seen.Load()
	if old != nil && len(old.outcomes) == len(h.Outcomes) && len(old.compress) == len(h.Compresses) &&
		len(old.toolsets) == len(h.ToolsetBits) && len(old.tools) == len(h.ToolBits) {
		return
	}
	prog.seen.Store(&seenNames{slices.Clone(h.Outcomes), slices.Clone(h.Compresses), slices.Clone(h.ToolsetBits), slices.Clone(h.ToolBits)})
}

// httpError writes err with its status: a bad query 400, one that needs the
// index 503 (with the progress and Retry-After), others 500.
func httpError(w http.ResponseWriter, err error) {
	var ei errIndexing
	switch {
	case errors.Is(err, errBadQuery):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case errors.As(err, &ei):
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	default:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
