package compress

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/tokenizer"
)

// Options configure one compress run. Inputs, Out, Tokenizer, Client and
// Model are required; the zero value of every other field is the default.
type Options struct {
	pipeline.RunConfig

	Inputs    []Input // see ExpandInputs
	Tokenizer tokenizer.Tokenizer
	Config    Config
	// Summary configures the summary requests; its Tokens is taken from
	// Config.SummaryTokens.
	Summary SummaryOptions
	// RowTimeout caps all summary calls of one row (default 5m); a row that
	// runs over keeps its original conversation with outcome summary_failed.
	RowTimeout time.Duration
	// OverLimit is OverLimitKeep (default), OverLimitDrop or
	// OverLimitQuarantine.
	OverLimit string

	MaxLineBytes int
	// MaxBytesInFlight bounds the input bytes of the rows being compressed
	// at once (default DefaultMaxBytesInFlight): a row waits to be read
	// out while the rows in work hold more; one longer than the bound is
	// compressed alone.
	MaxBytesInFlight int
	// Batch sends the summary requests through the Batch API, or exports
	// and imports them as files (see BatchOptions); the zero value calls
	// the model directly. In batch modes RowTimeout does not apply.
	Batch BatchOptions
	// Now is the clock of the metrics times (default time.Now).
	Now func() time.Time
}

// Result is what a compress run did.
type Result struct {
	Summary        pipeline.Summary
	Metrics        Report // compression_metrics.json as written
	NothingToDo    bool
	PreviouslyDone int
	// Pending counts rows left without an outcome because a summary request
	// has no batch result yet (--batch-export, --batch-import); Exported is
	// how many requests the export file holds.
	Pending  int
	Exported int
}

// Run performs one compress run and blocks until it ends: the inputs are
// streamed through the compress stage in a bounded worker pool and committed
// to Out; compression_metrics.json is written at the end, also after an
// interrupt. The error is a fatal fault (unreadable input, output refused,
// disk full); per-row failures are outcomes in the summary.
func Run(ctx context.Context, o Options) (Result, error) {
	var res Result
	if err := o.fill(); err != nil {
		return res, err
	}
	comp, err := newCompressor(o.Config, o.Tokenizer)
	if err != nil {
		return res, fmt.Errorf("compress: %w", err)
	}
	o.Summary.Tokens = comp.cfg.SummaryTokens
	cr := &compressRun{o: &o, comp: comp, lazy: &lazyBatcher{}, res: &res}
	if o.Batch.enabled() {
		if err := o.useBatch(comp, cr.lazy); err != nil {
			return res, err
		}
	}
	if o.Summary.Price != nil {
		o.Summary.project = projector(o.Tokenizer, comp.cfg.TurnOverhead, o.Summary.Price)
	}
	if cr.summarize, err = newLLMSummarizer(o.Summary); err != nil {
		return res, fmt.Errorf("compress: %w", err)
	}
	cr.start = o.Now()
	cr.settings = Settings{Tokenizer: o.Tokenizer.Name(), TargetTokens: comp.cfg.TargetTokens,
		SummaryTokens: comp.cfg.SummaryTokens, TurnOverhead: comp.cfg.TurnOverhead, ProtectLast: comp.cfg.ProtectLast,
		OverLimit: o.OverLimit}
	defer cr.close()
	mr, err := pipeline.RunMode(ctx, o.RunConfig, pipeline.ModeSpec{
		Kind:           "compress",
		Outcomes:       Outcomes,
		Retry:          OutcomeSet.Retryable,
		OutcomeField:   OutcomeField,
		OutcomeDefault: OutcomeUnderTarget,
		UsageField:     UsageField,
		CostField:      CostField,
		CallsField:     CallsField,
		Artifacts:      []string{MetricsFile, QuarantineFile, RowsFile, BatchFile, InputsFile},
		Open:           cr.open,
		Finish:         cr.finish,
	})
	res.Summary, res.NothingToDo, res.PreviouslyDone = mr.Summary, mr.NothingToDo, mr.PreviouslyDone
	if o.Batch.enabled() && !res.Summary.Interrupted && !res.Summary.BudgetReached {
		res.Pending = res.Summary.Dropped
	}
	return res, err
}

