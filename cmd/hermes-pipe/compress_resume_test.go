package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// `compress --out OUT --resume` needs no other flag: the inputs, endpoint,
// model, budget and sampling flags come from run.json, and a row added to
// the input is compressed with them. A flag that decides the records and
// differs from the run's is refused naming both values (exit 2, no request)
// unless --allow-change, which records the change.
func TestCompressResumeTakesTheRecordedOptions(t *testing.T) {
	fk := fakellm.New(fakellm.Config{SummaryWords: 40, KeepRequests: true})
	srv := httptest.NewServer(fk)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(trajLine("a", 12, 200)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	code, _, errs := hpc(t, "compress", "--in", in, "--out", out, "--target-tokens", "1500", "--summary-tokens", "60",
		"--base-url", srv.URL+"/v1", "--model", "sum-model", "--progress", "none", "--top-p", "0.5", "--extra-body", `{"top_k": 5}`)
	if code != 0 {
		t.Fatalf("first run: exit %d: %s", code, errs)
	}
	first := len(fk.Requests())
	if first == 0 {
		t.Fatal("no summary request")
	}

	// Nothing left: the recorded options are enough to find that out.
	if code, _, errs := hpc(t, "compress", "--out", out, "--resume", "--progress", "none"); code != 0 ||
		!strings.Contains(errs, "nothing to do") || len(fk.Requests()) != first {
		t.Fatalf("bare resume: exit %d, %d requests: %s", code, len(fk.Requests())-first, errs)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "other"}, "--model other differs from the run's sum-model (run.json); pass --allow-change to change it"},
		{[]string{"--target-tokens", "3000"}, "--target-tokens 3000 differs from the run's 1500 (run.json)"},
		{[]string{"--top-p", "0.9"}, "--top-p 0.9 differs from the run's 0.5 (run.json)"},
		{[]string{"--temperature", "0.9"}, "--temperature 0.9 differs from the run's default 0.3 (run.json records no --temperature)"},
		{[]string{"--tokenizer", "o200k_base"}, "--tokenizer o200k_base differs from the run's default cl100k_base"},
		{[]string{"--in", filepath.Join(dir, "other.jsonl")}, "--in " + filepath.Join(dir, "other.jsonl") + " differs from the run's " + in + " (run.json)"},
	} {
		code, _, errs := hpc(t, append([]string{"compress", "--out", out, "--resume", "--progress", "none"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, want 2 with %q: %s", tc.args, code, tc.want, errs)
		}
		if n := len(fk.Requests()) - first; n != 0 {
			t.Errorf("%v: %d requests after the refusal", tc.args, n)
		}
	}

	// A new input row is compressed with the recorded model, budget and
	// sampling flags.
	f, err := os.OpenFile(in, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(trajLine("b", 12, 200) + "\n")
	f.Close()
	code, _, errs = hpc(t, "compress", "--out", out, "--resume", "--progress", "none")
	if code != 0 || !strings.Contains(errs, "1 written") {
		t.Fatalf("resume with a new row: exit %d: %s", code, errs)
	}
	bodies := fk.Requests()[first:]
	if len(bodies) == 0 {
		t.Fatal("the new row made no summary request")
	}
	want := map[string]string{"temperature": "0.3", "top_p": "0.5", "max_tokens": "120", "top_k": "5"}
	for i, got := range requestFields(t, bodies) {
		if !sameFields(got, want) || !strings.Contains(bodies[i], `"model":"sum-model"`) {
			t.Errorf("request %d without the recorded options: %v\n%s", i, got, bodies[i])
		}
	}

	// --allow-change takes the new value and records the change.
	before := len(fk.Requests())
	f, _ = os.OpenFile(in, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(trajLine("c", 12, 200) + "\n")
	f.Close()
	code, _, errs = hpc(t, "compress", "--out", out, "--resume", "--progress", "none", "--model", "other", "--allow-change")
	if code != 0 {
		t.Fatalf("--allow-change: exit %d: %s", code, errs)
	}
	for _, b := range fk.Requests()[before:] {
		if !strings.Contains(b, `"model":"other"`) {
			t.Errorf("request not with the changed model: %s", b)
		}
	}
	opts := recordedOptions(t, out)
	var changes []map[string]any
	if err := json.Unmarshal(opts["changes"], &changes); err != nil || len(changes) != 1 ||
		changes[0]["flag"] != "model" || changes[0]["from"] != "sum-model" || changes[0]["to"] != "other" {
		t.Fatalf("run.json changes = %s (%v)", opts["changes"], err)
	}
	if !sameJSON(opts["in"], []byte(`["`+in+`"]`)) || string(opts["target-tokens"]) != "1500" {
		t.Errorf("run.json after the resumes: in %s, target-tokens %s", opts["in"], opts["target-tokens"])
	}
}
