package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/cost"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// Source yields the records of a run in input order. Every record already
// carries its Key. Next returns io.EOF after the last record; it should return
// promptly with ctx's error when ctx is cancelled. Run calls Next from one
// goroutine only. Bad input rows are not returned: the source reports them
// with Output.AddReject and moves on.
type Source interface {
	Next(ctx context.Context) (*schemas.Record, error)
}

// Sizer is implemented by sources that know how many records they will yield
// (rejected rows excluded) before they are exhausted; Total returns -1 when
// they do not. Progress uses it for the ETA.
type Sizer interface {
	Total() int
}

// SizerContext is a Sizer whose count stops early, returning -1, once ctx
// is done. Run counts in the background, while it passes over the records
// the folder already holds, and waits for the count before the first record
// it runs. Run counts only when a Progress shows the total.
type SizerContext interface {
	TotalContext(ctx context.Context) int
}

// DoneSkipper is implemented by sources that can pass over the records the
// output folder marks done more cheaply than by reading them whole (a
// resumed run of a finished folder reads mostly such records). Run gives it,
// before Total and the first Next, a maker of the folder's "key is done"
// predicate: each call returns one predicate for one reader (Next, or a
// Total counting at the same time), which keeps its own place in the
// ledger and no reference to the key it is asked about. A record the
// source yields for a key the predicate called done is skipped by Run, so
// it needs only Key, PromptIndex and Sample; Run keeps no reference to a
// record it skips nor to its key, so their memory may be reused once Next
// is called again.
type DoneSkipper interface {
	SkipDone(done func() func(key string) bool)
}

// SliceSource returns a Source yielding recs in order. It is for tests and for
// modes that build their work list in memory.
func SliceSource(recs []*schemas.Record) Source { return &sliceSource{recs: recs} }

type sliceSource struct {
	recs []*schemas.Record
	i    int
}

func (s *sliceSource) Next(ctx context.Context) (*schemas.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.i >= len(s.recs) {
		return nil, io.EOF
	}
	s.i++
	return s.recs[s.i-1], nil
}

func (s *sliceSource) Total() int { return len(s.recs) }

// Options configure Run. The zero value of every field means its default.
type Options struct {
	// Workers is the number of records processed at once; default 4.
	Workers int
	// Stop, when closed, is a soft stop: Run reads no more input, lets the
	// records in flight finish and commits them. Cancelling ctx is the hard
	// stop: stages see a cancelled context, records whose stages failed
	// because of it are dropped (redone on resume), and what finished is
	// still committed.
	Stop <-chan struct{}
	// Progress reports progress while the run goes; nil reports nothing.
	Progress *Progress
	// Logger receives stage errors and panics; default discards.
	Logger *slog.Logger
	// CloseTimeout bounds the Close calls of stages at the end; default 30s.
	CloseTimeout time.Duration
	// Budget is the run's spending cap (nil = none). Run hands it to every
	// BudgetUser stage, which charges each model call; each commit settles
	// it. Once it is reached Run dispatches no more records, as on a soft
	// stop, and the records in flight have Grace to finish: then their
	// stage context is cancelled with cause cost.ErrBudget, and a stage
	// that honours it ends the record with a retryable outcome that is
	// committed (its spend with it).
	Budget *cost.Budget
	// Grace is how long records in flight may run on once Budget is
	// reached; default 2 minutes.
	Grace time.Duration
	// BatchSize is Hermes' batch_runner --batch_size: a finished record's
	// metadata.batch_num is its prompt_index divided by it; default 1.
	BatchSize int
	// Now is the clock of a finished record's metadata.timestamp; default
	// time.Now.
	Now func() time.Time
}

