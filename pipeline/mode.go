package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/cost"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// RunConfig is the part of a mode's options that every mode shares: where
// the output folder is and how it is opened, and how the runtime runs.
// Modes embed it in their own Options, so a flag such as --workers or
// --commit-interval is bound once, in one place, for every mode. The zero
// value of every field is the default.
type RunConfig struct {
	Out            string // output folder; required
	Mode           Mode   // fresh, resume or overwrite
	Format         string // shard format: "jsonl" (default) or "parquet"
	Workers        int    // records processed at once (default 1)
	MaxShardRows   int
	CommitInterval time.Duration
	// KeepShards leaves the small shards of data/ unmerged at the end of
	// the run (OutputOptions.KeepShards): an object-storage output.
	KeepShards bool
	// VerifyShards makes opening check the SHA-256 of every shard that holds
	// live records, not only its size (OutputOptions.VerifyShards).
	VerifyShards bool
	// MaxCost caps what the folder's runs spend, in US dollars (0 = no
	// cap): every run and --resume of the folder counts, from what its
	// spend journal holds (Output.Spent), so a crash cannot reset it. See
	// Options.Budget for what happens when it is reached, and Grace.
	MaxCost float64
	Grace   time.Duration
	// BatchSize numbers records' metadata.batch_num as Hermes' batch_runner
	// --batch_size does (Options.BatchSize); default 1.
	BatchSize int
	// Stop ends dispatch softly (the first Ctrl-C): records in flight finish.
	Stop     <-chan struct{}
	Progress *Progress
	Logger   *slog.Logger
	// ToolVersion and Record are what run.json keeps: the binary's version
	// and the options as given.
	ToolVersion string
	Record      any
	// Filter, when set, keeps only the records it accepts (one shard of a
	// run split across machines). The mode's source applies it, so rows of
	// other shards are neither read as work nor counted.
	Filter func(rec *schemas.Record) bool
	// Retries, when set, returns the model requests this run tried again, by
	// cause; the end of the run adds them to run.json's (every run of the
	// folder), which stats and statistics.json report.
	Retries func() outdir.Retries
}

// ModeSpec is what one mode adds to the skeleton RunMode runs: its run kind,
// its outcomes and artefacts, how it builds its source and stages once the
// output folder is open, and what it does after the last record.
type ModeSpec struct {
	Kind      string            // run kind recorded in run.json; resume refuses another
	Outcomes  []schemas.Outcome // the mode's own outcomes (OutputOptions.Outcomes)
	Artifacts []string          // files the mode keeps in the folder (OutputOptions.Artifacts)
	// Retry lists the mode's own outcomes that --resume runs again, and
	// OutcomeField/OutcomeDefault where a record keeps the mode's outcome
	// (see OutputOptions).
	Retry          []schemas.Outcome
	OutcomeField   string
	OutcomeDefault schemas.Outcome
	// UsageField/CostField where a record keeps the mode's own usage and
	// cost (see OutputOptions).
	UsageField, CostField string
	// CallsField is where a record keeps how many model calls the mode
	// made (see OutputOptions).
	CallsField string
	// InputCheck compares the input with the ledger on resume (changed rows,
	// keys no longer in the input); modes whose input can change set it.
	InputCheck InputCheck
	// Open builds the source and the stages. It is called once the output
	// folder is open (so it may read out.Done, out.Keys or send rejects to
	// out.AddReject) and before any record is read. A source that is an
	// io.Closer is closed when the run ends.
	Open func(ctx context.Context, out *Output) (Source, []Stage, error)
	// Finish, when set, runs after the last record, while the output is still
	// open (also after an interrupt or a fatal error, so a mode's own files
	// stay in step with what was committed). Its error is returned.
	Finish func(out *Output, sum Summary) error
}

