package main

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// samplingKeys are the request fields the sampling flags may send.
var samplingKeys = []string{"temperature", "top_p", "max_tokens", "seed", "top_k", "min_p", "repetition_penalty", "chat_template_kwargs"}

// requestFields decodes each kept request body and returns its sampling
// fields, as JSON text.
func requestFields(t *testing.T, bodies []string) []map[string]string {
	t.Helper()
	var out []map[string]string
	for _, b := range bodies {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(b), &m); err != nil {
			t.Fatalf("request body %s: %v", b, err)
		}
		got := map[string]string{}
		for _, k := range samplingKeys {
			if v, ok := m[k]; ok {
				got[k] = string(v)
			}
		}
		out = append(out, got)
	}
	return out
}

// The sampling flags reach the endpoint in every chat request exactly as
// given, --extra-body merged in; unset, none of them is sent. run.json
// records them, --extra-body as an object.
func TestSamplingFlagsReachTheEndpoint(t *testing.T) {
	fk := fakellm.New(fakellm.Config{KeepRequests: true, Scripts: mustScripts(t, echoScript)})
	srv := httptest.NewServer(fk)
	t.Cleanup(srv.Close)
	prompts := writePrompts(t, `{"prompt": "echo one"}`)
	for _, tc := range []struct {
		name string
		args []string
		want map[string]string
	}{
		{"unset", nil, map[string]string{}},
		{"set", []string{"--temperature", "0.6", "--top-p", "0.95", "--max-tokens", "512", "--sampling-seed", "7",
			"--extra-body", `{"top_k": 20, "min_p": 0, "repetition_penalty": 1.05, "chat_template_kwargs": {"enable_thinking": false}}`},
			map[string]string{"temperature": "0.6", "top_p": "0.95", "max_tokens": "512", "seed": "7", "top_k": "20", "min_p": "0",
				"repetition_penalty": "1.05", "chat_template_kwargs": `{"enable_thinking":false}`}},
		{"temperature zero is sent", []string{"--temperature", "0"}, map[string]string{"temperature": "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(fk.Requests())
			out := filepath.Join(t.TempDir(), "out")
			args := append([]string{"generate", "--prompts", prompts, "--out", out, "--base-url", srv.URL + "/v1", "--model", "m", "--progress", "none"}, tc.args...)
			if code, _, errs := hp(t, args...); code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			reqs := requestFields(t, fk.Requests()[before:])
			if len(reqs) != 2 {
				t.Fatalf("%d chat requests, want 2 (tool call, answer)", len(reqs))
			}
			for i, got := range reqs {
				if !sameFields(got, tc.want) {
					t.Errorf("request %d sent %v, want %v", i, got, tc.want)
				}
			}
			man, err := os.ReadFile(filepath.Join(out, "run.json"))
			if err != nil {
				t.Fatal(err)
			}
			var m struct {
				Options map[string]json.RawMessage `json:"options"`
			}
			if err := json.Unmarshal(man, &m); err != nil {
				t.Fatal(err)
			}
			for flag, key := range map[string]string{"temperature": "temperature", "top-p": "top_p", "sampling-seed": "seed", "max-tokens": "max_tokens"} {
				if w, ok := tc.want[key]; ok && string(m.Options[flag]) != w {
					t.Errorf("run.json options[%s] = %s, want %s", flag, m.Options[flag], w)
				}
			}
			var eb bytes.Buffer
			_ = json.Compact(&eb, m.Options["extra-body"])
			if strings.Contains(strings.Join(tc.args, " "), "--extra-body") && eb.String() != `{"top_k":20,"min_p":0,"repetition_penalty":1.05,"chat_template_kwargs":{"enable_thinking":false}}` {
				t.Errorf("run.json options[extra-body] = %s, want the object", m.Options["extra-body"])
			}
		})
	}
}

