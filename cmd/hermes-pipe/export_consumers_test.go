package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// The tests of this file read what `hermes-pipe export` writes the way its
// consumers do: scripts/export-check.mjs reads the folder with DuckDB (Parquet)
// or line by line (JSONL), checks columns, types and the dataset card, and
// renders every row through the real chat templates of testdata/templates
// with @huggingface/jinja; and the messages of every completed row, converted
// back by `hermes-pipe sharegpt`, must give the record's own conversation.

// echoLoopScript calls a tool more times than a rollout may take turns, so its
// rows end max_turns; each step reasons and calls one tool.
const echoLoopScript = `[{"name": "loop", "match": "^Keep echoing", "steps": [
 {"reasoning": "step {{step}}: echo again", "tool_calls": [{"name": "terminal", "arguments": {"command": "echo loop {{step}}"}}]},
 {"reasoning": "step {{step}}: echo again", "tool_calls": [{"name": "terminal", "arguments": {"command": "echo loop {{step}}"}}]},
 {"reasoning": "step {{step}}: echo again", "tool_calls": [{"name": "terminal", "arguments": {"command": "echo loop {{step}}"}}]},
 {"reasoning": "step {{step}}: echo again", "tool_calls": [{"name": "terminal", "arguments": {"command": "echo loop {{step}}"}}]},
 {"reasoning": "step {{step}}: echo again", "tool_calls": [{"name": "terminal", "arguments": {"command": "echo loop {{step}}"}}]},
 {"content": "never reached"}]}]`

// consumersFolder runs generate over the demo prompts (tool calls, several
// calls in one turn, reasoning beside tool calls, a malformed call, unicode,
// a timed-out command) plus a looping prompt that ends max_turns, two
// samples each, and returns the folder and its records. It checks the
// folder holds what the tests rely on, so they cannot pass vacuously.
func consumersFolder(t *testing.T) (string, []map[string]any) {
	t.Helper()
	scripts, err := fakellm.LoadScripts(filepath.Join("..", "..", "datasets", "demo", "fakellm-scripts.json"))
	if err != nil {
		t.Fatal(err)
	}
	loop, err := fakellm.ParseScripts([]byte(echoLoopScript))
	if err != nil {
		t.Fatal(err)
	}
	url := startFake(t, fakellm.Config{Scripts: append(scripts, loop...)}, "")
	demo, err := os.ReadFile(filepath.Join("..", "..", "datasets", "demo", "prompts.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	prompts := writePrompts(t, strings.TrimRight(string(demo), "\n"), `{"id": "loop", "prompt": "Keep echoing until told to stop."}`)
	out := filepath.Join(t.TempDir(), "gen")
	args := []string{"generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "demo-model",
		"--workers", "4", "--progress", "none", "--samples", "2", "--max-turns", "4",
		"--logprobs", "--logprob-token-ids"} // records with logprobs, for export --logprobs
	if code, _, _ := hp(t, "sandbox", "check"); code != 0 {
		args = append(args, "--local-isolation", "none")
	}
	if code, _, errs := hp(t, args...); code != exitOK && code != exitRowsFailed {
		t.Fatalf("generate exit %d: %s", code, errs)
	}
	recs := catRecords(t, out)
	outcomes := map[string]int{}
	var calls, reasoning, malformed, logprobs bool
	for _, r := range recs {
		outcomes[fmt.Sprint(r["outcome"])]++
		logprobs = logprobs || r["logprobs"] != nil
		turns, _ := r["conversations"].([]any)
		for _, turn := range turns {
			v, _ := turn.(map[string]any)["value"].(string)
			calls = calls || strings.Contains(v, "<tool_call>")
			reasoning = reasoning || strings.Contains(v, "<think>\n") && !strings.Contains(v, "<think>\n</think>")
			malformed = malformed || strings.Contains(v, "invalid arguments for terminal")
		}
	}
	if outcomes["completed"] == 0 || outcomes["max_turns"] == 0 || !calls || !reasoning || !malformed || !logprobs {
		t.Fatalf("the folder lacks a case: outcomes %v, tool calls %v, reasoning %v, malformed call %v, logprobs %v", outcomes, calls, reasoning, malformed, logprobs)
	}
	return out, recs
}

// exportCheck is the JSON summary scripts/export-check.mjs prints.
type exportCheck struct {
	Files     map[string]int `json:"files"`
	Rows      int            `json:"rows"`
	Format    string         `json:"format"`
	Templates map[string]struct {
		Rendered         int  `json:"rendered"`
		Refused          int  `json:"refused"`
		FailAsRead       int  `json:"fail_as_read"`
		RendersReasoning bool `json:"renders_reasoning"`
	} `json:"templates"`
	Rendered            int            `json:"rendered"`
	UnparsableArguments int            `json:"unparsable_arguments"`
	Splits              map[string]int `json:"splits"`
	Problems            []string       `json:"problems"`
}

// exportChecker returns a function running scripts/export-check.mjs on a
// folder (with extra arguments before it). It skips when node or the
// packages are absent; under CI (CI set) either one missing fails the test.
func exportChecker(t *testing.T) func(t *testing.T, dir string, extra ...string) (exportCheck, error) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node is not installed; CI requires the export consumers check (apt-get install nodejs npm): %v", err)
		}
		t.Skip("node not installed")
	}
	scripts, err := filepath.Abs(filepath.Join("..", "..", "scripts"))
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"@duckdb/node-api", "@huggingface/jinja", "yaml"} {
		if _, err := os.Stat(filepath.Join(scripts, "node_modules", pkg, "package.json")); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed (run npm ci --prefix scripts): %v", pkg, err)
			}
			t.Skipf("%s not installed: npm ci --prefix scripts", pkg)
		}
	}
	return func(t *testing.T, dir string, extra ...string) (exportCheck, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		args := append([]string{filepath.Join(scripts, "export-check.mjs")}, extra...)
		cmd := exec.CommandContext(ctx, node, append(args, dir)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.Output()
		var res exportCheck
		if jerr := json.Unmarshal(stdout, &res); jerr != nil {
			t.Fatalf("export-check %s: %v; output %q: %v\n%s", dir, err, stdout, jerr, stderr.String())
		}
		return res, err
	}
}

