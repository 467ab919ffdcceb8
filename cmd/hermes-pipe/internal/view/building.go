package view

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
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
	ready    chan struct{} // closed once the build ended (ix set, or err)
	err      error
	warn     error
	took     time.Duration
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

// open is Open with a hold on the build (tests; nil in production):
// called before each ledger line is indexed with the records indexed so
// far, it holds the build back while it does not return.
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
	b.prog.stop = make(chan struct{})
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
		ix, warn, err := c.build(p, &b.prog, hold)
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

// waitPlan waits for the plan (a pass over the ledgers); a plan made is
// given even to a context that ended.
func (b *building) waitPlan(ctx context.Context) (*plan, error) {
	select {
	case <-b.planned:
		return b.plan, b.planErr
	default:
	}
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
	Prompt                string // the first line of the prompt, cut (report.Summary's)
	Toolsets, Tools       []string
	Failures, Turns       uint16
	Tokens, Duration      uint32
	Cost, Ratio           float32 // Cost NaN = unpriced
	Reward                float32 // NaN = no reward
	Grade                 report.Grade
}

// fieldsOf reads the list's fields of one record line of a folder whose
// run.json is man: report.Summarize's, and compress's own (ShownOf).
func fieldsOf(ref pipeline.RecordRef, line []byte, man *outdir.Manifest) recFields {
	s := report.Summarize(line, man)
	c, _ := compress.ShownOf(line)
	f := recFields{ID: s.ID, Prompt: s.Prompt, Outcome: s.Outcome, Compress: c.Outcome, Toolsets: s.Toolsets, Tools: s.Tools,
		Failures: sat16(s.ToolFailures), Turns: sat16(s.Turns), Tokens: sat32(s.Tokens), Duration: sat32(s.DurationMS),
		Cost: float32(math.NaN()), Ratio: float32(c.Ratio), Reward: float32(math.NaN()), Grade: s.Grade}
	if s.Rewarded {
		f.Reward = float32(s.Reward)
	}
	if f.Outcome == "" {
		f.Outcome = string(ref.Outcome)
	}
	if s.Priced {
		f.Cost = float32(s.CostUSD)
	}
	return f
}

func (f *recFields) row(i int, key string) Row {
	r := Row{I: i, Key: key, ID: f.ID, Prompt: f.Prompt, Outcome: f.Outcome, Compress: f.Compress, Toolsets: nonNil(f.Toolsets), Tools: nonNil(f.Tools),
		Failures: f.Failures, Turns: f.Turns, Tokens: f.Tokens, Duration: f.Duration, Ratio: f.Ratio, Grade: f.Grade.String()}
	if c := float64(f.Cost); !math.IsNaN(c) {
		r.Cost = &c
	}
	if v := float64(f.Reward); !math.IsNaN(v) {
		r.Reward = &v
	}
	return r
}

// filtered reports whether q filters the list (a text search included).
func (q Query) filtered() bool {
	return q.Outcome != "" || q.Compress != "" || q.Toolset != "" || q.Tool != "" || q.Failures != "" || q.Text != "" ||
		q.TurnsMin >= 0 || q.TurnsMax >= 0 || q.TokensMin >= 0 || q.TokensMax >= 0 || !math.IsNaN(q.CostMin) || !math.IsNaN(q.CostMax) ||
		q.rewarded()
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
