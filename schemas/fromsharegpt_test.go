package schemas

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// checkInverse asserts FromShareGPT's guarantee for turns: either an error
// wrapping ErrNotInvertible, or messages and tools that give turns back
// exactly. It reports whether they were read back.
func checkInverse(t *testing.T, turns []Turn) ([]Message, []Tool, bool) {
	t.Helper()
	msgs, tools, err := FromShareGPT(turns)
	if err != nil {
		if !errors.Is(err, ErrNotInvertible) {
			t.Fatalf("error %v does not wrap ErrNotInvertible", err)
		}
		if msgs != nil || tools != nil {
			t.Fatalf("error %v with a result", err)
		}
		return nil, nil, false
	}
	system := ""
	body := turns
	if len(turns) > 0 && turns[0].From == "system" {
		system, body = turns[0].Value, turns[1:]
		got := HermesSystemPrompt(tools)
		if len(msgs) > 0 && msgs[0].Role == "system" {
			got += msgs[0].Content // the text after Hermes' template
		}
		if got != system {
			t.Fatalf("system turn not given back:\n%s", firstDiff([]byte(got), []byte(system)))
		}
	} else if tools != nil {
		t.Fatalf("tools %v without a system turn", tools)
	}
	got := ToShareGPTWithSystem(system, msgs)[1:]
	if j, why := firstTurnDiff(got, body); j >= 0 {
		t.Fatalf("turn %d after the system turn not given back: %s\n got %q\nwant %q", j, why, turnAt(got, j), turnAt(body, j))
	}
	for k := range msgs {
		m := &msgs[k]
		switch m.Role {
		case "user", "tool":
		case "system":
			if k != 0 || len(turns) == 0 || turns[0].From != "system" {
				t.Fatalf("message %d has role system", k)
			}
		case "assistant":
			for c := range m.ToolCalls {
				if m.ToolCalls[c].ID == "" || m.ToolCalls[c].Type != "function" {
					t.Fatalf("message %d call %d: id %q type %q", k, c, m.ToolCalls[c].ID, m.ToolCalls[c].Type)
				}
			}
		default:
			t.Fatalf("message %d has role %q", k, m.Role)
		}
	}
	return msgs, tools, true
}

// firstTurnDiff returns the index of the first turn of want that got does
// not equal, and how; -1 when equal.
func firstTurnDiff(got, want []Turn) (int, string) {
	for j := range min(len(got), len(want)) {
		if got[j] != want[j] {
			return j, "turns differ"
		}
	}
	if len(got) != len(want) {
		return min(len(got), len(want)), "got " + itoa(len(got)) + " turns, want " + itoa(len(want))
	}
	return -1, ""
}

func turnAt(turns []Turn, j int) Turn {
	if j < len(turns) {
		return turns[j]
	}
	return Turn{}
}

// mustInvert asserts that the turns ToShareGPT makes of msgs are read back.
func mustInvert(t *testing.T, msgs []Message, tools []Tool) ([]Message, []Tool) {
	t.Helper()
	turns := ToShareGPT(msgs, tools)
	back, backTools, ok := checkInverse(t, turns)
	if !ok {
		_, _, err := FromShareGPT(turns)
		t.Fatalf("conversion of %+v not read back: %v", msgs, err)
	}
	return back, backTools
}

var sampleTools = []Tool{
	{Type: "function", Function: FunctionSpec{Name: "terminal", Description: "Run <cmd> & report", Parameters: []byte(`{"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}`)}},
	{Type: "function", Function: FunctionSpec{Name: "read_file", Parameters: []byte(`{"type": "object", "properties": {"path": {"type": "string"}, "n": {"type": "number", "default": 0.5}}}`)}},
}

func call(id, name, args string) ToolCall {
	return ToolCall{ID: id, Type: "function", Function: FunctionCall{Name: name, Arguments: args}}
}

// TestFromShareGPTReadsBack reads back hand-built transcripts and checks
// the messages trainers get: reasoning apart from content, call ids from the
// tool responses, results as text.
func TestFromShareGPTReadsBack(t *testing.T) {
	msgs := []Message{
		{Role: "system", Content: "dropped"},
		{Role: "user", Content: "List /tmp, é 🙂"},
		{Role: "assistant", Reasoning: "I should run ls.\nThen count.", ToolCalls: []ToolCall{
			call("c1", "terminal", `{"command": "ls /tmp"}`),
			call("c2", "read_file", `{"path": "/tmp/a"}`),
		}},
		{Role: "tool", ToolCallID: "c1", Content: `{"output": "a\nb\n", "exit_code": 0}`},
		{Role: "tool", ToolCallID: "c2", Content: "plain text result"},
		{Role: "assistant", Content: "Two files.", Reasoning: "counted"},
		{Role: "user", Content: "thanks"},
		{Role: "assistant", Content: "You're welcome."},
	}
	back, tools := mustInvert(t, msgs, sampleTools)
	want := []Message{
		{Role: "user", Content: "List /tmp, é 🙂"},
		{Role: "assistant", Reasoning: "I should run ls.\nThen count.", ToolCalls: []ToolCall{
			call("c1", "terminal", `{"command": "ls /tmp"}`),
			call("c2", "read_file", `{"path": "/tmp/a"}`),
		}},
		{Role: "tool", ToolCallID: "c1", Name: "terminal", Content: `{"output": "a\nb\n", "exit_code": 0}`},
		{Role: "tool", ToolCallID: "c2", Name: "read_file", Content: "plain text result"},
		{Role: "assistant", Content: "Two files.", Reasoning: "counted"},
		{Role: "user", Content: "thanks"},
		{Role: "assistant", Content: "You're welcome."},
	}
	if !reflect.DeepEqual(back, want) {
		t.Errorf("messages read back:\n got %+v\nwant %+v", back, want)
	}
	if len(tools) != 2 || tools[0].Function.Name != "terminal" || tools[0].Type != "function" ||
		tools[0].Function.Description != "Run <cmd> & report" || tools[1].Function.Description != "" ||
		string(tools[1].Function.Parameters) != `{"type": "object", "properties": {"path": {"type": "string"}, "n": {"type": "number", "default": 0.5}}}` {
		t.Errorf("tools read back: %+v", tools)
	}
}

