package pipeline

import (
	"context"
	"errors"

	"github.com/hermes-pipe/hermes-pipe/pipeline/cost"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// Stage transforms one record. Returning zero records filters the record out,
// several records fan it out. A per-record failure is data: the stage sets
// rec.Outcome and rec.Error and returns the record. A returned error is an
// infrastructure fault; wrapped with ErrFatal it stops the whole run, otherwise
// the runtime records it on the record as outcome internal_error.
type Stage interface {
	Name() string
	Process(ctx context.Context, rec *schemas.Record) ([]*schemas.Record, error)
}

// Preflighter is implemented by stages that must check their environment
// before the first record is processed (images present, endpoint reachable).
// Run calls it once, before any Process call; an error stops the run.
type Preflighter interface {
	Preflight(ctx context.Context) error
}

// BudgetUser is implemented by stages that spend on model calls: Run hands
// each the run's spending cap (Options.Budget; nil is no cap) once, before
// any Preflight or Process call, and the stage checks it (Allow) and
// charges it (Charge) as its records' calls return. A stage that runs
// another stage inside it passes the budget on.
type BudgetUser interface {
	UseBudget(b *cost.Budget)
}

// Closer is implemented by stages holding resources (connections, containers)
// that must be released when the run ends, also on error or interrupt.
type Closer interface {
	Close(ctx context.Context) error
}

// RecordTimer is implemented by stages whose records carry timings (the
// agent loop: model, tool and sandbox time). When any stage of a run is
// one, Run sets each record's timings.queue_ms before its first stage: the
// time from the record being read to a worker taking it up. The stages'
// own duration_ms begins after that, so queue_ms is never part of it.
type RecordTimer interface {
	TimesRecords()
}

// ErrFatal marks a stage error that must stop the run (disk full, sandbox
// driver gone for good). Wrap it: fmt.Errorf("...: %w", pipeline.ErrFatal).
var ErrFatal = errors.New("fatal")

// ErrDeferred marks a record a stage cannot finish in this run and leaves
// pending without an outcome (compress waiting for batch results that an
// import has not brought yet): it is not written, counts as dropped, and
// --resume processes it again.
var ErrDeferred = errors.New("deferred")
