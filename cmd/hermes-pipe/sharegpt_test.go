package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestShareGPTCommandConvertsAndReportsBadLines(t *testing.T) {
	in := strings.Join([]string{
		`{"messages": [{"role": "user", "content": "hi <b>"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{\"command\": \"ls\"}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "{\"output\": \"a\"}"}, {"role": "assistant", "content": "done", "reasoning_content": "checked"}], "tools": [{"type": "function", "function": {"name": "terminal", "description": "run", "parameters": {"type": "object"}}}]}`,
		``,
		`{"messages": "nope"}`,
	}, "\n")
	var out, errb strings.Builder
	err := convertShareGPT("logs.jsonl", strings.NewReader(in), &out, &errb)
	if exitCode(err) != exitRowsFailed {
		t.Fatalf("exit %d, want 3: %v", exitCode(err), err)
	}
	if !strings.Contains(errb.String(), "logs.jsonl:3:") || !strings.Contains(errb.String(), "messages") {
		t.Errorf("error report = %q", errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("output lines = %d", len(lines))
	}
	var rec struct {
		Conversations []struct{ From, Value string }
	}
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	var froms []string
	for _, c := range rec.Conversations {
		froms = append(froms, c.From)
	}
	if strings.Join(froms, ",") != "system,human,gpt,tool,gpt" {
		t.Fatalf("turns = %v", froms)
	}
	if rec.Conversations[4].Value != "<think>\nchecked\n</think>\ndone" {
		t.Errorf("final gpt turn = %q", rec.Conversations[4].Value)
	}
	// Python-style separators and raw '<', as Hermes' json.dumps writes them.
	if !strings.HasPrefix(lines[0], `{"conversations": [{"from": "system", "value": "You are a function calling AI model.`) || !strings.Contains(lines[0], `"hi <b>"`) {
		t.Errorf("line format: %.200s", lines[0])
	}
}