// TestFromShareGPTShapes reads back transcripts of every shape the modes
// write, and the awkward ones; each must round-trip (through ToShareGPT,
// FromShareGPT and ToShareGPT again) and is checked for what it reads back.
func TestFromShareGPTShapes(t *testing.T) {
	user := Message{Role: "user", Content: "do it"}
	cases := []struct {
		name  string
		msgs  []Message
		check func(t *testing.T, back []Message)
	}{
		{"answer only", []Message{user, {Role: "assistant", Content: "done"}}, nil},
		{"no messages after the prompt", []Message{user}, nil},
		{"empty answer", []Message{user, {Role: "assistant"}}, func(t *testing.T, back []Message) {
			if back[1].Content != "" || back[1].Reasoning != "" {
				t.Errorf("got %+v", back[1])
			}
		}},
		{"reasoning and empty answer", []Message{user, {Role: "assistant", Reasoning: "hmm"}}, func(t *testing.T, back []Message) {
			if back[1].Reasoning != "hmm" || back[1].Content != "" {
				t.Errorf("got %+v", back[1])
			}
		}},
		{"whitespace-only reasoning", []Message{user, {Role: "assistant", Reasoning: " \n\t", Content: "x"}}, func(t *testing.T, back []Message) {
			if back[1].Reasoning != "" || back[1].Content != "x" {
				t.Errorf("got %+v", back[1])
			}
		}},
		{"reasoning written as a whitespace think block in content", []Message{user, {Role: "assistant", Content: "<think>\n  \n</think>\nanswer"}}, func(t *testing.T, back []Message) {
			if back[1].Reasoning != "" || back[1].Content != "<think>\n  \n</think>\nanswer" {
				t.Errorf("got %+v", back[1])
			}
		}},
		{"think block in content", []Message{user, {Role: "assistant", Content: "<think>\nplan\n</think>\nanswer"}}, func(t *testing.T, back []Message) {
			if back[1].Reasoning != "plan" || back[1].Content != "answer" {
				t.Errorf("got %+v", back[1])
			}
		}},
		{"think text in the middle of content", []Message{user, {Role: "assistant", Content: "I write <think> tags"}}, func(t *testing.T, back []Message) {
			if back[1].Content != "I write <think> tags" {
				t.Errorf("got %+v", back[1])
			}
		}},
		{"scratchpad", []Message{user, {Role: "assistant", Content: "<REASONING_SCRATCHPAD>\nplan\n</REASONING_SCRATCHPAD>\nanswer"}}, nil},
		{"reasoning holding a think close", []Message{user, {Role: "assistant", Reasoning: "a\n</think>\nb", Content: "c"}}, nil},
		{"reasoning holding a blank then a think close", []Message{user, {Role: "assistant", Reasoning: " \n</think>\nb", Content: "c"}}, nil},
		{"padded content", []Message{user, {Role: "assistant", Reasoning: "r", Content: "\n  answer  \n"}}, nil},
		{"calls with content", []Message{user,
			{Role: "assistant", Content: "Let me look.", ToolCalls: []ToolCall{call("a", "terminal", `{"command": "ls"}`)}},
			{Role: "tool", ToolCallID: "a", Content: "x"},
		}, func(t *testing.T, back []Message) {
			if back[1].Content != "Let me look." || back[1].Reasoning != "" || len(back[1].ToolCalls) != 1 {
				t.Errorf("got %+v", back[1])
			}
		}},
		{"calls with reasoning and content", []Message{user,
			{Role: "assistant", Reasoning: "r", Content: "  c  ", ToolCalls: []ToolCall{call("a", "terminal", `{}`)}},
			{Role: "tool", ToolCallID: "a", Content: "x"},
		}, func(t *testing.T, back []Message) {
			if back[1].Content != "  c  " || back[1].Reasoning != "r" {
				t.Errorf("got %+v", back[1])
			}
		}},
		{"calls with whitespace content", []Message{user,
			{Role: "assistant", Content: " \n ", ToolCalls: []ToolCall{call("a", "terminal", `{}`)}},
			{Role: "tool", ToolCallID: "a", Content: "x"},
		}, nil},
		{"think text in arguments", []Message{user,
			{Role: "assistant", ToolCalls: []ToolCall{call("a", "terminal", `{"command": "echo <think>"}`)}},
			{Role: "tool", ToolCallID: "a", Content: "<think>"},
		}, nil},
		{"think text in arguments with content", []Message{user,
			{Role: "assistant", Content: "c", ToolCalls: []ToolCall{call("a", "terminal", `{"command": "echo <think>"}`)}},
			{Role: "tool", ToolCallID: "a", Content: "x"},
		}, func(t *testing.T, back []Message) {
			if back[1].Content != "c" {
				t.Errorf("got %+v", back[1])
			}
		}},
		{"empty think as content with think text in arguments", []Message{user,
			{Role: "assistant", Content: "<think>\n</think>", ToolCalls: []ToolCall{call("a", "terminal", `{"command": "<think>"}`)}},
		}, nil},
		{"tool call text in content before real calls", []Message{user,
			{Role: "assistant", Content: "I will send\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {}}\n</tool_call>", ToolCalls: []ToolCall{call("a", "terminal", `{"command": "ls"}`)}},
			{Role: "tool", ToolCallID: "a", Content: "x"},
		}, func(t *testing.T, back []Message) {
			if len(back[1].ToolCalls) != 1 || back[1].ToolCalls[0].Function.Name != "terminal" || !strings.Contains(back[1].Content, "<tool_call>") {
				t.Errorf("got %+v", back[1])
			}
		}},
		{"tool call text in an answer", []Message{user, {Role: "assistant", Content: "Use <tool_call> tags."}}, nil},
		{"multiple calls, fewer responses", []Message{user,
			{Role: "assistant", ToolCalls: []ToolCall{call("a", "terminal", `{"command": "ls"}`), call("b", "read_file", `{"path": "x"}`), call("c", "terminal", `[1, 2]`)}},
			{Role: "tool", ToolCallID: "a", Content: "one"},
			{Role: "tool", ToolCallID: "", Content: "two"},
		}, func(t *testing.T, back []Message) {
			ids := []string{back[1].ToolCalls[0].ID, back[1].ToolCalls[1].ID, back[1].ToolCalls[2].ID}
			if !reflect.DeepEqual(ids, []string{"a", "call_2_1", "call_2_2"}) {
				t.Errorf("call ids %q", ids)
			}
			if back[3].ToolCallID != "" || back[3].Name != "read_file" {
				t.Errorf("second result %+v", back[3])
			}
		}},
		{"more responses than calls", []Message{user,
			{Role: "assistant", ToolCalls: []ToolCall{call("a", "terminal", `{}`)}},
			{Role: "tool", ToolCallID: "a", Content: "one"},
			{Role: "tool", ToolCallID: "b", Content: "two"},
		}, func(t *testing.T, back []Message) {
			if back[3].Name != "unknown" {
				t.Errorf("got %+v", back[3])
			}
		}},
		{"calls without results", []Message{user,
			{Role: "assistant", ToolCalls: []ToolCall{call("a", "terminal", `{}`)}},
			{Role: "user", Content: "stop"},
		}, func(t *testing.T, back []Message) {
			if back[1].ToolCalls[0].ID != "call_2_0" {
				t.Errorf("got %+v", back[1])
			}
		}},
		{"malformed arguments", []Message{user,
			{Role: "assistant", ToolCalls: []ToolCall{call("a", "terminal", `{"command": "ls"`)}},
			{Role: "tool", ToolCallID: "a", Content: "x"},
		}, func(t *testing.T, back []Message) {
			if back[1].ToolCalls[0].Function.Arguments != "{}" {
				t.Errorf("got %+v", back[1])
			}
		}},
		{"non-object arguments", []Message{user,
			{Role: "assistant", ToolCalls: []ToolCall{call("a", "t", `"a string"`), call("b", "t", `1e400`), call("c", "t", `null`)}},
		}, nil},
		{"results of every kind", []Message{user,
			{Role: "assistant", ToolCalls: []ToolCall{call("a", "t", `{}`)}},
			{Role: "tool", ToolCallID: "a", Content: `  {"a":1}`},
			{Role: "tool", ToolCallID: "b", Content: `[1, "x"]`},
			{Role: "tool", ToolCallID: "c", Content: `{not json`},
			{Role: "tool", ToolCallID: "d", Content: "\"quoted\" \\ \n\t\x01 é"},
			{Role: "tool", ToolCallID: "e", Content: ""},
			{Role: "tool", ToolCallID: "f", ContentJSON: `[{"type": "text", "text": "[screenshot]"}]`},
			{Role: "tool", ToolCallID: "g", Content: "\v{\"a\": 1}"},
		}, func(t *testing.T, back []Message) {
			if back[2].Content != `{"a": 1}` || back[4].Content != `{not json` || back[5].Content != "\"quoted\" \\ \n\t\x01 é" ||
				back[7].Content != `[{"type": "text", "text": "[screenshot]"}]` {
				t.Errorf("got %+v", back[2:])
			}
		}},
		{"names and ids that need escapes", []Message{user,
			{Role: "assistant", ToolCalls: []ToolCall{call("x\"y", "na\"me\n", `{"k": "v\u2028"}`)}},
			{Role: "tool", ToolCallID: "x\"y", Content: "r"},
		}, func(t *testing.T, back []Message) {
			if back[1].ToolCalls[0].Function.Name != "na\"me\n" || back[2].ToolCallID != "x\"y" {
				t.Errorf("got %+v", back[1:])
			}
		}},
		{"invalid UTF-8", []Message{{Role: "user", Content: "q\xff"}, {Role: "assistant", Reasoning: "\xfe", Content: "a\xc3"}}, nil},
		{"compress summary in the middle", []Message{user,
			{Role: "assistant", Reasoning: "r", ToolCalls: []ToolCall{call("a", "terminal", `{}`)}},
			{Role: "tool", ToolCallID: "a", Content: "x"},
			{Role: "user", Content: "[CONTEXT SUMMARY]: earlier turns did things"},
			{Role: "assistant", Content: "continuing", ToolCalls: []ToolCall{call("b", "terminal", `{}`)}},
			{Role: "tool", ToolCallID: "b", Content: "y"},
			{Role: "assistant", Content: "done"},
		}, nil},
		{"consecutive assistant messages and dropped messages", []Message{user,
			{Role: "assistant", Content: "one"},
			{Role: "tool", ToolCallID: "z", Content: "orphan"},
			{Role: "system", Content: "late"},
			{Role: "assistant", Content: "two"},
		}, nil},
		{"list content of the prompt", []Message{{Role: "user", Content: "hi\n[screenshot]", ContentJSON: `[{"type": "text", "text": "hi"}, {"type": "text", "text": "[screenshot]"}]`}}, func(t *testing.T, back []Message) {
			if back[0].ContentJSON == "" {
				t.Errorf("got %+v", back[0])
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			back, _ := mustInvert(t, c.msgs, sampleTools)
			if c.check != nil {
				c.check(t, back)
			}
		})
	}
}

// TestFromShareGPTRefuses gives turns no transcript converts to; each must
// be refused naming the turn.
func TestFromShareGPTRefuses(t *testing.T) {
	sys := Turn{From: "system", Value: HermesSystemPrompt(sampleTools)}
	human := Turn{From: "human", Value: "q"}
	call := "<tool_call>\n{\"name\": \"terminal\", \"arguments\": {}}\n</tool_call>"
	resp := "<tool_response>\n{\"tool_call_id\": \"a\", \"name\": \"terminal\", \"content\": \"x\"}\n</tool_response>"
	cases := []struct {
		name  string
		turns []Turn
		turn  string
	}{
		{"system not Hermes'", []Turn{{From: "system", Value: "You are helpful."}, human}, "conversations[0]"},
		{"tool list not canonical", []Turn{{From: "system", Value: systemPromptHead + `[{"name":"t","description":"","parameters":{},"required":null}]` + systemPromptTail}, human}, "conversations[0]"},
		{"tool list missing required", []Turn{{From: "system", Value: systemPromptHead + `[{"name": "t", "description": "", "parameters": {}}]` + systemPromptTail}, human}, "conversations[0]"},
		{"string schema", []Turn{{From: "system", Value: systemPromptHead + `[{"name": "t", "description": "", "parameters": "{}", "required": null}]` + systemPromptTail}, human}, "conversations[0]"},
		{"first turn gpt", []Turn{sys, {From: "gpt", Value: "<think>\n</think>\nhi"}}, "conversations[1]"},
		{"later system turn", []Turn{sys, human, {From: "system", Value: "x"}}, "conversations[2]"},
		{"unknown from", []Turn{sys, human, {From: "observation", Value: "x"}}, "conversations[2]"},
		{"answer without think", []Turn{sys, human, {From: "gpt", Value: "hello"}}, "conversations[2]"},
		{"answer not trimmed", []Turn{sys, human, {From: "gpt", Value: "<think>\n</think>\nhello\n"}}, "conversations[2]"},
		{"scratchpad left", []Turn{sys, human, {From: "gpt", Value: "<think>\n</think>\n<REASONING_SCRATCHPAD>x"}}, "conversations[2]"},
		{"tool turn after an answer", []Turn{sys, human, {From: "gpt", Value: "<think>\n</think>\nhi"}, {From: "tool", Value: resp}}, "conversations[2]"},
		{"tool turn first", []Turn{sys, human, {From: "tool", Value: resp}}, "conversations[2]"},
		{"tool turn not blocks", []Turn{sys, human, {From: "gpt", Value: "<think>\n</think>\n" + call}, {From: "tool", Value: "output"}}, "conversations[3]"},
		{"response name not the call's", []Turn{sys, human, {From: "gpt", Value: "<think>\n</think>\n" + call}, {From: "tool", Value: strings.Replace(resp, `"name": "terminal"`, `"name": "other"`, 1)}}, "conversations[3]"},
		{"string result that is JSON", []Turn{sys, human, {From: "gpt", Value: "<think>\n</think>\n" + call}, {From: "tool", Value: strings.Replace(resp, `"content": "x"`, `"content": "{}"`, 1)}}, "conversations[3]"},
		{"number result", []Turn{sys, human, {From: "gpt", Value: "<think>\n</think>\n" + call}, {From: "tool", Value: strings.Replace(resp, `"content": "x"`, `"content": 5`, 1)}}, "conversations[3]"},
		{"arguments not canonical", []Turn{sys, human, {From: "gpt", Value: "<think>\n</think>\n" + strings.Replace(call, "{}", `{"a":1}`, 1)}, {From: "tool", Value: resp}}, "conversations[2]"},
		{"escaped name not canonical", []Turn{sys, human, {From: "gpt", Value: "<think>\n</think>\n" + strings.Replace(call, `"terminal"`, `"termina\u006c"`, 1)}, {From: "tool", Value: resp}}, "conversations[2]"},
		{"tool turn with an empty line", []Turn{sys, human, {From: "gpt", Value: "<think>\n</think>\n" + call}, {From: "tool", Value: resp + "\n"}}, "conversations[3]"},
		{"invalid UTF-8", []Turn{sys, {From: "human", Value: "q\xff"}}, "conversations[1]"},
		{"list value on a gpt turn", []Turn{sys, human, {From: "gpt", Value: "<think>\n</think>", ValueJSON: "[]"}}, "conversations[2]"},
		{"lone surrogate escape", []Turn{sys, human, {From: "gpt", Value: "<think>\n</think>\n" + call}, {From: "tool", Value: strings.Replace(resp, `"content": "x"`, `"content": "\ud800"`, 1)}}, "conversations[3]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msgs, tools, err := FromShareGPT(c.turns)
			if !errors.Is(err, ErrNotInvertible) {
				t.Fatalf("got %v (%+v, %+v), want ErrNotInvertible", err, msgs, tools)
			}
			if !strings.HasPrefix(err.Error(), c.turn+":") {
				t.Errorf("error %q does not name %s", err, c.turn)
			}
		})
	}
}