func exportTo(t *testing.T, src, dir string, args ...string) {
	t.Helper()
	if code, _, errs := hp(t, append([]string{"export", src, "--to", dir}, args...)...); code != exitOK {
		t.Fatalf("export %v: exit %d: %s", args, code, errs)
	}
}

// TestExportConsumers exports one generate folder in every form and reads
// each export with scripts/export-check.mjs: no problem, every record
// exported, every messages row rendered (or refused by the template's own
// rule, as Llama 3.1 refuses two calls in one turn) by every template, the
// reasoning rendered by the template that renders it. Then it breaks an
// export three ways and the check must name the file, row and what is wrong.
func TestExportConsumers(t *testing.T) {
	check := exportChecker(t)
	src, recs := consumersFolder(t)
	cases := []struct {
		name, ext, format string
		args              []string
		splits            []string
	}{
		{"parquet", ".parquet", "messages", nil, []string{"train"}},
		{"jsonl", ".jsonl", "messages", []string{"--file-format", "jsonl"}, []string{"train"}},
		{"split", ".parquet", "messages", []string{"--split", "train=0.7,validation=0.3", "--seed", "1", "--shard-rows", "4"}, []string{"train", "validation"}},
		{"object-arguments", ".jsonl", "messages", []string{"--file-format", "jsonl", "--arguments", "object"}, []string{"train"}},
		{"sharegpt", ".jsonl", "sharegpt", []string{"--format", "sharegpt", "--file-format", "jsonl"}, []string{"train"}},
		{"sharegpt-parquet", ".parquet", "sharegpt", []string{"--format", "sharegpt"}, []string{"train"}},
		{"logprobs", ".parquet", "messages", []string{"--logprobs"}, []string{"train"}},
		{"logprobs-sharegpt", ".jsonl", "sharegpt", []string{"--logprobs", "--format", "sharegpt", "--file-format", "jsonl"}, []string{"train"}},
	}
	dirs := map[string]string{}
	root := t.TempDir() // the exports outlive their subtests: the checks below break copies of them
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(root, c.name)
			dirs[c.name] = dir
			exportTo(t, src, dir, c.args...)
			res, err := check(t, dir)
			if err != nil || len(res.Problems) > 0 {
				t.Fatalf("export-check: %v: problems:\n%s", err, strings.Join(res.Problems, "\n"))
			}
			if res.Rows != len(recs) || res.Format != c.format {
				t.Errorf("%d %s rows, want the folder's %d records as %s", res.Rows, res.Format, len(recs), c.format)
			}
			var splits []string
			for s, n := range res.Splits {
				if n == 0 {
					t.Errorf("split %s has no row", s)
				}
				splits = append(splits, s)
			}
			sort.Strings(splits)
			if !reflect.DeepEqual(splits, c.splits) {
				t.Errorf("splits %v, want %v", splits, c.splits)
			}
			for f := range res.Files {
				if !strings.HasSuffix(f, c.ext) {
					t.Errorf("data file %s, want %s", f, c.ext)
				}
			}
			if c.name == "split" && len(res.Files) < 4 {
				t.Errorf("--shard-rows 4 over %d rows wrote only %v", len(recs), res.Files)
			}
			if c.format != "messages" {
				return
			}
			if len(res.Templates) < 3 || res.Rendered != res.Rows {
				t.Fatalf("%d of %d rows rendered by some template; templates %v", res.Rendered, res.Rows, res.Templates)
			}
			reasoning := false
			for name, s := range res.Templates {
				if s.Rendered == 0 || s.Rendered+s.Refused != res.Rows {
					t.Errorf("template %s: %d rendered, %d refused of %d rows", name, s.Rendered, s.Refused, res.Rows)
				}
				reasoning = reasoning || s.RendersReasoning
			}
			if !reasoning {
				t.Errorf("no template rendered reasoning: %v", res.Templates)
			}
			t.Logf("%s: %d rows, unparsable arguments %d, templates %+v", c.name, res.Rows, res.UnparsableArguments, res.Templates)
		})
	}
	if t.Failed() {
		return
	}
	// The check must be able to fail. A template that drops tool results:
	// every row with one is named with the result it lost.
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "drops-tools.jinja"), []byte("{% for m in messages %}{% if m.role != 'tool' %}{{ m.content }}{% endif %}{% endfor %}"), 0o644)
	res, err := check(t, dirs["parquet"], "--templates", bad)
	if all := strings.Join(res.Problems, "\n"); err == nil || len(res.Problems) == 0 || !strings.Contains(res.Problems[0], ".parquet row ") || !strings.Contains(all, "tool result missing") {
		t.Errorf("a template losing tool results passed: %v %q", err, res.Problems)
	}
	// A data file no config of the card names.
	moved := copyTree(t, dirs["jsonl"])
	names, _ := filepath.Glob(filepath.Join(moved, "data", "*.jsonl"))
	if len(names) == 0 {
		t.Fatal("no JSONL data file")
	}
	os.Rename(names[0], filepath.Join(moved, "data", "stray-00000-of-00001.jsonl"))
	if res, err := check(t, moved); err == nil || !strings.Contains(strings.Join(res.Problems, "\n"), "README.md") {
		t.Errorf("a data file outside the card's configs passed: %v %q", err, res.Problems)
	}
	// A tool turn that answers no call, in the first row that has one.
	broken := copyTree(t, dirs["jsonl"])
	names, _ = filepath.Glob(filepath.Join(broken, "data", "*.jsonl"))
	data, _ := os.ReadFile(names[0])
	lines := strings.SplitAfter(string(data), "\n")
	row := -1
	for i, line := range lines {
		var r struct {
			Messages []map[string]any `json:"messages"`
		}
		if json.Unmarshal([]byte(line), &r) != nil {
			continue
		}
		for _, m := range r.Messages {
			if m["role"] == "tool" {
				m["tool_call_id"] = "no-such-call"
				var all map[string]any
				json.Unmarshal([]byte(line), &all)
				all["messages"] = r.Messages
				b, _ := json.Marshal(all)
				lines[i] = string(b) + "\n"
				row = i
				break
			}
		}
		if row >= 0 {
			break
		}
	}
	if row < 0 {
		t.Fatalf("%s has no tool turn", names[0])
	}
	os.WriteFile(names[0], []byte(strings.Join(lines, "")), 0o644)
	want := fmt.Sprintf("%s row %d", filepath.ToSlash(filepath.Join("data", filepath.Base(names[0]))), row)
	if res, err := check(t, broken); err == nil || !strings.Contains(strings.Join(res.Problems, "\n"), want) || !strings.Contains(strings.Join(res.Problems, "\n"), "no-such-call") {
		t.Errorf("a tool turn answering no call passed, or was not named %q: %v %q", want, err, res.Problems)
	}
}