// fill checks that o names inputs and an output folder and a known
// over-limit policy, and sets the defaults of Now, OverLimit, RowTimeout and
// MaxBytesInFlight.
func (o *Options) fill() error {
	if len(o.Inputs) == 0 || o.Out == "" {
		return errors.New("compress: inputs and an output folder are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	switch o.OverLimit {
	case "":
		o.OverLimit = OverLimitKeep
	case OverLimitKeep, OverLimitDrop, OverLimitQuarantine:
	default:
		return fmt.Errorf("compress: over-limit policy %q is not keep, drop or quarantine", o.OverLimit)
	}
	if o.RowTimeout <= 0 && !o.Batch.enabled() {
		o.RowTimeout = 5 * time.Minute
	}
	if o.MaxBytesInFlight <= 0 {
		o.MaxBytesInFlight = DefaultMaxBytesInFlight
	}
	return nil
}

// BatchRowsInFlight is how many rows a Batch API run keeps in work at once,
// whatever RunConfig.Workers says: a row waiting on a batch (up to 24
// hours) does nothing, so it must not hold one of a few workers, or a small
// --workers would cut the run into one batch per handful of rows, each
// waiting its own window. Their memory is bounded by MaxBytesInFlight;
// Workers bounds the direct calls of the fallback
// (BatchOptions.DirectWorkers).
const BatchRowsInFlight = 4096

// useBatch routes the summary calls of a batch-mode run through lazy (the
// batcher once the output folder is open): the direct client becomes the
// fallback's, rows get no timeout, and the batcher meters --max-cost. With
// the Batch API, Workers bounds the fallback's direct calls and the run
// keeps BatchRowsInFlight rows in work.
func (o *Options) useBatch(comp *compressor, lazy *lazyBatcher) error {
	if o.Batch.Fallback == BatchFallbackDirect && o.Batch.Direct == nil {
		o.Batch.Direct = o.Summary.Client
	}
	if o.Batch.API {
		if o.Batch.DirectWorkers <= 0 {
			o.Batch.DirectWorkers = o.Workers
		}
		o.Workers = max(o.Workers, BatchRowsInFlight)
	}
	if err := o.Batch.fill(); err != nil {
		return fmt.Errorf("compress: %w", err)
	}
	// The batcher answers the summary calls; it is opened with the
	// output folder (its journal lives there).
	o.Summary.batch = lazy
	o.RowTimeout = 0
	// The batcher keeps --max-cost: each request is reserved at its
	// projected cost before it joins a batch.
	if o.Summary.Price != nil {
		o.Batch.meter = batchMeter{price: o.Summary.Price, project: projector(o.Tokenizer, comp.cfg.TurnOverhead, o.Summary.Price)}
	}
	return nil
}

// compressRun is one Run's state shared by the runtime's Open and Finish
// hooks: what is known before the folder opens, and the files opened with
// it.
type compressRun struct {
	o         *Options
	comp      *compressor
	summarize rowSummarizer
	lazy      *lazyBatcher
	settings  Settings
	start     time.Time
	res       *Result

	prev *Report // the previous run's metrics, on resume
	q    *quarantine
	rows *rowJournal
	bt   *batcher // nil unless batch modes
}

// close closes what open opened; each close is safe after finish's.
func (cr *compressRun) close() {
	if cr.q != nil {
		cr.q.close()
	}
	if cr.rows != nil {
		cr.rows.close()
	}
	if cr.bt != nil {
		cr.bt.close()
	}
}

// open is the mode's Open hook: it opens compress's files in the output
// folder and returns the input source and the compress stage.
func (cr *compressRun) open(ctx context.Context, out *pipeline.Output) (pipeline.Source, []pipeline.Stage, error) {
	if err := cr.openFiles(ctx); err != nil {
		return nil, nil, err
	}
	o := cr.o
	known := knownOutcomes()
	stage := &Stage{comp: cr.comp, summarize: cr.summarize, overLimit: o.OverLimit, rowTimeout: o.RowTimeout,
		quarantine: cr.q, rows: cr.rows, known: func(oc schemas.Outcome) bool { return known[oc] }, done: out.Done, batch: cr.bt}
	stage.inflight = newRowBytes(int64(o.MaxBytesInFlight))
	src := OpenSource(SourceOptions{Inputs: o.Inputs, MaxLineBytes: o.MaxLineBytes, Reject: out.AddReject, Filter: o.Filter,
		inflight: stage.inflight, done: out.Done})
	return src, []pipeline.Stage{stage}, nil
}

// openFiles reads the previous metrics on resume (else removes them),
// records the inputs and opens the quarantine, the row journal and, in
// batch modes, the batcher.
func (cr *compressRun) openFiles(ctx context.Context) error {
	o := cr.o
	var err error
	if o.Mode == pipeline.ModeResume {
		if cr.prev, err = readReport(o.Out); err != nil {
			return err
		}
	} else if err := os.Remove(filepath.Join(o.Out, MetricsFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove old %s: %w", MetricsFile, err)
	}
	if err := recordInputs(o.Out, o.Inputs); err != nil {
		return err
	}
	if cr.q, err = openQuarantine(o.Out, o.Mode != pipeline.ModeResume); err != nil {
		return err
	}
	if cr.rows, err = openRowJournal(o.Out, o.Mode != pipeline.ModeResume); err != nil {
		return err
	}
	if o.Batch.enabled() {
		if cr.bt, err = openBatcher(ctx, o.Out, o.Mode != pipeline.ModeResume, o.Batch); err != nil {
			return err
		}
		cr.lazy.b = cr.bt
	}
	return nil
}

// finish is the mode's Finish hook. The aggregate is built from the row
// journal, counting every row the output holds as committed, so a run
// killed before it could write compression_metrics.json costs nothing on
// the next --resume. A journal that cannot be read leaves the metrics file
// unwritten (the error is returned); the next --resume rebuilds it.
func (cr *compressRun) finish(out *pipeline.Output, _ pipeline.Summary) error {
	o := cr.o
	rowsErr := cr.rows.close()
	var batchErr error
	if cr.bt != nil {
		cr.res.Exported = cr.bt.Exported()
		batchErr = cr.bt.close()
	}
	agg := newAggregate(carryProcessing(cr.prev), cr.settings, cr.start)
	metricsErr := rebuildAggregate(filepath.Join(o.Out, RowsFile), out.Settled, agg)
	if metricsErr == nil {
		cr.res.Metrics = agg.Report(o.Now())
		metricsErr = writeReport(o.Out, cr.res.Metrics)
	}
	return errors.Join(rowsErr, batchErr, metricsErr, cr.q.close())
}

// lazyBatcher is the summariser's client in batch modes: the batcher, known
// once the output folder is open.
type lazyBatcher struct{ b *batcher }

func (l *lazyBatcher) summary(ctx context.Context, row *rowCall, req llm.Request) (llm.Response, error) {
	return l.b.summary(ctx, row, req)
}

// knownOutcomes are the outcomes a record may keep as its own: the runtime's
// and compress's.
func knownOutcomes() map[schemas.Outcome]bool { return outdir.Known(Outcomes) }

// carryProcessing keeps of a previous report only what is not rebuilt from
// the row journal: when the run started, how long its runs took, how many.
func carryProcessing(prev *Report) *Report {
	if prev == nil {
		return nil
	}
	r := &Report{}
	r.Processing = prev.Processing
	r.Sums.Runs = prev.Sums.Runs
	return r
}
