package schemas

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
	"unicode"

	"github.com/hermes-pipe/hermes-pipe/schemas/pyjson/pyjsontest"
)

var judgeCases = map[string]bool{
	"":                                    false,
	" ":                                   true,
	"ok":                                  true,
	"Error: x":                            false,
	"error:x":                             false,
	"  ERROR: x":                          false,
	"\u00a0\u3000eRrOr: x":                false,
	"\x1c\x1dError:":                      false, // Python's isspace covers U+001C..U+001F
	"error :":                             true,
	"errors: none":                        true,
	"An error: occurred":                  true,
	"{}":                                  true,
	"[]":                                  true,
	"null":                                true,
	"\"Error: quoted\"":                   true, // valid JSON string: success
	"42":                                  true,
	`{"error": null}`:                     true,
	`{"error": "boom"}`:                   false,
	`{"error": false}`:                    false,
	`{"error": ""}`:                       false,
	`{"error": 0}`:                        false,
	`{"success": false}`:                  false,
	`{"success": 0}`:                      true,
	`{"success": "false"}`:                true,
	`{"success": true, "error": null}`:    true,
	`{"content": {"error": "x"}}`:         false,
	`{"content": {"error": null}}`:        true,
	`{"content": "error: in text"}`:       true,
	`{"content": [{"error": "x"}]}`:       true,
	`{"error": "x", "error": null}`:       true,
	`{"success": false, "success": true}`: true,
	`{"error": NaN}`:                      false,
	`{"error": null} trailing`:            true,
	`{"error": "x"} trailing`:             true, // not JSON, not an error: prefix
	"{bad json":                           true,
	"Error: {\"error\": null}":            false,
	"[1, 2":                               true,
}

func TestToolResultSucceeded(t *testing.T) {
	for in, want := range judgeCases {
		if got := ToolResultSucceeded(in); got != want {
			t.Errorf("%q: got %v, want %v", in, got, want)
		}
	}
}

// TestToolResultMatchesPython compares the judgement with the Python model of
// batch_runner's rule on the hand cases and generated JSON documents.
func TestToolResultMatchesPython(t *testing.T) {
	py := pyjsontest.Python(t)
	var corpus []string
	for in := range judgeCases {
		corpus = append(corpus, in)
	}
	r := rand.New(rand.NewPCG(7, 7))
	fields := []string{`"error": null`, `"error": "e"`, `"error": false`, `"success": false`, `"success": true`,
		`"content": {"error": "x"}`, `"content": {"error": null}`, `"content": "x"`, `"output": "ok"`, `"exit_code": 1`}
	for range 500 {
		var b strings.Builder
		b.WriteString("{")
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(fields[r.IntN(len(fields))])
		}
		b.WriteString("}")
		corpus = append(corpus, b.String())
	}
	corpus = append(corpus, pyjsontest.Corpus(300)...)
	var in bytes.Buffer
	for _, c := range corpus {
		in.WriteByte('x')
		in.WriteString(base64.StdEncoding.EncodeToString([]byte(c)))
		in.WriteByte('\n')
	}
	cmd := exec.Command(py, "testdata/hermes_ref.py", "judge")
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hermes_ref.py judge: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(corpus) {
		t.Fatalf("python answered %d lines for %d results", len(lines), len(corpus))
	}
	for i, c := range corpus {
		if got, want := ToolResultSucceeded(c), lines[i] == "1"; got != want {
			t.Errorf("%q: Go says %v, Python says %v", c, got, want)
		}
	}
}

func TestToolStatsOf(t *testing.T) {
	msgs := []Message{
		{Role: "user", Content: "go"},
		{Role: "assistant", ToolCalls: []ToolCall{
			{ID: "a", Function: FunctionCall{Name: "terminal"}},
			{ID: "b", Function: FunctionCall{Name: "terminal"}},
			{ID: "c", Function: FunctionCall{Name: "read_file"}},
		}},
		{Role: "tool", ToolCallID: "a", Content: `{"output": "x", "error": null}`},
		{Role: "tool", ToolCallID: "b", Content: "Error: denied"},
		{Role: "tool", ToolCallID: "zzz", Content: "unknown id is ignored"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "d", Function: FunctionCall{Name: "read_file"}}}},
		{Role: "tool", ToolCallID: "d", Content: ""},
	}
	stats, errs := ToolStatsOf(msgs)
	want := map[string]ToolStat{"terminal": {Count: 2, Success: 1, Failure: 1}, "read_file": {Count: 2, Failure: 1}}
	if len(stats) != len(want) {
		t.Fatalf("stats %v, want %v", stats, want)
	}
	for k, v := range want {
		if stats[k] != v {
			t.Errorf("%s: %+v, want %+v", k, stats[k], v)
		}
		if errs[k] != v.Failure {
			t.Errorf("errors[%s] = %d, want %d", k, errs[k], v.Failure)
		}
	}
	stats, errs = NormalizeToolStats(stats, errs, []string{"terminal", "web_search"})
	if s, ok := stats["web_search"]; !ok || s != (ToolStat{}) || errs["web_search"] != 0 || stats["read_file"].Count != 2 {
		t.Errorf("normalized: %v %v", stats, errs)
	}
	if _, ok := errs["web_search"]; !ok {
		t.Error("normalized errors lack web_search")
	}
	s2, e2 := NormalizeToolStats(nil, nil, []string{"x"})
	if len(s2) != 1 || len(e2) != 1 {
		t.Errorf("nil maps: %v %v", s2, e2)
	}
}

func TestReasoningStatsOf(t *testing.T) {
	msgs := []Message{
		{Role: "user", Content: "<REASONING_SCRATCHPAD>not counted"},
		{Role: "assistant", Reasoning: "thinking"},
		{Role: "assistant", Reasoning: " \u3000\n"},
		{Role: "assistant", Content: "<REASONING_SCRATCHPAD>x</REASONING_SCRATCHPAD> y"},
		{Role: "assistant", Content: "<think>inline think is not counted</think>"},
	}
	got := ReasoningStatsOf(msgs)
	want := ReasoningStats{TotalAssistantTurns: 4, TurnsWithReasoning: 2, TurnsWithoutReason: 2, HasAnyReasoning: true}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got := ReasoningStatsOf(msgs[2:3]); got.HasAnyReasoning || got.TurnsWithoutReason != 1 {
		t.Errorf("blank reasoning counted: %+v", got)
	}
}

// TestPyIsSpace pins the whitespace set to Python's str.isspace.
func TestPyIsSpace(t *testing.T) {
	python := map[rune]bool{}
	for _, r := range []rune{0x9, 0xa, 0xb, 0xc, 0xd, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680,
		0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a,
		0x2028, 0x2029, 0x202f, 0x205f, 0x3000} {
		python[r] = true
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if pyIsSpace(r) != python[r] {
			t.Errorf("U+%04X: got %v", r, pyIsSpace(r))
		}
	}
	if got := pyStrip("\u3000\x1c a b\u2028\u0085"); got != "a b" {
		t.Errorf("pyStrip = %q", got)
	}
	if got := pyStrip("\xff "); got != "\xff" {
		t.Errorf("invalid UTF-8 stripped: %q", got)
	}
}

func BenchmarkToolResultSucceeded(b *testing.B) {
	results := []string{
		`{"output": "total 12\ndrwxr-xr-x 2 root root 4096 .\n", "exit_code": 0, "error": null}`,
		"plain text output of a command\nwith lines",
		"Error: command not found",
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range results {
			_ = ToolResultSucceeded(r)
		}
	}
}
