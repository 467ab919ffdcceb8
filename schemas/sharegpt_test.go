package schemas

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas/pyjson"
	"github.com/hermes-pipe/hermes-pipe/schemas/pyjson/pyjsontest"
)

// updateGolden rewrites golden files: go test ./schemas -update. Other test
// files of this package reuse this flag rather than declaring their own.
var updateGolden = func() *bool {
	if f := flag.Lookup("update"); f != nil {
		if g, ok := f.Value.(flag.Getter); ok {
			if b, ok := g.Get().(bool); ok {
				v := b
				return &v
			}
		}
	}
	return flag.Bool("update", false, "rewrite golden files under testdata")
}()

// goldenInputs lists the ShareGPT golden inputs.
func goldenInputs(t *testing.T) []string {
	t.Helper()
	all, err := filepath.Glob(filepath.Join("testdata", "sharegpt", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var in []string
	for _, p := range all {
		if !strings.HasSuffix(p, ".golden.json") {
			in = append(in, p)
		}
	}
	if len(in) < 12 {
		t.Fatalf("found %d golden inputs, want at least 12", len(in))
	}
	return in
}

// appendTurns renders turns as json.dumps renders a list of
// {"from", "value"} dicts.
func appendTurns(b []byte, turns []Turn, sep string) []byte {
	b = append(b, '[')
	multiline := sep != ", "
	if multiline {
		b = append(b, '\n')
	}
	for i, tr := range turns {
		if i > 0 {
			b = append(b, sep...)
		}
		b = append(b, `{"from": `...)
		b = pyjson.AppendString(b, tr.From)
		b = append(b, `, "value": `...)
		b = AppendTurnValue(b, &turns[i])
		b = append(b, '}')
	}
	if multiline {
		b = append(b, '\n')
	}
	return append(b, ']')
}

func convertFile(t *testing.T, path string, opts ConvertOptions) []Turn {
	t.Helper()
	line, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	turns, err := ConvertOpenAILineWith(line, opts)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return turns
}

func TestShareGPTGolden(t *testing.T) {
	for _, in := range goldenInputs(t) {
		t.Run(filepath.Base(in), func(t *testing.T) {
			got := appendTurns(nil, convertFile(t, in, ConvertOptions{}), ",\n")
			got = append(got, '\n')
			golden := strings.TrimSuffix(in, ".json") + ".golden.json"
			if *updateGolden {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./schemas -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs from %s:\n%s", golden, firstDiff(got, want))
			}
		})
	}
}

// TestShareGPTMatchesPython runs the Python reference model of Hermes'
// conversion on every golden input and requires byte-identical output, as
// Hermes writes it and with --flatten-content.
func TestShareGPTMatchesPython(t *testing.T) {
	py := pyjsontest.Python(t)
	inputs := goldenInputs(t)
	for _, flatten := range []bool{false, true} {
		args := []string{filepath.Join("testdata", "hermes_ref.py"), "convert"}
		if flatten {
			args = append(args, "--flatten")
		}
		cmd := exec.Command(py, append(args, inputs...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("hermes_ref.py: %v\n%s", err, stderr.String())
		}
		lines := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
		if len(lines) != len(inputs) {
			t.Fatalf("python wrote %d lines for %d inputs", len(lines), len(inputs))
		}
		for i, in := range inputs {
			var b []byte
			b = append(b, `{"file": `...)
			b = pyjson.AppendString(b, filepath.Base(in))
			b = append(b, `, "conversations": `...)
			b = appendTurns(b, convertFile(t, in, ConvertOptions{FlattenContent: flatten}), ", ")
			b = append(b, '}')
			if !bytes.Equal(b, lines[i]) {
				t.Errorf("%s (flatten %v): Go and Python differ:\n%s", in, flatten, firstDiff(b, lines[i]))
			}
		}
	}
}

func firstDiff(got, want []byte) string {
	n := 0
	for n < len(got) && n < len(want) && got[n] == want[n] {
		n++
	}
	lo := max(n-80, 0)
	return "at byte " + itoa(n) + "\n got: " + string(got[lo:min(n+80, len(got))]) + "\nwant: " + string(want[lo:min(n+80, len(want))])
}

func TestHermesSystemPrompt(t *testing.T) {
	p := HermesSystemPrompt(nil)
	if !strings.Contains(p, "<tools>\n[]\n</tools>\n") {
		t.Errorf("empty tool list not rendered as []: %q", p)
	}
	tools := []Tool{{Type: "function", Function: FunctionSpec{
		Name: "t", Description: "d <x> & é", Parameters: []byte(`{"b":1,"a":[1.50,2e3]}`),
	}}}
	want := `<tools>` + "\n" + `[{"name": "t", "description": "d <x> & é", "parameters": {"b": 1, "a": [1.5, 2000.0]}, "required": null}]` + "\n</tools>"
	if p := HermesSystemPrompt(tools); !strings.Contains(p, want) {
		t.Errorf("tool list not rendered as Hermes does:\n%s", p)
	}
	tools[0].Function.Parameters = []byte(`{bad`)
	if p := HermesSystemPrompt(tools); !strings.Contains(p, `"parameters": {}, "required": null`) {
		t.Errorf("invalid parameters not rendered as {}: %s", p)
	}
}

func TestToShareGPTShapes(t *testing.T) {
	msgs := []Message{
		{Role: "system", Content: "ignored"},
		{Role: "user", Content: "q\xff"},
		{Role: "assistant", Reasoning: "r", ToolCalls: []ToolCall{{ID: "1", Function: FunctionCall{Name: "f", Arguments: `{"a":1}`}}}},
		{Role: "tool", ToolCallID: "1", Content: `{"ok": true}`},
		{Role: "tool", ToolCallID: "2", Content: "x"},
		{Role: "assistant", Content: "bye"},
	}
	got := ToShareGPT(msgs, nil)
	want := []Turn{
		{From: "system", Value: HermesSystemPrompt(nil)},
		{From: "human", Value: "q\uFFFD"},
		{From: "gpt", Value: "<think>\nr\n</think>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>"},
		{From: "tool", Value: "<tool_response>\n{\"tool_call_id\": \"1\", \"name\": \"f\", \"content\": {\"ok\": true}}\n</tool_response>\n" +
			"<tool_response>\n{\"tool_call_id\": \"2\", \"name\": \"unknown\", \"content\": \"x\"}\n</tool_response>"},
		{From: "gpt", Value: "<think>\n</think>\nbye"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d turns, want %d: %q", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("turn %d:\n got %q\nwant %q", i, got[i], want[i])
		}
	}
	if got := ToShareGPT([]Message{{Role: "system", Content: "s"}}, nil); len(got) != 1 || got[0].From != "system" {
		t.Errorf("only system messages: got %q", got)
	}
}

func TestScratchpadAsThink(t *testing.T) {
	cases := map[string]string{
		"":                            "",
		"plain":                       "plain",
		"a </REASONING_SCRATCHPAD> b": "a </REASONING_SCRATCHPAD> b",
		"<REASONING_SCRATCHPAD>x":     "<think>x",
		"<REASONING_SCRATCHPAD>x</REASONING_SCRATCHPAD>y</REASONING_SCRATCHPAD>": "<think>x</think>y</think>",
		"REASONING_SCRATCHPAD><REASONING_SCRATCHPAD>":                            "REASONING_SCRATCHPAD><think>",
		"<</REASONING_SCRATCHPAD><REASONING_SCRATCHPAD>/REASONING_SCRATCHPAD>":   "<</think><think>/REASONING_SCRATCHPAD>",
	}
	for in, want := range cases {
		if got := string(appendScratchpadAsThink(nil, in)); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

func TestConvertOpenAILineErrors(t *testing.T) {
	cases := []struct{ line, field string }{
		{`[]`, ""},
		{`{"messages": [}`, ""},
		{`{}`, "messages"},
		{`{"messages": {}}`, "messages"},
		{`{"messages": []}`, "messages"},
		{`{"messages": [{"role": "assistant", "content": "x"}]}`, "messages[0].role"},
		{`{"messages": [{"role": "system", "content": "x"}]}`, "messages"},
		{`{"messages": [{"role": "user", "content": 5}]}`, "messages[0].content"},
		{`{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "audio"}]}]}`, "messages[1].content[0].type"},
		{`{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "text"}]}]}`, "messages[1].content[0].text"},
		{`{"messages": [{"role": "user", "content": {"type": "text"}}]}`, "messages[0].content"},
		{`{"messages": [{"role": "user", "content": "q"}, {"role": "tool", "content": {"_multimodal": true, "content": [], "text_summary": 5}}]}`, "messages[1].content.text_summary"},
		{`{"messages": [{"role": "robot"}]}`, "messages[0].role"},
		{`{"messages": [{"content": "x"}]}`, "messages[0].role"},
		{`{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "reasoning": 1}]}`, "messages[1].reasoning"},
		{`{"messages": [{"role": "user", "content": "q"}, {"role": "user"}, {"role": "user"}, {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 5}}]}]}`, "messages[3].tool_calls[0].function.arguments"},
		{`{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]}`, "messages[1].tool_calls[0].function.name"},
		{`{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [null]}]}`, "messages[1].tool_calls[0]"},
		{`{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": {}}]}`, "messages[1].tool_calls"},
		{`{"messages": [{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": 3}]}`, "messages[1].tool_call_id"},
		{`{"messages": [{"role": "user", "content": "q"}], "tools": [{"function": {}}]}`, "tools[0].function.name"},
		{`{"messages": [{"role": "user", "content": "q"}], "tools": [{"type": "function"}]}`, "tools[0].function"},
		{`{"messages": [{"role": "user", "content": "q"}], "tools": {}}`, "tools"},
	}
	for _, c := range cases {
		_, err := ConvertOpenAILine([]byte(c.line))
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%s: got %v, want a *FieldError", c.line, err)
			continue
		}
		if fe.Field != c.field {
			t.Errorf("%s: field %q (%v), want %q", c.line, fe.Field, err, c.field)
		}
	}
	if _, err := ConvertOpenAILine([]byte(`{"messages": [{"role": "user", "content": null}], "tools": null}`)); err != nil {
		t.Errorf("null content and tools rejected: %v", err)
	}
}

func BenchmarkToShareGPT(b *testing.B) {
	line, err := os.ReadFile(filepath.Join("testdata", "sharegpt", "01_reasoning.json"))
	if err != nil {
		b.Fatal(err)
	}
	msgs, tools, err := ParseOpenAILine(line)
	if err != nil {
		b.Fatal(err)
	}
	// A longer rollout: the same exchange repeated ten times.
	long := append([]Message(nil), msgs[0])
	for range 10 {
		long = append(long, msgs[1:]...)
	}
	system := HermesSystemPrompt(tools)
	b.ReportAllocs()
	for b.Loop() {
		_ = ToShareGPTWithSystem(system, long)
	}
}

// A part Hermes does not know is kept as it is in a human turn, and refused
// when content is flattened (it has no text).
func TestContentPartsKeptOrFlattened(t *testing.T) {
	line := []byte(`{"messages": [{"role": "user", "content": [{"type": "text", "text": "hear this"}, {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}, {"type": "image_url", "image_url": {"url": "x"}}]}]}`)
	turns, err := ConvertOpenAILine(line)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"type": "text", "text": "hear this"}, {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}, {"type": "text", "text": "[screenshot]"}]`
	if got := string(AppendTurnValue(nil, &turns[1])); got != want {
		t.Errorf("human turn = %s\nwant %s", got, want)
	}
	_, err = ConvertOpenAILineWith(line, ConvertOptions{FlattenContent: true})
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "messages[0].content[1].type" {
		t.Errorf("flattened: got %v, want an error naming messages[0].content[1].type", err)
	}
	line = []byte(`{"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image", "source": {}}]}]}`)
	if turns, err = ConvertOpenAILineWith(line, ConvertOptions{FlattenContent: true}); err != nil {
		t.Fatal(err)
	}
	if got := string(AppendTurnValue(nil, &turns[1])); got != `"a\n[screenshot]"` {
		t.Errorf("flattened human turn = %s", got)
	}
}