// TestFromShareGPTWithoutSystem reads turns that do not start with a system
// turn: no tools, and every turn is given back.
func TestFromShareGPTWithoutSystem(t *testing.T) {
	full := ToShareGPT([]Message{{Role: "user", Content: "q"}, {Role: "assistant", Content: "a"}}, sampleTools)
	msgs, tools, ok := checkInverse(t, full[1:])
	if !ok || tools != nil || len(msgs) != 2 || msgs[0].Content != "q" {
		t.Fatalf("got %+v %+v %v", msgs, tools, ok)
	}
	msgs, tools, err := FromShareGPT(nil)
	if err != nil || msgs != nil || tools != nil {
		t.Fatalf("no turns: %+v %+v %v", msgs, tools, err)
	}
	msgs, tools, ok = checkInverse(t, full[:1])
	if !ok || msgs != nil || tools == nil || len(tools) != 2 {
		t.Fatalf("system turn only: %+v %+v %v", msgs, tools, ok)
	}
}

// TestToolsOfSystemPrompt reads tool lists back and hands out copies.
func TestToolsOfSystemPrompt(t *testing.T) {
	for _, tools := range [][]Tool{nil, sampleTools, {{Function: FunctionSpec{Name: "bare"}}}} {
		sys := HermesSystemPrompt(tools)
		got, err := ToolsOfSystemPrompt(sys)
		if err != nil {
			t.Fatal(err)
		}
		if got == nil || HermesSystemPrompt(got) != sys {
			t.Fatalf("tools %+v read back as %+v", tools, got)
		}
		if len(got) > 0 {
			got[0].Function.Name = "changed"
			got[0].Function.Parameters[0] = 'X'
			again, _ := ToolsOfSystemPrompt(sys)
			if HermesSystemPrompt(again) != sys {
				t.Fatal("changing a result changed a later one")
			}
		}
	}
	if _, err := ToolsOfSystemPrompt(systemPromptHead + "[" + systemPromptTail); !errors.Is(err, ErrNotInvertible) {
		t.Errorf("bad JSON: %v", err)
	}
	if _, err := ToolsOfSystemPrompt(systemPromptHead + "{}" + systemPromptTail); !errors.Is(err, ErrNotInvertible) {
		t.Errorf("object: %v", err)
	}
}

