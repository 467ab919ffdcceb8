package outdir

import (
	"slices"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// Marker outcomes name what happened to an input whose key has no record of
// its own. They live in the ledger only and are final.
const (
	Filtered  schemas.Outcome = "filtered"   // a stage dropped the input
	FannedOut schemas.Outcome = "fanned_out" // a stage turned it into records with other keys
	Pruned    schemas.Outcome = "pruned"     // the input no longer holds the key (--prune, --redo-changed)
)

// OutcomeSet is what one mode declares about the outcomes its records end
// with. Final outcomes end a unit for good. Retryable outcomes are run again
// by --resume: the runtime's own (schemas.Outcome.Retryable, whose records go
// to failed/) and any a mode adds (whose records stay in data/ until the
// retry replaces them, as compress's summary_failed does).
type OutcomeSet struct {
	Final     []schemas.Outcome
	Retryable []schemas.Outcome
}

// Runtime is the outcome set every mode shares: the rollout outcomes of
// schemas, and the final failures a stage may report.
var Runtime = OutcomeSet{
	Final: []schemas.Outcome{schemas.OutcomeCompleted, schemas.OutcomeMaxTurns, schemas.OutcomePartial,
		schemas.OutcomeSummaryFailed, schemas.OutcomeError, schemas.OutcomeBudgetExceeded},
	Retryable: []schemas.Outcome{schemas.OutcomeAPIError, schemas.OutcomeTimeout, schemas.OutcomeSandboxError,
		schemas.OutcomeInternal, schemas.OutcomeLost, schemas.OutcomeBudgetPaused},
}

// All returns the final and retryable outcomes of s.
func (s OutcomeSet) All() []schemas.Outcome {
	return append(slices.Clone(s.Final), s.Retryable...)
}

// Retry reports whether --resume runs a unit that ended with o again.
func (s OutcomeSet) Retry(o schemas.Outcome) bool {
	return o.Retryable() || slices.Contains(s.Retryable, o)
}

// Known returns the outcomes a record may carry in an output folder: the
// runtime's and extra (what run.json lists for the mode).
func Known(extra []schemas.Outcome) map[schemas.Outcome]bool {
	m := map[schemas.Outcome]bool{}
	for _, o := range Runtime.All() {
		m[o] = true
	}
	for _, o := range extra {
		m[o] = true
	}
	return m
}

// IsMarker reports whether o is an outcome of a marker row.
func IsMarker(o schemas.Outcome) bool { return o == Filtered || o == FannedOut || o == Pruned }
