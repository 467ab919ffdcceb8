package report

import (
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/tidwall/gjson"
)

// Summary is what report and view know of one record without its
// conversation text.
type Summary struct {
	Key           string
	ID            string
	PromptIndex   int64
	Sample        int64
	Outcome       string // the mode's own outcome (run.json's OutcomeField, when the mode names one)
	RecordOutcome string // the record's "outcome" member
	Turns         int
	Tokens        int64 // usage.total_tokens
	DurationMS    int64
	CostUSD       float64
	Priced        bool // cost_usd is a number
	Toolsets      []string
	Tools         []string // tools called at least once
	ToolFailures  int
	Reasoning     bool // reasoning_stats.has_any_reasoning
	Model         string
}

var summaryPaths = []string{
	"key", "id", "prompt_index", "sample", "outcome", "conversations.#", "usage.total_tokens",
	"duration_ms", "cost_usd", "toolsets_used", "tool_stats", "reasoning_stats.has_any_reasoning", "model",
}

// Summarize decodes the Summary of one record line. man is the folder's
// run.json: its OutcomeField/OutcomeDefault say where the mode keeps its
// outcome, as pipeline.Stats reads it. A line that is not a JSON object
// gives a Summary with only Outcome "" (the caller falls back to the
// ledger's outcome).
func Summarize(line []byte, man *outdir.Manifest) Summary {
	r := gjson.GetManyBytes(line, summaryPaths...)
	s := Summary{
		Key:           r[0].String(),
		ID:            r[1].String(),
		PromptIndex:   r[2].Int(),
		Sample:        r[3].Int(),
		RecordOutcome: r[4].String(),
		Turns:         int(r[5].Int()),
		Tokens:        r[6].Int(),
		DurationMS:    r[7].Int(),
		Reasoning:     r[11].Bool(),
		Model:         r[12].String(),
	}
	if r[8].Type == gjson.Number {
		s.CostUSD, s.Priced = r[8].Float(), true
	}
	for _, v := range r[9].Array() {
		s.Toolsets = append(s.Toolsets, v.String())
	}
	r[10].ForEach(func(k, v gjson.Result) bool {
		if v.Get("count").Int() > 0 {
			s.Tools = append(s.Tools, k.String())
		}
		s.ToolFailures += int(v.Get("failure").Int())
		return true
	})
	s.Outcome = s.RecordOutcome
	if man != nil && man.OutcomeField != "" {
		if own := gjson.GetBytes(line, man.OutcomeField); own.Type == gjson.String && own.Str != "" {
			s.Outcome = own.Str
		} else if man.OutcomeDefault != "" {
			s.Outcome = string(man.OutcomeDefault)
		}
	}
	return s
}
