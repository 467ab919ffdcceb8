package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// needCeilings skips (fails in CI) when this machine cannot confine local
// commands with a memory and a disk ceiling.
func needCeilings(t *testing.T) confine.Report {
	t.Helper()
	r := confine.Probe(context.Background())
	hasMem := false
	for _, c := range r.Controllers {
		hasMem = hasMem || c == "memory"
	}
	if err := r.Usable(); err != nil || r.Disk != nil || !hasMem {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must hold the local ceilings: usable %v, disk %v, controllers %v", err, r.Disk, r.Controllers)
		}
		t.Skipf("no local ceilings here: usable %v, disk %v, controllers %v", err, r.Disk, r.Controllers)
	}
	return r
}

// TestSandboxCheckShowsCeilings: `sandbox check` prints the ceilings the
// defaults make for --workers, and those its flags give; a bad size is a
// usage error.
func TestSandboxCheckShowsCeilings(t *testing.T) {
	needCeilings(t)
	code, out, errs := hp(t, "sandbox", "check", "--workers", "4")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"per-session ceilings for --workers 4",
		"memory ceiling: " + confine.FormatBytes(confine.DefaultMemory(4)) + " per session",
		"disk ceiling: " + confine.FormatBytes(confine.DefaultDisk(4)) + " per session folder",
		"cpu weight: 100 per session",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("sandbox check does not say %q:\n%s", want, out)
		}
	}
	code, out, errs = hp(t, "sandbox", "check", "--local-max-memory", "1.5G", "--local-max-disk", "none", "--local-cpu-weight", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"memory ceiling: 1.5 GiB per session", "disk ceiling: none", "cpu weight: none"} {
		if !strings.Contains(out, want) {
			t.Errorf("sandbox check with flags does not say %q:\n%s", want, out)
		}
	}
	if code, _, errs := hp(t, "sandbox", "check", "--local-max-memory", "lots"); code != exitUsage || !strings.Contains(errs, "local-max-memory") {
		t.Errorf("a bad size: exit %d, %s", code, errs)
	}
}

// TestGenerateRowCeilings is the acceptance through generate: a
// row writing past the disk ceiling to /tmp gets ENOSPC, a row allocating
// past the memory ceiling has its command killed (137), and a row beside
// them completes; every record completes (the model saw the failures as tool
// results) and the run exits 0.
func TestGenerateRowCeilings(t *testing.T) {
	needCeilings(t)
	if _, err := os.Stat("/usr/bin/perl"); err != nil {
		t.Skip("no perl")
	}
	url := startFake(t, fakellm.Config{}, `{"scripts": [
	  {"match": "^fill", "steps": [{"tool_calls": [{"name": "terminal", "arguments": {"command": "head -c 1G /dev/zero >/tmp/big; echo fill-rc=$?"}}]}, {"content": "ok"}]},
	  {"match": "^alloc", "steps": [{"tool_calls": [{"name": "terminal", "arguments": {"command": "perl -e '$x = \"a\" x (1 << 30); print \"done-\" . \"alloc\\n\"'"}}]}, {"content": "ok"}]},
	  {"match": "^plain", "steps": [{"tool_calls": [{"name": "terminal", "arguments": {"command": "head -c 16M /dev/zero >/tmp/small && wc -c </tmp/small"}}]}, {"content": "ok"}]}]}`)
	prompts := writePrompts(t, `{"prompt": "fill"}`, `{"prompt": "alloc"}`, `{"prompt": "plain"}`, `{"prompt": "plain again"}`)
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none",
		"--toolsets", "terminal", "--workers", "3", "--local-max-disk", "64M", "--local-max-memory", "128M")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.Contains(errs, "warning") {
		t.Errorf("ceilings warned: %s", errs)
	}
	got := map[string]string{}
	for _, rec := range catRecords(t, out) {
		conv := rec["conversations"].([]any)
		prompt := conv[1].(map[string]any)["value"].(string)
		got[prompt] = conv[3].(map[string]any)["value"].(string)
		if rec["outcome"] != "completed" {
			t.Errorf("row %q: outcome %v", prompt, rec["outcome"])
		}
	}
	if s := got["fill"]; !strings.Contains(s, "No space left on device") || !strings.Contains(s, "fill-rc=1") {
		t.Errorf("the row filling /tmp: %s", s)
	}
	if s := got["alloc"]; !strings.Contains(s, `"exit_code": 137`) || strings.Contains(s, "done-alloc") {
		t.Errorf("the row allocating 1 GiB: %s", s)
	}
	for _, p := range []string{"plain", "plain again"} {
		if s := got[p]; !strings.Contains(s, "16777216") || !strings.Contains(s, `"exit_code": 0`) {
			t.Errorf("row %q: %s", p, s)
		}
	}
}