// fixtureRecords returns the conversations of every record of the checked-in
// output folders, by file and line.
func fixtureRecords(t testing.TB) map[string][]Turn {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "datasets", "fixtures", "*", "data", "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	recs := map[string][]Turn{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<24)
		for n := 1; sc.Scan(); n++ {
			var rec struct {
				Conversations []Turn `json:"conversations"`
			}
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatalf("%s:%d: %v", f, n, err)
			}
			recs[f+":"+itoa(n)] = rec.Conversations
		}
	}
	if len(recs) < 25 {
		t.Fatalf("found %d fixture records, want at least 25", len(recs))
	}
	return recs
}

// compressFixture reports whether a fixture record is compress output. The
// compress fixture is made from a synthetic input, not Hermes' form (its
// system turn is not Hermes' template, its tool turns hold bare text), so
// its records must be refused, each naming a turn.
func compressFixture(where string) bool {
	return strings.Contains(filepath.ToSlash(where), "/fixtures/compress/")
}

// TestFromShareGPTFixtures reads back every record of the checked-in
// generate, swe and cron output folders; the compress folder's records are
// refused, as a whole and without their system turn.
func TestFromShareGPTFixtures(t *testing.T) {
	reasoning, calls, compressed := 0, 0, 0
	for where, turns := range fixtureRecords(t) {
		if compressFixture(where) {
			compressed++
			for _, ts := range [][]Turn{turns, turns[1:]} {
				if _, _, err := FromShareGPT(ts); !errors.Is(err, ErrNotInvertible) || !strings.HasPrefix(err.Error(), "conversations[") {
					t.Errorf("%s: got %v, want ErrNotInvertible naming a turn", where, err)
				}
				checkInverse(t, ts)
			}
			continue
		}
		msgs, _, err := FromShareGPT(turns)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		checkInverse(t, turns)
		for _, m := range msgs {
			if m.Reasoning != "" {
				reasoning++
			}
			calls += len(m.ToolCalls)
			if strings.HasPrefix(m.Content, emptyThink) {
				t.Errorf("%s: content keeps the empty think block: %q", where, m.Content)
			}
		}
	}
	if calls == 0 || compressed == 0 {
		t.Errorf("%d tool calls read from the fixtures, %d compress records", calls, compressed)
	}
	t.Logf("%d messages with reasoning, %d tool calls", reasoning, calls)
}

