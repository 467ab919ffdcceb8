package report_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/pipeline/report"
	"github.com/tidwall/gjson"
)

// summarizeGJSON is Summarize as it was written on gjson paths: the walk
// over the members must give the same Summary for every valid line.
func summarizeGJSON(line []byte, man *outdir.Manifest) report.Summary {
	r := gjson.GetManyBytes(line, "key", "id", "prompt_index", "sample", "outcome", "conversations.#", "usage.total_tokens",
		"duration_ms", "cost_usd", "toolsets_used", "tool_stats", "reasoning_stats.has_any_reasoning", "model")
	s := report.Summary{
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
	if p := gjson.GetBytes(line, `conversations.#(from=="human").value`); p.Exists() {
		first := strings.TrimSpace(strings.SplitN(strings.TrimSpace(p.String()), "\n", 2)[0])
		if r := []rune(first); len(r) > report.PromptRunes {
			first = string(r[:report.PromptRunes]) + "…"
		}
		s.Prompt = first
	}
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

// TestSummarizeAsGJSON holds Summarize to what report and view showed of
// records before it walked the members itself: plain records, and verbatim
// ones whose members have other JSON types.
func TestSummarizeAsGJSON(t *testing.T) {
	values := []string{`null`, `true`, `false`, `0`, `-3`, `12`, `1.5`, `-2.75`, `1e3`, `2.0`, `1E-2`, `9007199254740993`,
		`-9007199254740993`, `18446744073709551616`, `99999999999999999999999`, `-99999999999999999999999`, `1e400`,
		`""`, `"x"`, `"42"`, `"-7"`, `"3.9"`, `"TRUE"`, `"1"`, `"yes"`, `"\u00e9\n"`, `"99999999999999999999"`,
		`[]`, `[1,"a",null]`, `{}`, `{"count":2,"failure":1}`, `{"count":"3","failure":"2"}`, `{"count":0,"failure":true}`,
		`{"total_tokens":7,"total_tokens":9}`, `{"has_any_reasoning":"true"}`, `{"has_any_reasoning":2}`,
		`[{"count":1},{"failure":4}]`, `{"a":{"count":1,"failure":1},"b":{"count":0},"b":{"count":5}}`,
		`{"outcome":"compressed","original_tokens":"10","compressed_tokens":4.5,"compression_ratio":"0.5"}`,
		`{"outcome":1,"outcome":"later","compression_ratio":true}`}
	members := []string{"key", "id", "prompt_index", "sample", "outcome", "conversations", "usage", "duration_ms", "cost_usd",
		"toolsets_used", "tool_stats", "reasoning_stats", "model", "compression_metrics", "metadata"}
	rng := rand.New(rand.NewPCG(7, 8))
	var lines []string
	for range 5000 {
		var b strings.Builder
		b.WriteString("{")
		for i := range 1 + rng.IntN(8) {
			if i > 0 {
				b.WriteString([]string{",", ", ", " ,\n"}[rng.IntN(3)])
			}
			fmt.Fprintf(&b, "%q:%s", members[rng.IntN(len(members))], values[rng.IntN(len(values))])
		}
		b.WriteString("}")
		lines = append(lines, b.String())
	}
	lines = append(lines,
		`{"key":"k","prompt_index":3,"sample":1,"outcome":"completed","conversations":[{"from":"human","value":"a"},{"from":"gpt","value":"b"}],"usage":{"total_tokens":12},"duration_ms":40,"cost_usd":0.25,"toolsets_used":["terminal","file"],"tool_stats":{"terminal":{"count":2,"success":1,"failure":1}},"reasoning_stats":{"has_any_reasoning":true},"model":"m"}`,
		`{"key":"k3","conversations":[{"from":"system","value":"sys"},{"from":"human","value":"  \n  Fix the bug\nin parser.go"},{"from":"human","value":"later"}]}`,
		`{"key":"k4","conversations":[{"from":"human","value":"`+strings.Repeat("é", 130)+`"}]}`,
		` {"key":"k2","conversations":[],"compression_metrics":{"outcome":"still_over_limit","original_tokens":100,"compressed_tokens":90,"compression_ratio":0.9}} `,
		`[1,2]`, `"text"`, `{}`, ``)
	mans := []*outdir.Manifest{nil, {}, {OutcomeField: "compression_metrics.outcome", OutcomeDefault: "unchanged"}, {OutcomeField: "compression_metrics.outcome"}}
	for _, line := range lines {
		for _, man := range mans {
			got, want := report.Summarize([]byte(line), man), summarizeGJSON([]byte(line), man)
			if strings.Count(line, "compression_metrics") > 1 || strings.Contains(line, `"outcome":1,"outcome"`) {
				// A member given twice: the mode's outcome is the last,
				// as stats count it (gjson took the first).
				want.Outcome = got.Outcome
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s (%+v):\n got %+v\nwant %+v", line, man, got, want)
			}
		}
	}
}

// TestSummarizeOutcomeAsStats: a member given twice gives the mode's outcome
// stats count (the last, as encoding/json reads it).
func TestSummarizeOutcomeAsStats(t *testing.T) {
	man := &outdir.Manifest{OutcomeField: "compression_metrics.outcome", OutcomeDefault: "unchanged"}
	line := `{"outcome":"completed","compression_metrics":{"outcome":1,"outcome":"compressed"}}`
	if s := report.Summarize([]byte(line), man); s.Outcome != "compressed" || s.RecordOutcome != "completed" {
		t.Fatalf("%+v", s)
	}
}

// TestSummaryOwnsItsStrings: the caller may reuse the line's buffer.
func TestSummaryOwnsItsStrings(t *testing.T) {
	line := []byte(`{"key":"k1","id":"i","conversations":[{"from":"human","value":"p"}],"outcome":"completed","model":"m","toolsets_used":["terminal"],"tool_stats":{"terminal":{"count":1}},"compression_metrics":{"outcome":"compressed"}}`)
	s := report.Summarize(line, nil)
	want := fmt.Sprintf("%+v", s)
	for i := range line {
		line[i] = 'x'
	}
	if got := fmt.Sprintf("%+v", s); got != want {
		t.Fatalf("summary changed with its line:\n%s\nwas\n%s", got, want)
	}
}

// TestSummaryPrompt: the first line of the first human turn, blank lines
// before it skipped, cut to PromptRunes runes; only the first 2 KiB of a
// prompt are read, cut between two characters.
func TestSummaryPrompt(t *testing.T) {
	for line, want := range map[string]string{
		`{"conversations":[{"from":"system","value":"s"},{"from":"human","value":"\n  Fix the bug  \nin parser.go"}]}`: "Fix the bug",
		`{"conversations":[{"from":"human","value":"` + strings.Repeat("a", 200) + `"}]}`:                              strings.Repeat("a", report.PromptRunes) + "…",
		`{"conversations":[{"from":"human","value":"` + strings.Repeat(`\u00e9\\`, 1000) + `"}]}`:                      strings.Repeat(`é\`, report.PromptRunes/2) + "…",
		`{"conversations":[{"from":"human","value":"short\nthen ` + strings.Repeat("x", 5000) + `"}]}`:                 "short",
		`{"conversations":[{"from":"human","value":"` + strings.Repeat(" ", 2040) + strings.Repeat("世", 200) + `"}]}`:  "世世", // cut between two runes
		`{"conversations":[{"from":"human","value":"` + strings.Repeat(" ", 2039) + strings.Repeat("世", 200) + `"}]}`:  "世世",
		`{"conversations":[{"from":"gpt","value":"no prompt"}]}`:                                                       "",
	} {
		if got := report.Summarize([]byte(line), nil).Prompt; got != want {
			t.Errorf("%s: prompt %q, want %q", line, got, want)
		}
	}
}

// TestSummaryGrade: a record's reward and grade as pipeline.Stats counts
// them, whichever member comes first.
func TestSummaryGrade(t *testing.T) {
	for line, want := range map[string]struct {
		reward   float64
		rewarded bool
		grade    report.Grade
	}{
		`{"key":"a"}`:     {0, false, report.Ungraded},
		`{"reward":null}`: {0, false, report.Ungraded},
		`{"reward":0.5}`:  {0.5, true, report.Failed},
		`{"reward":"1"}`:  {0, false, report.Ungraded},
		`{"reward":1,"grade":{"grader":"cmd","passed":true,"value":1}}`:      {1, true, report.Passed},
		`{"grade":{"grader":"cmd","passed":false,"value":0},"reward":0}`:     {0, true, report.Failed},
		`{"reward":null,"grade":{"grader":"cmd","passed":null,"error":"x"}}`: {0, false, report.Errored},
		`{"grade":{"grader":"cmd","passed":null,"error":"timed out"}}`:       {0, false, report.Errored},
		`{"grade":"odd","reward":0.25}`:                                      {0.25, true, report.Failed},
		`{"grade":{"passed":true},"reward":-1.5e0}`:                          {-1.5, true, report.Passed},
	} {
		s := report.Summarize([]byte(line), nil)
		if s.Reward != want.reward || s.Rewarded != want.rewarded || s.Grade != want.grade {
			t.Errorf("%s: reward %v %v grade %v, want %+v", line, s.Reward, s.Rewarded, s.Grade, want)
		}
	}
	if report.Errored.String() != "errored" || report.Ungraded.String() != "" {
		t.Fatal("grade names")
	}
}