func (o *Options) fill() error {
	if o.Workers < 0 {
		return fmt.Errorf("run options: workers must not be negative (got %d)", o.Workers)
	}
	if o.Workers == 0 {
		o.Workers = 4
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = 30 * time.Second
	}
	if o.Grace <= 0 {
		o.Grace = 2 * time.Minute
	}
	if o.BatchSize < 0 {
		return fmt.Errorf("run options: batch size must not be negative (got %d)", o.BatchSize)
	}
	if o.BatchSize == 0 {
		o.BatchSize = 1
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Summary is what one Run did. Counts are of this run only.
type Summary struct {
	Read        int  // records the source yielded
	Skipped     int  // of those, already done according to the ledger
	Processed   int  // inputs that went through the stages and were committed
	Written     int  // records committed (fan-out can make this exceed Processed)
	OK          int  // written records whose outcome is OK
	Failed      int  // written records whose outcome is not OK (retryable or failed)
	Filtered    int  // inputs the stages filtered out
	Dropped     int  // inputs abandoned by a hard stop or fatal error; redone on resume
	Rejected    int  // bad input rows the source reported
	Changed     int  // input rows whose key at a position differs from the ledger's (OutputOptions.InputCheck)
	Gone        int  // ledger keys the input no longer yields (InputCheck; counted when the source was read to its end)
	Pruned      int  // keys taken out of the live set by InputCheck
	Interrupted bool // the run was stopped before the source was exhausted
	// BudgetReached is set when the run's spending cap (Options.Budget) was
	// reached; Spent and MaxCost are then what the folder's runs spent and
	// the cap, in US dollars.
	BudgetReached bool
	Spent         float64
	MaxCost       float64
	Duration      time.Duration
	Stages        []StageMetrics // one per stage, in stage order
	// Tally is what this run wrote: outcomes, tokens, spend, error messages.
	Tally Tally
}

// StageMetrics is the timing of one stage over a run.
type StageMetrics struct {
	Name   string
	Calls  int64
	Errors int64 // returned errors, fatal ones included
	Panics int64
	Total  time.Duration
	Max    time.Duration
}

// Exit codes of a finished run (see ExitCode). The CLI maps fatal errors to 1
// and usage errors to 2 itself.
const (
	ExitOK          = 0
	ExitFailedRows  = 3
	ExitBudget      = 5
	ExitInterrupted = 130
)

// ExitCode maps a summary to the process exit code: 5 when the run's
// spending cap was reached, 130 when the run was interrupted, 3 when it
// finished with rejected or failed rows, else 0.
func ExitCode(s Summary) int {
	switch {
	case s.BudgetReached:
		return ExitBudget
	case s.Interrupted:
		return ExitInterrupted
	case s.Failed > 0 || s.Rejected > 0:
		return ExitFailedRows
	}
	return ExitOK
}

type stageStats struct {
	calls, errors, panics, total, max atomic.Int64
}

type runner struct {
	opts    Options
	out     *Output
	stages  []Stage
	metrics []stageStats
	prog    *Progress
	tally   tallyOf
	log     *slog.Logger

	cancel    context.CancelCauseFunc
	fatalMu   sync.Mutex
	fatalErr  error
	processed atomic.Int64
	dropped   atomic.Int64
	// capped counts the dropped records the budget stopped (a stage's
	// ErrDeferred wrapping cost.ErrBudget, or cancelled with that cause):
	// work left by the cap even when the input was read to its end.
	capped atomic.Int64

	// Written by the writer goroutine only, read after it ends.
	written, ok, failed, filtered, paused int

	// counted is closed once the progress total is known (count); started
	// (dispatch's goroutine only) once the first record was sent to work.
	counted <-chan struct{}
	started bool
	// timed is set when a stage is a RecordTimer: records get queue_ms.
	timed bool
	// inflight holds the records in the stages, for the writer's prewrite.
	inflight *inflight
}

func (r *runner) fatal(err error) {
	r.fatalMu.Lock()
	if r.fatalErr == nil {
		r.fatalErr = err
	}
	r.fatalMu.Unlock()
	r.cancel(err)
}

// Run pulls records from src, passes each through stages in a bounded worker
// pool and commits the results to out. It blocks until the source is
// exhausted, Options.Stop is closed or ctx is cancelled, and every finished
// record is committed. Records whose key the ledger marks done never reach a
// stage. It calls each Preflighter once before the first Process and each
// Closer once at the end, whatever happens.
//
// A panic in a stage or a plain error from it gives that record outcome
// internal_error; a record with a retryable outcome skips the remaining
// stages. An error wrapping ErrFatal, a source error or a commit failure stops
// the run and is returned. Run writes rejects.jsonl, statistics.json and
// run.json before returning. An Output serves one Run.
func Run(ctx context.Context, opts Options, src Source, stages []Stage, out *Output) (Summary, error) {
	var sum Summary
	if err := opts.fill(); err != nil {
		return sum, err
	}
	if err := claimOutput(opts, src, out); err != nil {
		return sum, err
	}
	start := time.Now()
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r := &runner{opts: opts, out: out, stages: stages, metrics: make([]stageStats, len(stages)), inflight: newInflight(),
		prog: opts.Progress, log: opts.Logger, cancel: cancel}
	for _, s := range stages {
		if _, ok := s.(RecordTimer); ok {
			r.timed = true
		}
	}
	r.tally.timed = r.timed

	closeOnce := sync.Once{}
	var closeErr error
	closeStages := func() {
		closeOnce.Do(func() { closeErr = r.closeStages(ctx) })
	}
	defer closeStages()

	if err := r.preflight(runCtx); err != nil {
		closeStages()
		return sum, errors.Join(err, closeErr)
	}

	if ds, ok := src.(DoneSkipper); ok {
		ds.SkipDone(out.doneReader)
	}
	r.counted = r.count(runCtx, src)
	results := make(chan []pending, 2*opts.Workers)
	writerDone := make(chan error, 1)
	go func() { writerDone <- r.writeLoop(results) }()

	// Stages run under stageCtx: cancelled with the run, or with cause
	// cost.ErrBudget once Grace has passed after the budget was reached.
	stageCtx, cancelStages := context.WithCancelCause(runCtx)
	defer cancelStages(nil)
	if opts.Budget != nil {
		go r.budgetGrace(stageCtx, cancelStages)
	}

	p := newWorkers(opts.Workers)
	eof := r.dispatch(runCtx, stageCtx, src, p, results, &sum)
	<-r.counted // the count stops with runCtx
	r.prog.start()
	if eof {
		r.prog.setTotal(int64(sum.Read))
	}
	p.Wait()
	close(results)
	// Every record has left the stages: they close (sandboxes, the
	// endpoint's connections) while the writer commits the last records.
	stagesClosed := make(chan struct{})
	go func() {
		defer close(stagesClosed)
		closeStages()
	}()
	if err := <-writerDone; err != nil {
		r.fatal(err)
	}
	<-stagesClosed
	r.prog.stop()
	if err := out.spend.end(); err != nil {
		r.fatal(err)
	}

	if out.inputs != nil && r.fatalErr == nil {
		if err := out.inputs.finish(out, eof, &sum); err != nil {
			r.fatal(err)
		}
	}
	if r.fatalErr == nil && ctx.Err() == nil {
		out.mergeAtEnd()
	}
	finishErr := out.finish()
	r.summarize(ctx, &sum, eof)
	sum.Duration = time.Since(start)
	sum.Stages = r.stageMetrics()
	return sum, errors.Join(r.fatalErr, closeErr, finishErr)
}

// claimOutput checks Run's arguments and marks out as used by this run: it
// takes the run's budget and counts the run in run.json.
func claimOutput(opts Options, src Source, out *Output) error {
	if src == nil || out == nil {
		return errors.New("run: source and output are required")
	}
	if out.used || out.closed {
		return errors.New("run: the output folder was already used by a run or closed")
	}
	out.used = true
	out.budget = opts.Budget
	out.man.Runs++
	if opts.Budget != nil && out.spend != nil {
		out.spend.begin(opts.Budget, out.man.Runs, out.Spent(), out.spendIDs)
	}
	return nil
}

// preflight hands the run's budget to each BudgetUser stage and calls each
// Preflighter stage once, in stage order, and returns the first failure
// wrapped with the stage's name. A stage has its budget before its
// Preflight: it may hold there what it knows was spent outside the ledger
// (compress's batch journal).
func (r *runner) preflight(runCtx context.Context) error {
	for _, s := range r.stages {
		if u, ok := s.(BudgetUser); ok {
			u.UseBudget(r.opts.Budget)
		}
	}
	for _, s := range r.stages {
		if p, ok := s.(Preflighter); ok {
			if err := p.Preflight(runCtx); err != nil {
				return fmt.Errorf("preflight %s: %w", s.Name(), err)
			}
		}
	}
	return nil
}

// budgetGrace runs in its own goroutine while the stages run: once the
// budget is reached it waits Options.Grace, then cancels the stages with
// cause cost.ErrBudget. It returns early when stageCtx ends.
func (r *runner) budgetGrace(stageCtx context.Context, cancelStages context.CancelCauseFunc) {
	select {
	case <-r.opts.Budget.Done():
	case <-stageCtx.Done():
		return
	}
	t := time.NewTimer(r.opts.Grace)
	defer t.Stop()
	select {
	case <-t.C:
		cancelStages(cost.ErrBudget)
	case <-stageCtx.Done():
	}
}

// stopped reports whether the run must dispatch no more records: a soft
// stop, a cancelled run or a reached budget.
func (r *runner) stopped(runCtx context.Context) bool {
	return isClosed(r.opts.Stop) || runCtx.Err() != nil || r.opts.Budget.Reached()
}

// dispatch reads src and hands each record the ledger does not mark done to
// the pool p, at most Workers at once, until the source is exhausted (eof
// is then true), the run is stopped or reading fails (which is fatal). It
// counts what it read and skipped in sum.
func (r *runner) dispatch(runCtx, stageCtx context.Context, src Source, p *workers, results chan<- []pending, sum *Summary) (eof bool) {
	opts := r.opts
	// At most Workers tasks queued or running: the pool's Go relies on it
	// never to block (newWorkers).
	sem := make(chan struct{}, opts.Workers)
produce:
	for {
		if isClosed(opts.Stop) || runCtx.Err() != nil {
			break
		}
		rec, err := src.Next(runCtx)
		if errors.Is(err, io.EOF) {
			eof = true
			break
		}
		if err != nil {
			if runCtx.Err() == nil {
				r.fatal(fmt.Errorf("read input: %w", err))
			}
			break
		}
		if rec == nil || rec.Key == "" {
			r.fatal(fmt.Errorf("read input: source yielded a record without a key (after %d records)", sum.Read))
			break
		}
		sum.Read++
		if r.skip(rec) {
			sum.Skipped++
			r.prog.skip()
			continue
		}
		if opts.Budget.Reached() { // checked after the skips: a finished folder has nothing to stop
			break
		}
		// When the record was read, for its queue_ms: carried to the
		// worker by the closure. Taken after the skips, which a resume of
		// a long run makes for every line it passes over.
		readAt := time.Now()
		if !r.started {
			// The first record to run: the count goes first, so the first
			// progress line has the total, ETA and projected spend.
			select {
			case <-r.counted:
			case <-runCtx.Done():
				break produce
			case <-opts.Stop:
				break produce
			}
			r.prog.start()
			r.started = true
		}
		select {
		case sem <- struct{}{}:
		case <-runCtx.Done():
			break produce
		case <-opts.Stop:
			break produce
		case <-opts.Budget.Done():
			break produce
		}
		if r.stopped(runCtx) { // checked again: select picks at random
			<-sem
			break
		}
		r.prog.dispatch()
		r.inflight.add(int64(rec.PromptIndex), int64(rec.Sample), rec.Key)
		p.Go(func() {
			defer func() { <-sem }()
			r.work(stageCtx, rec, readAt, results)
		})
	}
	return eof
}

// count counts src's records for the progress total in the background
// (Sizer; SizerContext stops with ctx). The channel is closed once the
// total is set, or at once when src cannot count or nothing shows the total
// (no Progress): a count reads the whole input a second time, which for a
// resumed 1,000,000-row run is as much work as the resume itself.
func (r *runner) count(ctx context.Context, src Source) <-chan struct{} {
	done := make(chan struct{})
	if r.prog == nil {
		close(done)
		return done
	}
	var total func() int
	switch sz := src.(type) {
	case SizerContext:
		total = func() int { return sz.TotalContext(ctx) }
	case Sizer:
		total = sz.Total
	default:
		close(done)
		return done
	}
	go func() {
		defer close(done)
		r.prog.setTotal(int64(total()))
	}()
	return done
}

// skip reports whether rec needs no work: the input check set it aside
// (its row changed), or the ledger marks its key done.
func (r *runner) skip(rec *schemas.Record) bool {
	out := r.out
	at := out.locate(rec.Key) // one ledger lookup for both questions
	if out.inputs != nil && out.inputs.skipChanged(out, rec, at) {
		return true
	}
	return out.isDone(at.outcome, at.known)
}

// summarize fills sum with the counts of the finished run: what the
// workers and the writer did, the rejects, whether the run was interrupted
// and, with a budget, whether it was reached with work left.
func (r *runner) summarize(ctx context.Context, sum *Summary, eof bool) {
	sum.Processed = int(r.processed.Load())
	sum.Dropped = int(r.dropped.Load())
	sum.Written, sum.OK, sum.Failed, sum.Filtered = r.written, r.ok, r.failed, r.filtered
	sum.Rejected = r.out.rejectCount()
	sum.Tally = r.tally.get()
	sum.Interrupted = !eof && r.fatalErr == nil || ctx.Err() != nil
	if b := r.opts.Budget; b != nil {
		// Reached with work left: rows not dispatched, paused in flight,
		// or left pending by the cap.
		sum.BudgetReached = b.Reached() && (!eof || r.paused > 0 || r.capped.Load() > 0)
		sum.Spent, sum.MaxCost = b.Spent(), b.Max()
	}
}

// stageMetrics returns the timing of each stage, in stage order.
func (r *runner) stageMetrics() []StageMetrics {
	var ms []StageMetrics
	for i, s := range r.stages {
		m := &r.metrics[i]
		ms = append(ms, StageMetrics{Name: s.Name(), Calls: m.calls.Load(), Errors: m.errors.Load(),
			Panics: m.panics.Load(), Total: time.Duration(m.total.Load()), Max: time.Duration(m.max.Load())})
	}
	return ms
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (r *runner) closeStages(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.CloseTimeout)
	defer cancel()
	var errs []error
	for _, s := range r.stages {
		if c, ok := s.(Closer); ok {
			if err := c.Close(ctx); err != nil {
				errs = append(errs, fmt.Errorf("close %s: %w", s.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// work runs one input record through the stages and hands the result to the
// writer; readAt is when dispatch read it (queue_ms is the time since). It
// never panics.
func (r *runner) work(ctx context.Context, in *schemas.Record, readAt time.Time, results chan<- []pending) {
	if r.timed {
		if in.Timings == nil {
			in.Timings = &schemas.Timings{}
		}
		in.Timings.QueueMS = time.Since(readAt).Milliseconds()
	}
	key, pi, sample := in.Key, int64(in.PromptIndex), int64(in.Sample)
	outs, drop := r.process(ctx, in)
	if drop {
		r.inflight.remove(key) // no row of it will reach the writer
		r.dropped.Add(1)
		r.prog.finish(0, 0)
		return
	}
	rows := r.group(key, pi, sample, outs)
	ok, failed := 0, 0
	for _, p := range rows {
		if p.line != nil {
			if p.outcome.OK() {
				ok++
			} else {
				failed++
			}
		}
	}
	r.tally.add(rows)
	results <- rows
	r.prog.spend(outs)
	r.prog.finish(ok, failed)
}

// process runs the stages over in; drop reports that the record must be
// abandoned (hard stop or fatal error).
func (r *runner) process(ctx context.Context, in *schemas.Record) (recs []*schemas.Record, drop bool) {
	cur := []*schemas.Record{in}
	for i, s := range r.stages {
		var next []*schemas.Record
		for _, rec := range cur {
			if rec.Outcome.Retryable() {
				next = append(next, rec)
				continue
			}
			res, err := r.call(ctx, i, s, rec)
			if err != nil && (errors.Is(err, ErrDeferred) && errors.Is(err, cost.ErrBudget) ||
				ctx.Err() != nil && errors.Is(context.Cause(ctx), cost.ErrBudget)) {
				r.capped.Add(1)
			}
			if err != nil {
				if errors.Is(err, ErrDeferred) {
					return nil, true
				}
				if errors.Is(err, ErrFatal) {
					r.fatal(fmt.Errorf("stage %s: record %s: %w", s.Name(), rec.Key, err))
					return nil, true
				}
				if ctx.Err() != nil {
					return nil, true
				}
				r.log.Warn("stage error", "stage", s.Name(), "key", rec.Key, "err", err)
				rec.Outcome = schemas.OutcomeInternal
				rec.Error = fmt.Sprintf("stage %s: %v", s.Name(), err)
				next = append(next, rec)
				continue
			}
			for _, o := range res {
				if o != nil {
					next = append(next, o)
				}
			}
		}
		cur = next
	}
	return cur, false
}

// errPanic marks an error made from a recovered panic.
var errPanic = errors.New("panic")

// call runs one stage on one record with timing and panic recovery.
func (r *runner) call(ctx context.Context, i int, s Stage, rec *schemas.Record) (res []*schemas.Record, err error) {
	m := &r.metrics[i]
	m.calls.Add(1)
	t0 := time.Now()
	defer func() {
		if v := recover(); v != nil {
			m.panics.Add(1)
			r.log.Error("stage panic", "stage", s.Name(), "key", rec.Key, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			res, err = nil, fmt.Errorf("%w: %v", errPanic, v)
		}
		d := int64(time.Since(t0))
		m.total.Add(d)
		for {
			old := m.max.Load()
			if d <= old || m.max.CompareAndSwap(old, d) {
				break
			}
		}
		if err != nil {
			m.errors.Add(1)
		}
	}()
	return s.Process(ctx, rec)
}

// group checks the records one input became, encodes them and adds a marker
// row when the input's key is not the key of exactly one record.
func (r *runner) group(key string, pi, sample int64, outs []*schemas.Record) []pending {
	if len(outs) == 1 && outs[0].Key == "" {
		outs[0].Key = key
	}
	needMarker := !(len(outs) == 1 && outs[0].Key == key)
	if needMarker && len(outs) > 0 {
		seen := map[string]bool{key: true}
		for _, o := range outs {
			if o.Key == "" || seen[o.Key] {
				outs = []*schemas.Record{{Key: key, PromptIndex: int(pi), Sample: int(sample), Outcome: schemas.OutcomeInternal,
					Error: fmt.Sprintf("stages fanned record %s out into records with missing, repeated or reused keys", key)}}
				needMarker = false
				break
			}
			seen[o.Key] = true
		}
	}
	rows := make([]pending, 0, len(outs)+1)
	marker := outcomeFiltered
	if len(outs) > 0 {
		marker = outcomeFannedOut
	}
	for _, rec := range outs {
		if rec.Key != key && r.out.Done(rec.Key) {
			// A fanned-out record that an earlier attempt of this input
			// already finished: keep the first, so data/ never holds a key
			// twice.
			continue
		}
		switch {
		case rec.Outcome == "":
			rec.Outcome = schemas.OutcomeInternal
			rec.Error = "the stages finished without setting an outcome"
		case !r.out.known[rec.Outcome]:
			rec.Error = fmt.Sprintf("a stage set the unknown outcome %q", rec.Outcome)
			rec.Outcome = schemas.OutcomeInternal
		}
		r.finishRecord(rec)
		line, err := EncodeRecord(rec)
		if err != nil {
			rec = &schemas.Record{Key: rec.Key, PromptIndex: rec.PromptIndex, Sample: rec.Sample,
				Outcome: schemas.OutcomeInternal, Error: err.Error()}
			r.finishRecord(rec)
			line, _ = EncodeRecord(rec) // a record of plain fields always encodes
		}
		if rec.Outcome.Retryable() && !marker.Retryable() {
			marker = rec.Outcome
		}
		rows = append(rows, pending{key: rec.Key, outcome: rec.Outcome, pi: int64(rec.PromptIndex), sample: int64(rec.Sample), rec: rec, line: line,
			stat: r.out.statLine(rec, line)})
	}
	if needMarker {
		rows = append(rows, pending{key: key, outcome: marker, pi: pi, sample: sample})
	}
	return rows
}

// finishRecord fills the members Hermes' batch_runner writes on every
// trajectory entry: success (the rollout ended without an infrastructure
// fault: Outcome.OK) and metadata's batch_num, timestamp and model
// (schemas.HermesMetadata). A verbatim record (Raw: compress) is left as its
// input had it.
func (r *runner) finishRecord(rec *schemas.Record) {
	if len(rec.Raw) > 0 {
		return
	}
	ok := rec.Outcome.OK()
	rec.Success = &ok
	rec.Metadata = schemas.HermesMetadata(rec.Metadata, rec.PromptIndex/r.opts.BatchSize, r.opts.Now(), rec.Model)
}

// writeLoop batches finished records into the data and failed shards and
// hands a batch to the committer when it reaches the row, byte or age limit,
// and at the end. Committing (three fsyncs) overlaps with filling the next
// batch. After a commit failure it keeps draining results so workers never
// block, and returns the error.
func (r *runner) writeLoop(results <-chan []pending) error {
	o := r.out
	var (
		errMu sync.Mutex
		err   error
	)
	failedErr := func() error {
		errMu.Lock()
		defer errMu.Unlock()
		return err
	}
	batches := make(chan *batch, 1)
	committerDone := make(chan struct{})
	go func() {
		defer close(committerDone)
		for b := range batches {
			if failedErr() != nil {
				b.discard()
				continue
			}
			if cerr := o.commit(b); cerr != nil {
				errMu.Lock()
				err = cerr
				errMu.Unlock()
				r.fatal(cerr)
				continue
			}
			var w, ok, fl, filt, pa int
			for _, p := range b.rows { // all of them: commit merged the rows written ahead
				if p.outcome == schemas.OutcomeBudgetPaused {
					pa++
				}
				switch {
				case p.line == nil && p.outcome == outcomeFiltered:
					filt++
				case p.line != nil && p.outcome.OK():
					w, ok = w+1, ok+1
				case p.line != nil:
					w, fl = w+1, fl+1
				}
			}
			r.written += w
			r.ok += ok
			r.failed += fl
			r.filtered += filt
			r.paused += pa
		}
	}()
	cur := map[string]*batch{DataDir: {sub: DataDir}, FailedDir: {sub: FailedDir}}
	send := func(sub string) {
		if b := cur[sub]; b.len() > 0 {
			batches <- b
			cur[sub] = &batch{sub: sub}
		}
	}
	var lastPrewrite time.Time
	ticker := time.NewTicker(max(o.opts.CommitInterval/4, time.Millisecond))
	defer ticker.Stop()
	for {
		select {
		case rows, more := <-results:
			if !more {
				send(DataDir)
				send(FailedDir)
				close(batches)
				<-committerDone
				return failedErr()
			}
			if failedErr() != nil {
				continue
			}
			r.processed.Add(1)
			now := time.Now()
			for _, p := range rows {
				r.inflight.remove(p.key)
				b := cur[DataDir]
				if p.outcome.Retryable() {
					b = cur[FailedDir]
				}
				if b.len() == 0 {
					b.first = now
				}
				b.rows = append(b.rows, p)
				b.bytes += int64(len(p.line))
			}
			for sub, b := range cur {
				if b.len() >= o.opts.MaxShardRows || b.bytes >= o.opts.MaxShardBytes {
					send(sub)
				}
			}
			if now.Sub(lastPrewrite) >= prewriteEvery {
				lastPrewrite = now
				bound, bounded := r.inflight.least()
				o.prewrite(cur[DataDir], bound, bounded)
			}
		case now := <-ticker.C:
			for sub, b := range cur {
				if b.len() > 0 && now.Sub(b.first) >= o.opts.CommitInterval {
					send(sub)
				}
			}
		}
	}
}