// TestFromShareGPTGoldenInputs reads back the conversions of the sharegpt
// golden inputs.
func TestFromShareGPTGoldenInputs(t *testing.T) {
	for _, in := range goldenInputs(t) {
		for _, flatten := range []bool{false, true} {
			turns := convertFile(t, in, ConvertOptions{FlattenContent: flatten})
			if _, _, ok := checkInverse(t, turns); !ok {
				_, _, err := FromShareGPT(turns)
				t.Errorf("%s (flatten %v): %v", in, flatten, err)
			}
		}
	}
}

// exportLine writes msgs and tools as an OpenAI-format line the way a
// trainer's file holds them: content null beside tool calls, reasoning as
// reasoning_content, null for what is absent.
func exportLine(t *testing.T, msgs []Message, tools []Tool, argsAsObject, paramsAsString bool) []byte {
	t.Helper()
	type fn struct {
		Name      string `json:"name"`
		Arguments any    `json:"arguments"`
	}
	type tc struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	type msg struct {
		Role       string  `json:"role"`
		Content    *string `json:"content"`
		Reasoning  *string `json:"reasoning_content"`
		ToolCalls  []tc    `json:"tool_calls"`
		ToolCallID *string `json:"tool_call_id"`
		Name       *string `json:"name"`
	}
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	var out struct {
		Messages []msg `json:"messages"`
		Tools    []any `json:"tools"`
	}
	for _, m := range msgs {
		o := msg{Role: m.Role, Content: &m.Content, Reasoning: opt(m.Reasoning), ToolCallID: opt(m.ToolCallID), Name: opt(m.Name)}
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			o.Content = opt(m.Content)
		}
		for _, c := range m.ToolCalls {
			var args any = c.Function.Arguments
			if argsAsObject {
				args = json.RawMessage(c.Function.Arguments)
			}
			o.ToolCalls = append(o.ToolCalls, tc{ID: c.ID, Type: c.Type, Function: fn{Name: c.Function.Name, Arguments: args}})
		}
		out.Messages = append(out.Messages, o)
	}
	for _, tl := range tools {
		var params any = json.RawMessage(tl.Function.Parameters)
		if paramsAsString {
			params = string(tl.Function.Parameters)
		}
		out.Tools = append(out.Tools, map[string]any{"type": tl.Type, "function": map[string]any{
			"name": tl.Function.Name, "description": tl.Function.Description, "parameters": params,
		}})
	}
	line, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// TestConvertOpenAILineReadsExport converts the messages FromShareGPT reads
