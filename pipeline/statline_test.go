package pipeline

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// TestStatFromRecordReadsAsTheLine: what statistics take from a record the
// run just made is what they would read from its line (readStatLine), and
// the records whose line may read as something else are left to the line.
func TestStatFromRecordReadsAsTheLine(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	yes, no := true, false
	full := &schemas.Record{Key: "a", PromptIndex: 7, Sample: 1, Outcome: schemas.OutcomeCompleted, Completed: true,
		APICalls: 3, Usage: schemas.Usage{PromptTokens: 120, CompletionTokens: 30, TotalTokens: 150, CachedPromptTokens: 64, ReasoningTokens: 9},
		CostUSD: f(0.000123456789), ToolStats: map[string]schemas.ToolStat{"terminal": {Count: 2, Success: 1, Failure: 1}, "mcp_fs_read": {Count: 1, Success: 1}},
		ToolErrorCounts: map[string]int{"terminal": 1}, ReasoningStats: schemas.ReasoningStats{TotalAssistantTurns: 3, TurnsWithReasoning: 2, TurnsWithoutReason: 1, HasAnyReasoning: true},
		DurationMS: 1234, Timings: &schemas.Timings{ModelMS: 900, ToolMS: 200, SandboxStartMS: 12, SandboxCloseMS: 3, QueueMS: 1, GraderMS: 40},
		Reward: f(0.75), Grade: &schemas.Grade{Grader: "verify", Passed: &no, Value: f(0.75), Output: "1 failed", DurationMS: 40},
		Conversations: []schemas.Turn{{From: "human", Value: "hi"}}, Extra: map[string]json.RawMessage{"swe": json.RawMessage(`{"resolved":true}`)}}
	for name, rec := range map[string]*schemas.Record{
		"full": full,
		"bare": {Key: "b", Outcome: schemas.OutcomeCompleted},
		"unpriced partial": {Key: "c", Outcome: schemas.OutcomeMaxTurns, Partial: true, APICalls: 9, ToolStats: map[string]schemas.ToolStat{},
			ToolErrorCounts: map[string]int{}, CostUSD: nil, DurationMS: 5},
		"zero cost, passed": {Key: "d", Outcome: schemas.OutcomeCompleted, CostUSD: f(0), Reward: f(1),
			Grade: &schemas.Grade{Grader: "g", Passed: &yes, Value: f(1)}},
		"grader error": {Key: "e", Outcome: schemas.OutcomeCompleted, Grade: &schemas.Grade{Grader: "g", Error: "timed out"}},
		"unicode tool": {Key: "f", Outcome: schemas.OutcomePartial, ToolStats: map[string]schemas.ToolStat{"outil_é✓": {Count: 1, Failure: 1}}},
	} {
		line, err := EncodeRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		got := statFromRecord(&Manifest{}, rec)
		if got == nil {
			t.Errorf("%s: not taken from the record", name)
			continue
		}
		want, err := readStatLine(&Manifest{}, line, rec.Outcome, true)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: from the record\n%+v\nfrom the line\n%+v", name, *got, *want)
		}
	}

	// Left to the line.
	bad := *full
	bad.ToolStats = map[string]schemas.ToolStat{"a\xffb": {Count: 1}, "a\xfeb": {Count: 1}}
	raw := schemas.Record{Key: "g", Outcome: schemas.OutcomeCompleted, Raw: []byte(`{"key":"g","outcome":"completed"}`)}
	for name, c := range map[string]struct {
		man *Manifest
		rec *schemas.Record
	}{
		"tool name not UTF-8": {&Manifest{}, &bad},
		"verbatim":            {&Manifest{}, &raw},
		"mode outcome":        {&Manifest{OutcomeField: "metrics.outcome"}, full},
		"mode cost":           {&Manifest{CostField: "metrics.cost_usd"}, full},
		"mode calls":          {&Manifest{CallsField: "metrics.api_calls"}, full},
	} {
		if l := statFromRecord(c.man, c.rec); l != nil {
			t.Errorf("%s: taken from the record", name)
		}
	}
}