// TestExportSharegptRoundTrip exports the completed rows as messages and
// converts each row's {messages, tools} with `hermes-pipe sharegpt`: after
// the system turn (built from the tools, whose parameters the export holds
// as JSON text) the conversation must be the record's own, turn for turn.
func TestExportSharegptRoundTrip(t *testing.T) {
	src, recs := consumersFolder(t)
	want := map[string][]any{}
	for _, r := range recs {
		if r["outcome"] != "completed" {
			continue
		}
		conv, _ := r["conversations"].([]any)
		if len(conv) < 2 || conv[0].(map[string]any)["from"] != "system" {
			t.Fatalf("record %v: conversation does not start with a system turn: %.300v", r["key"], conv)
		}
		want[fmt.Sprint(r["key"])] = conv[1:]
	}
	dir := filepath.Join(t.TempDir(), "completed")
	exportTo(t, src, dir, "--where", "outcome=completed", "--format", "messages", "--file-format", "jsonl")
	files, _ := filepath.Glob(filepath.Join(dir, "data", "*.jsonl"))
	sort.Strings(files)
	var in bytes.Buffer
	var keys []string
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var row struct {
				Key      string          `json:"key"`
				Outcome  string          `json:"outcome"`
				Messages json.RawMessage `json:"messages"`
				Tools    json.RawMessage `json:"tools"`
			}
			if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if row.Outcome != "completed" {
				t.Errorf("%s: row %s has outcome %q under --where outcome=completed", f, row.Key, row.Outcome)
			}
			keys = append(keys, row.Key)
			fmt.Fprintf(&in, `{"messages": %s, "tools": %s}`+"\n", row.Messages, row.Tools)
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if len(keys) != len(want) {
		t.Fatalf("%d rows exported, %d records completed", len(keys), len(want))
	}
	inFile := filepath.Join(t.TempDir(), "messages.jsonl")
	if err := os.WriteFile(inFile, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := hp(t, "sharegpt", inFile)
	if code != exitOK {
		t.Fatalf("sharegpt exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(keys) {
		t.Fatalf("sharegpt wrote %d lines for %d rows", len(lines), len(keys))
	}
	seen := map[string]bool{}
	for i, line := range lines {
		key := keys[i]
		if seen[key] {
			t.Errorf("row %s exported twice", key)
		}
		seen[key] = true
		var got struct {
			Conversations []any `json:"conversations"`
		}
		if err := json.Unmarshal([]byte(line), &got); err != nil || len(got.Conversations) == 0 {
			t.Fatalf("sharegpt line %d (%s): %v: %.300s", i+1, key, err, line)
		}
		w, ok := want[key]
		if !ok {
			t.Errorf("row %s is no completed record", key)
			continue
		}
		g := got.Conversations[1:]
		if len(g) != len(w) {
			t.Errorf("row %s: %d turns after the system turn, the record has %d", key, len(g), len(w))
			continue
		}
		for j := range w {
			if !reflect.DeepEqual(g[j], w[j]) {
				t.Errorf("row %s turn %d:\n got  %.400v\n want %.400v", key, j+1, g[j], w[j])
			}
		}
	}
}

// copyTree copies a folder of plain files (an export) to a new temporary
// folder and returns it.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}
