package compress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/cost"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/schemas/pyjson"
)

// Over-limit policies: what happens to a row still over budget after
// compression.
const (
	OverLimitKeep       = "keep"       // written with outcome still_over_limit
	OverLimitDrop       = "drop"       // left out of the output, counted
	OverLimitQuarantine = "quarantine" // written to quarantine.jsonl instead, counted
)

// Disposals of a row left out of the output by the over-limit policy, counted
// beside the outcomes in compression_metrics.json.
const (
	DisposalDropped     = "dropped"
	DisposalQuarantined = "quarantined"
)

// Stage is the compress stage: it fits the conversation of each record (kept
// in rec.Raw) into the token budget, editing only `conversations`, adding
// `compression_metrics`, and for records that carry the runtime's fields,
// `outcome` when a summary failed. Rows under budget pass through
// byte-identical. Create it with newStage; it is safe for concurrent use.
type Stage struct {
	comp       *compressor
	summarize  rowSummarizer
	overLimit  string
	rowTimeout time.Duration
	quarantine *quarantine
	rows       *rowJournal
	known      func(schemas.Outcome) bool
	// batch answers the summary calls in batch modes (nil otherwise); done
	// says which row keys the output folder holds as final (Preflight).
	batch *batcher
	done  func(key string) bool
	// inflight bounds the bytes of the rows in work; the source took each
	// row's share, Process gives it back.
	inflight *rowBytes
	// budget is the run's spending cap (nil = none), set by UseBudget.
	budget *cost.Budget
}

// Name implements pipeline.Stage.
func (s *Stage) Name() string { return "compress" }

// Process compresses one record. It blocks on summary calls, at most
// rowTimeout in all. It returns an error only when ctx ends (the record is
// then redone by --resume) or the quarantine file cannot be written.
func (s *Stage) Process(ctx context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
	if s.inflight != nil {
		defer s.inflight.release(len(rec.Raw))
	}
	p, err := parseRow(rec.Raw)
	if err != nil {
		// The source checks this; a record that still fails is a bug.
		return nil, fmt.Errorf("compress %s: %w", rec.Key, err)
	}
	rctx := ctx
	if s.rowTimeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, s.rowTimeout)
		defer cancel()
	}
	res, err := s.compressRow(ctx, rctx, &rowCall{key: rec.Key, budget: s.budget}, p)
	if err != nil {
		return nil, err
	}
	m := &res.metrics
	rec.Usage, rec.CostUSD = m.Usage, m.CostUSD
	if res.outcome == OutcomeUnderTarget {
		rec.Outcome = s.keptOutcome(rec.Raw, res.outcome)
		if err := s.count(rec.Key, m, ""); err != nil {
			return nil, err
		}
		return []*schemas.Record{rec}, nil
	}
	if err := s.rewrite(rec, p, &res); err != nil {
		return nil, err
	}
	return s.dispose(rec, res.outcome, m)
}