// runBudget is the budget of a mode's run: the cap max over what the
// folder spent, reached at once when an earlier run reached a cap of max
// or more (capped), or without a cap a meter, so the spend journal counts
// every run and a later run with a cap starts from it.
func runBudget(max, spent, capped float64) *cost.Budget {
	if b := cost.NewBudget(max, spent); b != nil {
		b.StoppedAt(capped)
		return b
	}
	return cost.NewMeter(spent)
}

// ModeResult is what RunMode did.
type ModeResult struct {
	Summary Summary
	// PreviouslyDone is how many keys the folder held as final when it opened.
	PreviouslyDone int
	// NothingToDo is set when every record read was already final.
	NothingToDo bool
	// Opened is set once the output folder was opened: a mode that builds
	// reports over the folder after the run does so only then.
	Opened bool
}

// RunMode is the one skeleton of every mode that writes an output folder
// (generate, compress, swe, and cron's agent executions): open the output
// folder, build the source and stages, run them on the runtime, let the mode
// finish its own files, close the output and report. It blocks until the run
// ends. The error is a fatal fault of the run (folder refused, source or
// stage construction failed, disk full); per-record failures are outcomes in
// the summary. A folder that cannot be used as asked fails with ErrRefused
// before any work.
func RunMode(ctx context.Context, cfg RunConfig, spec ModeSpec) (ModeResult, error) {
	var res ModeResult
	if cfg.Out == "" {
		return res, fmt.Errorf("%s: an output folder is required", spec.Kind)
	}
	if spec.Open == nil {
		return res, fmt.Errorf("%s: the mode builds no source", spec.Kind)
	}
	out, err := OpenOutput(cfg.Out, OutputOptions{
		Mode:           cfg.Mode,
		Kind:           spec.Kind,
		Format:         cfg.Format,
		ToolVersion:    cfg.ToolVersion,
		Options:        cfg.Record,
		Outcomes:       spec.Outcomes,
		Retry:          spec.Retry,
		OutcomeField:   spec.OutcomeField,
		OutcomeDefault: spec.OutcomeDefault,
		UsageField:     spec.UsageField,
		CostField:      spec.CostField,
		CallsField:     spec.CallsField,
		InputCheck:     spec.InputCheck,
		Artifacts:      spec.Artifacts,
		VerifyShards:   cfg.VerifyShards,
		KeepShards:     cfg.KeepShards,
		MaxShardRows:   cfg.MaxShardRows,
		CommitInterval: cfg.CommitInterval,
		Logger:         cfg.Logger,
		Retries:        cfg.Retries,
	})
	if err != nil {
		return res, err
	}
	defer out.Close()
	res.Opened = true
	res.PreviouslyDone = out.Keys()
	src, stages, err := spec.Open(ctx, out)
	if err != nil {
		return res, fmt.Errorf("%s: %w", spec.Kind, err)
	}
	if c, ok := src.(io.Closer); ok {
		defer c.Close()
	}
	sum, runErr := Run(ctx, Options{
		Workers:   cfg.Workers,
		Stop:      cfg.Stop,
		Progress:  cfg.Progress,
		Logger:    cfg.Logger,
		Budget:    runBudget(cfg.MaxCost, out.Spent(), out.capped),
		Grace:     cfg.Grace,
		BatchSize: cfg.BatchSize,
	}, src, stages, out)
	res.Summary = sum
	var finishErr error
	if spec.Finish != nil {
		if finishErr = spec.Finish(out, sum); finishErr != nil {
			finishErr = fmt.Errorf("%s: %w", spec.Kind, finishErr)
		}
	}
	closeErr := out.Close()
	if closeErr != nil {
		closeErr = fmt.Errorf("%s: close output: %w", spec.Kind, closeErr)
	}
	if runErr != nil {
		return res, errors.Join(runErr, finishErr, closeErr)
	}
	if err := errors.Join(finishErr, closeErr); err != nil {
		return res, err
	}
	res.NothingToDo = sum.Processed == 0 && sum.Read > 0 && sum.Skipped == sum.Read && sum.Rejected == 0
	return res, nil
}
