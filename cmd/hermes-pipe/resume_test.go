package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// recordedOptions reads the options of dir's run.json.
func recordedOptions(t *testing.T, dir string) map[string]json.RawMessage {
	t.Helper()
	man, ok, err := outdir.ReadManifest(dir)
	if err != nil || !ok {
		t.Fatalf("run.json of %s: ok %v, %v", dir, ok, err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(man.Options, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// `generate --out OUT --resume` needs no other flag: the prompts file, the
// endpoint, the model, the sampling flags and the samples come from run.json,
// and a row added to the prompts file is run with them. The API key is not
// in run.json and still comes from the environment.
func TestResumeTakesTheRecordedOptions(t *testing.T) {
	fk := fakellm.New(fakellm.Config{KeepRequests: true, Scripts: mustScripts(t, echoScript)})
	srv := httptest.NewServer(fk)
	t.Cleanup(srv.Close)
	t.Setenv("RESUME_TEST_KEY", "sk-resume-secret")
	prompts := writePrompts(t, `{"prompt": "echo one"}`)
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", srv.URL+"/v1", "--model", "demo-model",
		"--api-key-env", "RESUME_TEST_KEY", "--progress", "none", "--samples", "2", "--temperature", "0.3", "--max-tokens", "99",
		"--extra-body", `{"top_k": 5}`, "--toolsets", "terminal", "--workers", "3", "--timeout", "5m")
	if code != 0 {
		t.Fatalf("first run: exit %d: %s", code, errs)
	}
	data, err := os.ReadFile(filepath.Join(out, outdir.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "sk-resume-secret") {
		t.Fatalf("run.json holds the API key:\n%s", data)
	}

	// Nothing left: the recorded options are enough to find that out.
	code, _, errs = hp(t, "generate", "--out", out, "--resume", "--progress", "none")
	if code != 0 || !strings.Contains(errs, "all 2 records") {
		t.Fatalf("bare resume: exit %d: %s", code, errs)
	}

	// A new row runs with the recorded model and sampling flags, twice.
	f, err := os.OpenFile(prompts, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"prompt": "echo two"}` + "\n")
	f.Close()
	before := len(fk.Requests())
	code, _, errs = hp(t, "generate", "--out", out, "--resume", "--progress", "none")
	if code != 0 || !strings.Contains(errs, "2 written") {
		t.Fatalf("resume with a new row: exit %d: %s", code, errs)
	}
	bodies := fk.Requests()[before:]
	if len(bodies) != 4 { // 2 samples × 2 model calls
		t.Fatalf("%d chat requests, want 4", len(bodies))
	}
	for _, b := range bodies {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(b), &m); err != nil {
			t.Fatal(err)
		}
		if string(m["model"]) != `"demo-model"` || string(m["temperature"]) != "0.3" || string(m["max_tokens"]) != "99" || string(m["top_k"]) != "5" {
			t.Errorf("request without the recorded options: %s", b)
		}
	}
	opts := recordedOptions(t, out)
	if string(opts["workers"]) != "3" || string(opts["model"]) != `"demo-model"` || string(opts["api-key-env"]) != `"RESUME_TEST_KEY"` {
		t.Errorf("run.json options after the resume: %v", opts)
	}
	if _, ok := opts["changes"]; ok {
		t.Errorf("changes recorded without a change: %s", opts["changes"])
	}
}

// An explicit flag that differs from the recorded run is refused (exit 2,
// both values named, nothing run) unless --allow-change, which records the
// change in run.json.
func TestResumeRefusesAChangedOption(t *testing.T) {
	fk := fakellm.New(fakellm.Config{KeepRequests: true, Scripts: mustScripts(t, echoScript)})
	srv := httptest.NewServer(fk)
	t.Cleanup(srv.Close)
	prompts := writePrompts(t, `{"prompt": "echo one"}`)
	out := filepath.Join(t.TempDir(), "out")
	if code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", srv.URL+"/v1", "--model", "demo-model",
		"--progress", "none", "--temperature", "0.3"); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, errs)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "other"}, "--model other differs from the run's demo-model (run.json); pass --allow-change to change it"},
		{[]string{"--temperature", "0.7"}, "--temperature 0.7 differs from the run's 0.3 (run.json)"},
		{[]string{"--samples", "3"}, "--samples 3 differs from the run's default 1 (run.json records no --samples)"},
		{[]string{"--toolsets", "file"}, "--toolsets file differs from the run's default (unset)"},
	} {
		before := len(fk.Requests())
		code, _, errs := hp(t, append([]string{"generate", "--out", out, "--resume", "--progress", "none"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, want 2 with %q: %s", tc.args, code, tc.want, errs)
		}
		if n := len(fk.Requests()) - before; n != 0 {
			t.Errorf("%v: %d chat requests after the refusal", tc.args, n)
		}
	}
	// The same value given again is no change.
	if code, _, errs := hp(t, "generate", "--out", out, "--resume", "--progress", "none", "--model", "demo-model", "--prompts", prompts); code != 0 {
		t.Fatalf("same values: exit %d: %s", code, errs)
	}

	f, err := os.OpenFile(prompts, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"prompt": "echo two"}` + "\n")
	f.Close()
	before := len(fk.Requests())
	code, _, errs := hp(t, "generate", "--out", out, "--resume", "--progress", "none", "--model", "other", "--allow-change")
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
		changes[0]["flag"] != "model" || changes[0]["from"] != "demo-model" || changes[0]["to"] != "other" {
		t.Fatalf("run.json changes = %s (%v)", opts["changes"], err)
	}
	if string(opts["model"]) != `"other"` {
		t.Errorf("run.json model = %s", opts["model"])
	}
	// The changed value is now the run's: a bare resume keeps it, and the
	// history of changes stays.
	if code, _, errs := hp(t, "generate", "--out", out, "--resume", "--progress", "none"); code != 0 {
		t.Fatalf("resume after the change: exit %d: %s", code, errs)
	}
	if opts := recordedOptions(t, out); string(opts["model"]) != `"other"` || !strings.Contains(string(opts["changes"]), `"other"`) {
		t.Errorf("after a bare resume: model %s, changes %s", opts["model"], opts["changes"])
	}
}