// from every fixture record, written as export and Parquet-to-JSON tools
// write them, back to the record's turns.
func TestConvertOpenAILineReadsExport(t *testing.T) {
	for where, turns := range fixtureRecords(t) {
		if compressFixture(where) {
			continue
		}
		msgs, tools, err := FromShareGPT(turns)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		for _, form := range [][2]bool{{false, false}, {true, true}} {
			line := exportLine(t, msgs, tools, form[0], form[1])
			got, err := ConvertOpenAILine(line)
			if err != nil {
				t.Fatalf("%s %v: %v\n%s", where, form, err, line)
			}
			if j, why := firstTurnDiff(got, turns); j >= 0 {
				t.Fatalf("%s %v: turn %d: %s\n got %q\nwant %q", where, form, j, why, turnAt(got, j), turnAt(turns, j))
			}
		}
	}
}

// TestConvertOpenAILineLenient reads the forms trainers' files and
// Parquet-to-JSON tools give: arguments as an object, parameters as JSON
// text, null for absent fields. Each must convert as the plain form does.
func TestConvertOpenAILineLenient(t *testing.T) {
	plain := `{"messages": [{"role": "user", "content": "q"},
		{"role": "assistant", "content": "", "reasoning_content": "r", "tool_calls": [{"id": "a", "type": "function", "function": {"name": "t", "arguments": "{\"x\": [1, 2.5]}"}}]},
		{"role": "tool", "tool_call_id": "a", "content": "ok"},
		{"role": "assistant", "content": "done"}],
		"tools": [{"type": "function", "function": {"name": "t", "description": "d", "parameters": {"type": "object", "properties": {"x": {"type": "array"}}}}}]}`
	lenient := `{"messages": [{"role": "user", "content": "q", "reasoning_content": null, "tool_calls": null, "name": null, "tool_call_id": null},
		{"role": "assistant", "content": null, "reasoning_content": "r", "reasoning": null, "tool_calls": [{"id": "a", "type": null, "function": {"name": "t", "arguments": {"x": [1, 2.5]}}}], "name": null, "tool_call_id": null},
		{"role": "tool", "tool_call_id": "a", "content": "ok", "name": null, "tool_calls": null, "reasoning_content": null},
		{"role": "assistant", "content": "done", "tool_calls": [], "reasoning_content": null}],
		"tools": [{"type": "function", "function": {"name": "t", "description": null, "parameters": "{\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"array\"}}}"}}]}`
	want, err := ConvertOpenAILine([]byte(plain))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ConvertOpenAILine([]byte(lenient))
	if err != nil {
		t.Fatal(err)
	}
	// The lenient form has no description: the only difference allowed.
	want[0].Value = strings.Replace(want[0].Value, `"description": "d"`, `"description": ""`, 1)
	if j, why := firstTurnDiff(got, want); j >= 0 {
		t.Errorf("turn %d: %s\n got %q\nwant %q", j, why, turnAt(got, j), turnAt(want, j))
	}
	for _, params := range []string{`"{bad"`, `"[1]"`, `"\"s\""`} {
		line := `{"messages": [{"role": "user", "content": "q"}], "tools": [{"type": "function", "function": {"name": "t", "parameters": ` + params + `}}]}`
		var fe *FieldError
		if _, err := ConvertOpenAILine([]byte(line)); !errors.As(err, &fe) || fe.Field != "tools[0].function.parameters" {
			t.Errorf("parameters %s: got %v, want an error naming tools[0].function.parameters", params, err)
		}
	}
}

