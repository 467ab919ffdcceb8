package outdir

import (
	"encoding/json"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// ModeOutcome is the outcome the folder's mode gives the record line whose
// "outcome" member is recordOutcome: the string at m.OutcomeField when the
// mode keeps its own there and the line has a non-empty one, else
// m.OutcomeDefault when set, else recordOutcome. Stats count it and report
// shows it; a nil m gives recordOutcome.
func (m *Manifest) ModeOutcome(line []byte, recordOutcome schemas.Outcome) schemas.Outcome {
	if m == nil || m.OutcomeField == "" {
		return recordOutcome
	}
	if own := schemas.StringAt(line, m.OutcomeField); own != "" {
		return schemas.Outcome(own)
	}
	if m.OutcomeDefault != "" {
		return m.OutcomeDefault
	}
	return recordOutcome
}

// ModeSpend replaces *usage and *cost, the record line's own (the input's,
// in a mode that keeps the input record), with the mode's, read from
// m.UsageField and m.CostField, when the mode names them. A record without
// either member made no call of the mode: its usage is zero and its cost $0,
// known without a price. A record with usage and no cost had no price (cost
// nil, counted unpriced).
func (m *Manifest) ModeSpend(line []byte, usage *schemas.Usage, cost **float64) {
	if m == nil || m.CostField == "" {
		return
	}
	*usage, *cost = schemas.Usage{}, nil
	u := schemas.MemberAt(line, m.UsageField)
	if u != "" && u != "null" {
		_ = json.Unmarshal([]byte(u), usage)
	}
	c := schemas.MemberAt(line, m.CostField)
	switch {
	case c != "" && c != "null":
		var v float64
		if json.Unmarshal([]byte(c), &v) == nil {
			*cost = &v
		}
	case u == "" || u == "null":
		zero := 0.0
		*cost = &zero
	}
}

// ModeCalls is the number of model calls the folder's mode made for the
// record line whose "api_calls" member is recordCalls: the integer at
// m.CallsField when the mode names one (0 when the line has none: the mode
// made no call), else recordCalls. A nil m, or a folder written before the
// mode named its field, gives recordCalls.
func (m *Manifest) ModeCalls(line []byte, recordCalls int) int {
	if m == nil || m.CallsField == "" {
		return recordCalls
	}
	c := schemas.MemberAt(line, m.CallsField)
	if c == "" || c == "null" {
		return 0
	}
	var n int
	if json.Unmarshal([]byte(c), &n) != nil {
		return 0
	}
	return n
}
