package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// status works on any output folder: a run that was not sharded is its one
// shard, ".", with the prompts run.json recorded counted against it. A
// folder that is no output folder is a usage error.
func TestStatusOfAPlainRun(t *testing.T) {
	url := startFake(t, fakellm.Config{}, echoScript)
	prompts := writePrompts(t, `{"prompt": "echo one"}`, `{"prompt": "echo two"}`, `{"prompt": "echo three"}`)
	out := filepath.Join(t.TempDir(), "out")
	if code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none"); code != 0 {
		t.Fatalf("generate exit %d: %s", code, errs)
	}
	code, stdout, errs := hp(t, "status", out, "--json")
	if code != 0 {
		t.Fatalf("status exit %d: %s", code, errs)
	}
	var sts []map[string]any
	if err := json.Unmarshal([]byte(stdout), &sts); err != nil {
		t.Fatalf("status --json: %v\n%s", err, stdout)
	}
	if len(sts) != 1 || sts[0]["dir"] != "." || sts[0]["done"] != 3.0 || sts[0]["failed"] != 0.0 || sts[0]["remaining"] != 0.0 || sts[0]["started"] != true {
		t.Errorf("status of a plain run: %s", stdout)
	}
	code, stdout, errs = hp(t, "status", out)
	if code != 0 || !strings.Contains(stdout, ".") || !strings.Contains(stdout, "3") {
		t.Errorf("status table: exit %d\n%s%s", code, stdout, errs)
	}
	if code, _, errs := hp(t, "status", t.TempDir()); code != exitUsage || !strings.Contains(errs, "not an output folder") {
		t.Errorf("status of an empty folder: exit %d: %s", code, errs)
	}
}