// fuzzMessages builds a transcript from the fuzzer's plan and strings.
func fuzzMessages(plan []byte, s [4]string) []Message {
	pick := func(b byte) string { return s[b%4] }
	msgs := []Message{{Role: "user", Content: s[0]}}
	for i := 0; i+1 < len(plan) && i < 24; i += 2 {
		op, arg := plan[i], plan[i+1]
		switch op % 5 {
		case 0:
			msgs = append(msgs, Message{Role: "user", Content: pick(arg)})
		case 1:
			msgs = append(msgs, Message{Role: "assistant", Reasoning: pick(arg), Content: pick(arg >> 2)})
		case 2:
			m := Message{Role: "assistant", Reasoning: pick(arg >> 4), Content: pick(arg >> 6)}
			for k := 0; k <= int(arg%3); k++ {
				m.ToolCalls = append(m.ToolCalls, call(pick(arg>>k), pick(arg>>(k+1)), pick(arg>>(k+2))))
			}
			msgs = append(msgs, m)
		case 3:
			msgs = append(msgs, Message{Role: "tool", ToolCallID: pick(arg), Content: pick(arg >> 2)})
		default:
			msgs = append(msgs, Message{Role: "assistant", Content: "<think>\n" + pick(arg) + "\n</think>\n" + pick(arg>>2)})
		}
	}
	return msgs
}

// fuzzTurns builds turns from the fuzzer's plan and strings, in and around
// the forms Hermes writes.
func fuzzTurns(plan []byte, s [4]string) []Turn {
	pick := func(b byte) string { return s[b%4] }
	turns := []Turn{{From: "system", Value: HermesSystemPrompt(sampleTools)}, {From: "human", Value: s[0]}}
	if len(plan) > 0 && plan[0]&0x80 != 0 {
		turns = turns[1:]
	}
	for i := 0; i+1 < len(plan) && i < 24; i += 2 {
		op, arg := plan[i], plan[i+1]
		var v string
		from := "gpt"
		switch op % 8 {
		case 0:
			from, v = "human", pick(arg)
		case 1:
			v = pick(arg)
		case 2:
			v = "<think>\n" + pick(arg) + "\n</think>\n" + pick(arg>>2)
		case 3:
			v = "<think>\n</think>\n" + pick(arg)
		case 4:
			v = pick(arg) + "<tool_call>\n{\"name\": " + pick(arg>>2) + ", \"arguments\": " + pick(arg>>4) + "}\n</tool_call>"
		case 5:
			v = "<think>\n" + pick(arg) + "\n</think>\n<tool_call>\n{\"name\": \"terminal\", \"arguments\": " + pick(arg>>2) + "}\n</tool_call>"
		case 6:
			from, v = "tool", "<tool_response>\n{\"tool_call_id\": "+pick(arg)+", \"name\": \"terminal\", \"content\": "+pick(arg>>2)+"}\n</tool_response>"
		default:
			from, v = "tool", pick(arg)
		}
		turns = append(turns, Turn{From: from, Value: v})
	}
	return turns
}

