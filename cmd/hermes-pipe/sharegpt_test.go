package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/schemas/pyjson/pyjsontest"
)

func TestShareGPTCommandConvertsAndReportsBadLines(t *testing.T) {
	in := strings.Join([]string{
		`{"messages": [{"role": "user", "content": "hi <b>"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{\"command\": \"ls\"}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "{\"output\": \"a\"}"}, {"role": "assistant", "content": "done", "reasoning_content": "checked"}], "tools": [{"type": "function", "function": {"name": "terminal", "description": "run", "parameters": {"type": "object"}}}]}`,
		``,
		`{"messages": "nope"}`,
	}, "\n")
	var out, errb strings.Builder
	err := convertShareGPT("logs.jsonl", strings.NewReader(in), &out, &errb, schemas.ConvertOptions{})
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

// The command's lines equal the Python reference model of Hermes' converter
// on transcripts with Hermes' multimodal tool results and content lists, as
// Hermes writes them and with --flatten-content.
func TestShareGPTCommandMatchesPythonOnMultimodal(t *testing.T) {
	py := pyjsontest.Python(t)
	dir := filepath.Join("..", "..", "schemas", "testdata")
	fixtures := []string{"16_multimodal_results.json", "17_list_content_only.json", "12_content_parts.json"}
	for _, flatten := range []bool{false, true} {
		var in bytes.Buffer
		args := []string{filepath.Join(dir, "hermes_ref.py"), "convert"}
		if flatten {
			args = append(args, "--flatten")
		}
		for _, f := range fixtures {
			p := filepath.Join(dir, "sharegpt", f)
			raw, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, raw); err != nil {
				t.Fatal(err)
			}
			in.Write(compact.Bytes())
			in.WriteByte('\n')
			args = append(args, p)
		}
		ref, err := exec.Command(py, args...).Output()
		if err != nil {
			t.Fatalf("hermes_ref.py: %v", err)
		}
		var out, errb strings.Builder
		if err := convertShareGPT("-", &in, &out, &errb, schemas.ConvertOptions{FlattenContent: flatten}); err != nil {
			t.Fatalf("flatten %v: %v\n%s", flatten, err, errb.String())
		}
		got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		want := strings.Split(strings.TrimSuffix(string(ref), "\n"), "\n")
		if len(got) != len(fixtures) || len(want) != len(fixtures) {
			t.Fatalf("flatten %v: %d lines, python %d, want %d", flatten, len(got), len(want), len(fixtures))
		}
		for i, f := range fixtures {
			// Python's line is {"file": NAME, "conversations": [...]}.
			w := `{` + want[i][strings.Index(want[i], `"conversations": `):]
			if got[i] != w {
				t.Errorf("%s (flatten %v): command and Hermes differ\n got: %.300s\nwant: %.300s", f, flatten, got[i], w)
			}
		}
		if !flatten && !strings.Contains(got[0], `"value": [{"type": "text", "text": "Open the settings & check <dark mode>"}, {"type": "text", "text": "[screenshot]"}]`) {
			t.Errorf("list content not written as Hermes writes it: %.400s", got[0])
		}
	}
}

// TestShareGPTCommandDropsSystemAndRefusesFolder: as its --help says, the
// input's own system message is dropped (the system turn is Hermes'
// template); a folder given as FILE is a usage error naming it, not a read
// error.
func TestShareGPTCommandDropsSystemAndRefusesFolder(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "logs.jsonl")
	line := `{"messages": [{"role": "system", "content": "SECRET HOUSE STYLE"}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}` + "\n"
	if err := os.WriteFile(in, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"hermes-pipe", "sharegpt", in}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if strings.Contains(out.String(), "SECRET HOUSE STYLE") || !strings.Contains(out.String(), `"from": "system", "value": "You are a function calling AI model.`) {
		t.Errorf("the input's system message was kept or the template is missing: %s", out.String())
	}
	var help bytes.Buffer
	run([]string{"hermes-pipe", "sharegpt", "--help"}, &help, &errb)
	if !strings.Contains(help.String(), "system messages are dropped") {
		t.Errorf("--help does not say the system message is dropped:\n%s", help.String())
	}
	out.Reset()
	errb.Reset()
	code := run([]string{"hermes-pipe", "sharegpt", dir}, &out, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), dir+" is a folder") || strings.Contains(errb.String(), "is a directory") {
		t.Errorf("sharegpt DIR: exit %d, stderr %q", code, errb.String())
	}
}