func sameFields(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A bad sampling flag is a usage error naming the flag, found before any
// output folder is made.
func TestSamplingUsageErrors(t *testing.T) {
	prompts := writePrompts(t, `{"prompt": "x"}`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--extra-body", `{"top_k": 20`}, "--extra-body: not valid JSON"},
		{[]string{"--extra-body", `[1, 2]`}, "--extra-body: not a JSON object"},
		{[]string{"--extra-body", `"top_k"`}, "--extra-body: not a JSON object"},
		{[]string{"--extra-body", `null`}, "--extra-body: not a JSON object"},
		{[]string{"--extra-body", `{"a": 1} {"b": 2}`}, "--extra-body: more than one JSON value"},
		{[]string{"--extra-body", `{"messages": []}`}, `--extra-body: "messages" is written by hermes-pipe itself`},
		{[]string{"--extra-body", `{"seed": 1}`, "--sampling-seed", "2"}, `--extra-body: "seed" is also given by --sampling-seed`},
		{[]string{"--top-p", "1.5"}, "--top-p must be in (0, 1]"},
		{[]string{"--temperature", "-1"}, "--temperature must be a number >= 0"},
		{[]string{"--max-tokens", "-3"}, "--max-tokens must not be negative"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		args := append([]string{"generate", "--prompts", prompts, "--out", out, "--base-url", "http://127.0.0.1:1/v1", "--model", "m"}, tc.args...)
		code, _, errs := hp(t, args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errs, tc.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%v: the output folder was made (%v)", tc.args, err)
		}
	}
}

// swe sends the same sampling fields with every request of a task's agent.
func TestSamplingFlagsReachTheEndpointInSWE(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	script := `{"scripts": [{"name": "hello", "match": "^Create hello.py", "steps": [
 {"tool_calls": [{"name": "terminal", "arguments": {"command": "printf 'print(1)\\n' > hello.py"}}]},
 {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo MINI_SWE_AGENT_FINAL_OUTPUT; echo created hello.py"}}]}]}]}`
	fk := fakellm.New(fakellm.Config{KeepRequests: true, Scripts: mustScripts(t, script)})
	srv := httptest.NewServer(fk)
	t.Cleanup(srv.Close)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, errs := hpSWE(t, "swe", "--task", "Create hello.py that prints 1", "--out", out, "--base-url", srv.URL+"/v1", "--model", "fake",
		"--sandbox", "local", "--progress", "none", "--temperature", "1", "--top-p", "0.5", "--max-tokens", "100", "--sampling-seed", "3",
		"--extra-body", `{"min_p": 0.1}`)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, errs)
	}
	want := map[string]string{"temperature": "1", "top_p": "0.5", "max_tokens": "100", "seed": "3", "min_p": "0.1"}
	reqs := requestFields(t, fk.Requests())
	if len(reqs) != 2 {
		t.Fatalf("%d chat requests, want 2", len(reqs))
	}
	for i, got := range reqs {
		if !sameFields(got, want) {
			t.Errorf("request %d sent %v, want %v", i, got, want)
		}
	}
	// run.json records them as generate's does, and --resume holds the
	// run to them: a bare resume is enough, another value is refused.
	opts := recordedOptions(t, out)
	for flag, v := range map[string]string{"temperature": "1", "top-p": "0.5", "max-tokens": "100", "sampling-seed": "3", "extra-body": `{"min_p":0.1}`} {
		if !sameJSON(opts[flag], []byte(v)) {
			t.Errorf("run.json %s = %s, want %s", flag, opts[flag], v)
		}
	}
	if code, _, errs := hpSWE(t, "swe", "--out", out, "--resume", "--progress", "none", "--top-p", "0.9"); code != exitUsage ||
		!strings.Contains(errs, "--top-p 0.9 differs from the run's 0.5") {
		t.Errorf("resume --top-p 0.9: exit %d: %s", code, errs)
	}
	if code, stdout, errs := hpSWE(t, "swe", "--out", out, "--resume", "--progress", "none"); code != 0 || len(fk.Requests()) != 2 {
		t.Errorf("bare resume: exit %d, %d requests\n%s\n%s", code, len(fk.Requests()), stdout, errs)
	}
}

// compress's summary requests carry --top-p, --sampling-seed and
// --extra-body beside their own temperature and max_tokens.
func TestSamplingFlagsReachTheEndpointInCompress(t *testing.T) {
	fk := fakellm.New(fakellm.Config{SummaryWords: 40, KeepRequests: true})
	srv := httptest.NewServer(fk)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(trajLine("a", 12, 200)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := hpc(t, "compress", "--in", in, "--out", filepath.Join(dir, "out"), "--target-tokens", "1500", "--summary-tokens", "100",
		"--base-url", srv.URL+"/v1", "--model", "m", "--progress", "none", "--top-p", "0.5", "--sampling-seed", "9", "--extra-body", `{"top_k": 5}`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	reqs := requestFields(t, fk.Requests())
	if len(reqs) == 0 {
		t.Fatal("no summary request")
	}
	want := map[string]string{"temperature": "0.3", "top_p": "0.5", "max_tokens": "200", "seed": "9", "top_k": "5"}
	for i, got := range reqs {
		if !sameFields(got, want) {
			t.Errorf("summary request %d sent %v, want %v", i, got, want)
		}
	}
	if code, _, errs := hpc(t, "compress", "--in", in, "--out", filepath.Join(dir, "out2"), "--base-url", srv.URL+"/v1", "--model", "m",
		"--extra-body", `{"temperature": 1}`); code != exitUsage || !strings.Contains(errs, `compress sends "temperature" itself`) {
		t.Errorf("--extra-body temperature: exit %d: %s", code, errs)
	}
}