// FuzzFromShareGPT asserts the guarantee on arbitrary turns (exact or
// ErrNotInvertible) and that every conversion ToShareGPT makes is read
// back.
func FuzzFromShareGPT(f *testing.F) {
	f.Add([]byte{2, 1, 3, 0, 1, 5}, "q", `{"a": 1}`, "<think>", `"terminal"`)
	f.Add([]byte{4, 2, 6, 3, 2, 0}, " ", "\"x\"", "{}", "[1, 2]")
	f.Add([]byte{0x85, 9, 7, 1, 4, 6}, "\n</think>\n", "<tool_call>\n{\"name\": \"t\", \"arguments\": {}}\n</tool_call>", "é\xff", "")
	f.Add([]byte{2, 0xff, 3, 1, 3, 2, 1, 0}, "<REASONING_SCRATCHPAD>", "\t", "</think>", "{\"b\":[1.0,2e5]}")
	f.Fuzz(func(t *testing.T, plan []byte, a, b, c, d string) {
		s := [4]string{a, b, c, d}
		checkInverse(t, fuzzTurns(plan, s))
		msgs := fuzzMessages(plan, s)
		if _, _, ok := checkInverse(t, ToShareGPT(msgs, sampleTools)); !ok {
			_, _, err := FromShareGPT(ToShareGPT(msgs, sampleTools))
			t.Fatalf("conversion of %+v not read back: %v", msgs, err)
		}
	})
}

// benchTurns is a realistic generate record: ten turns after the system
// turn, with reasoning, tool calls and JSON results.
func benchTurns() []Turn {
	msgs := []Message{{Role: "user", Content: "Find the failing test in the repository and fix it. Report what changed."}}
	for i := range 4 {
		id := "call_" + itoa(i)
		msgs = append(msgs,
			Message{Role: "assistant", Reasoning: "I should look at the test output first, then open the file that fails.\nStep " + itoa(i) + ".",
				Content: "Running the tests.", ToolCalls: []ToolCall{call(id, "terminal", `{"command": "cd /repo && go test ./... 2>&1 | tail -n 40", "timeout": 120}`)}},
			Message{Role: "tool", ToolCallID: id, Content: `{"output": "--- FAIL: TestParse (0.00s)\n    parse_test.go:42: got \"a\", want \"b\"\nFAIL\nexit status 1\nFAIL\texample.com/repo/parse\t0.004s\n", "exit_code": 1, "error": null}`},
		)
	}
	msgs = append(msgs, Message{Role: "assistant", Reasoning: "The fix is in parse.go.", Content: "I changed parse.go so that TestParse passes: the quote handling was off by one."})
	return ToShareGPT(msgs, sampleTools)
}

// BenchmarkFromShareGPT measures reading back a realistic record; its
// bytes are the turns' values. For scale, "decode" measures json.Unmarshal
// of the same record's line into its turns, which any reader of records
// pays before calling FromShareGPT.
func BenchmarkFromShareGPT(b *testing.B) {
	turns := benchTurns()
	n := 0
	for _, t := range turns {
		n += len(t.Value)
	}
	b.Run("inverse", func(b *testing.B) {
		b.SetBytes(int64(n))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := FromShareGPT(turns); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		line, err := json.Marshal(map[string]any{"conversations": turns})
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(n))
		b.ReportAllocs()
		for b.Loop() {
			var rec struct {
				Conversations []Turn `json:"conversations"`
			}
			if err := json.Unmarshal(line, &rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestFromShareGPTSystemSuffix reads a system turn holding text after Hermes'
// template, as compress appends its notice: the template's tools, and the
// text as a first system message that the forward conversion skips.
func TestFromShareGPTSystemSuffix(t *testing.T) {
	const notice = "\n\nSome of your previous tool responses may be summarized to preserve context."
	turns := []Turn{{From: "system", Value: HermesSystemPrompt(sampleTools) + notice}, {From: "human", Value: "q"},
		{From: "gpt", Value: "<think>\n</think>\nhi"}}
	msgs, tools, ok := checkInverse(t, turns)
	if !ok {
		t.Fatal("refused")
	}
	if len(tools) != len(sampleTools) || len(msgs) != 3 || msgs[0].Role != "system" || msgs[0].Content != notice {
		t.Fatalf("got %d tools and %+v", len(tools), msgs)
	}
	// A tail of the template inside the extra text: the first split that
	// parses wins, the rest is the extra text.
	turns[0].Value = HermesSystemPrompt(sampleTools) + systemPromptTail
	if _, _, ok := checkInverse(t, turns); !ok {
		t.Fatal("refused a second tail")
	}
	turns[0].Value = systemPromptHead + "[" + systemPromptTail + "x"
	if _, _, err := FromShareGPT(turns); !errors.Is(err, ErrNotInvertible) {
		t.Fatalf("a broken tool list: got %v", err)
	}
}