// compressRow compresses p's turns under rctx (the row's deadline), asking
// the summaries for row. It fails when ctx ends or a summary is deferred to
// a batch; a summary that fails otherwise (the row's deadline passed) makes
// the row summary_failed with its turns unchanged.
func (s *Stage) compressRow(ctx, rctx context.Context, row *rowCall, p parsed) (result, error) {
	key := row.key
	res, err := s.comp.compress(rctx, p.turns, s.summarize.forRow(row))
	if err == nil {
		return res, nil
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if errors.Is(err, pipeline.ErrDeferred) {
		// A summary waits for a batch result that is not here yet
		// (--batch-export, --batch-import): the row stays pending.
		return res, fmt.Errorf("compress %s: %w", key, err)
	}
	// The row's own deadline (--row-timeout) passed during a summary.
	res.outcome, res.turns, res.changed, res.err = OutcomeSummaryFailed, p.turns, false, err
	m := &res.metrics
	m.Outcome, m.Error = string(OutcomeSummaryFailed), fmt.Sprintf("row timeout after %s: %v", s.rowTimeout, err)
	m.StillOverLimit, m.WasCompressed = true, false
	m.CompressedTokens, m.CompressedTurns, m.TokensSaved, m.TurnsRemoved = m.OriginalTokens, m.OriginalTurns, 0, 0
	m.TurnTokens = m.OriginalTurnTokens
	return res, nil
}

// rewrite sets rec's line and outcome after compression: the new
// conversations when they changed, compression_metrics, and the record's
// outcome member when the record's outcome is not its own any more.
func (s *Stage) rewrite(rec *schemas.Record, p parsed, res *result) error {
	out := rec.Raw
	var err error
	if res.changed {
		out, err = schemas.SetMember(out, schemas.MemberConversations, encodeTurns(p, res.turns), p.spaced)
		if err != nil {
			return fmt.Errorf("compress %s: %w", rec.Key, err)
		}
		if out, err = remapLogprobs(out, res.turns, p.spaced); err != nil {
			return fmt.Errorf("compress %s: %w", rec.Key, err)
		}
	}
	m := &res.metrics
	recOC, rewriteOC := s.recordOutcome(rec.Raw, res.outcome, m)
	mj, err := m.MarshalJSON()
	if err != nil {
		return fmt.Errorf("compress %s: encode metrics: %w", rec.Key, err)
	}
	if p.spaced {
		mj = spaceJSON(mj)
	}
	if out, err = schemas.SetMember(out, "compression_metrics", mj, p.spaced); err != nil {
		return fmt.Errorf("compress %s: %w", rec.Key, err)
	}
	if rewriteOC {
		if out, err = schemas.SetMember(out, schemas.MemberOutcome, pyjson.AppendString(nil, string(recOC)), p.spaced); err != nil {
			return fmt.Errorf("compress %s: %w", rec.Key, err)
		}
	}
	rec.Raw = out
	rec.Outcome = recOC
	return nil
}

// remapLogprobs points the record's logprobs entries (--logprobs: one per
// gpt turn, by its index in conversations) at the turns they belong to in
// the compressed conversations, turns: an entry of a turn kept as it was
// moves with it; one of a turn summarised or edited is left out (its
// tokens are no longer in the record). A record without logprobs is
// returned as it is.
func remapLogprobs(raw []byte, turns []turn, spaced bool) ([]byte, error) {
	cur, _, ok := schemas.FirstMember(view(raw), schemas.MemberLogprobs)
	if !ok {
		return raw, nil
	}
	var entries []schemas.TurnLogprobs
	if err := json.Unmarshal([]byte(cur), &entries); err != nil {
		return nil, fmt.Errorf("%s: %w", schemas.MemberLogprobs, err)
	}
	moved := make(map[int]int, len(turns))
	for j, t := range turns {
		if t.orig >= 0 && t.raw != "" {
			moved[t.orig] = j
		}
	}
	kept := entries[:0]
	for _, e := range entries {
		if j, ok := moved[e.Turn]; ok {
			e.Turn = j
			kept = append(kept, e)
		}
	}
	val, err := json.Marshal(kept)
	if err != nil {
		return nil, err
	}
	if spaced {
		val = spaceJSON(val)
	}
	return schemas.SetMember(raw, schemas.MemberLogprobs, val, spaced)
}

// recordOutcome is the outcome of a compressed record whose compress outcome
// is oc, and whether it differs from the outcome member raw carries. A
// hermes-pipe record (it has key and outcome) keeps its own outcome unless
// compress failed it, its own cap stopped it, or the outcome is one only
// compress can judge; then m.InputOutcome keeps the record's own when it
// differs.
func (s *Stage) recordOutcome(raw []byte, oc schemas.Outcome, m *RowMetrics) (schemas.Outcome, bool) {
	h := headOf(raw)
	inStr, isStr := schemas.JSONString(h.outcome)
	if _, keyed := schemas.JSONString(h.key); !keyed || !isStr {
		return oc, false
	}
	in := schemas.Outcome(strings.Clone(inStr))
	recOC := oc
	if oc != OutcomeSummaryFailed && oc != OutcomeBudgetExceeded && in.OK() && s.known(in) && !isCompressOutcome(in) {
		recOC = in
	} else if in != oc {
		m.InputOutcome = strings.Clone(inStr)
	}
	return recOC, recOC != in
}

// dispose journals a compressed row and says what goes to the output: the
// record, or nothing when the over-limit policy drops or quarantines a row
// still over its limit (a quarantined row is written to the quarantine file
// before it is journaled).
func (s *Stage) dispose(rec *schemas.Record, oc schemas.Outcome, m *RowMetrics) ([]*schemas.Record, error) {
	disposal := ""
	if oc == OutcomeStillOverLimit {
		switch s.overLimit {
		case OverLimitDrop:
			disposal = DisposalDropped
		case OverLimitQuarantine:
			if err := s.quarantine.add(rec.Key, m, rec.Raw); err != nil {
				return nil, err
			}
			disposal = DisposalQuarantined
		}
	}
	if err := s.count(rec.Key, m, disposal); err != nil {
		return nil, err
	}
	if disposal != "" {
		return nil, nil
	}
	return []*schemas.Record{rec}, nil
}

// count journals a settled row; the aggregate is built from the journal at
// the end of the run. A journal that cannot be written stops the run:
// metrics must not silently go missing.
func (s *Stage) count(key string, m *RowMetrics, disposal string) error {
	if err := s.rows.add(key, m, disposal); err != nil {
		return fmt.Errorf("compress: %w: %w", pipeline.ErrFatal, err)
	}
	return nil
}

// keptOutcome is the outcome of a record passed through unchanged: its own
// when it is a hermes-pipe record (it carries key and a known final outcome,
// and verify holds the record and the ledger to the same outcome), else oc.
func (s *Stage) keptOutcome(raw []byte, oc schemas.Outcome) schemas.Outcome {
	h := headOf(raw)
	_, keyed := schemas.JSONString(h.key)
	if inStr, ok := schemas.JSONString(h.outcome); keyed && ok {
		in := schemas.Outcome(strings.Clone(inStr))
		if s.known(in) && !in.Retryable() {
			return in
		}
	}
	return oc
}

func isCompressOutcome(o schemas.Outcome) bool {
	for _, c := range Outcomes {
		if o == c {
			return true
		}
	}
	return false
}
