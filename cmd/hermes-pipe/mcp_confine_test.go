package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// TestGenerateConfinesMCPServers: with the confined local sandbox (the
// default) a rollout's stdio server cannot list a folder outside its
// mounts; with --local-isolation none it can (and a warning is printed).
func TestGenerateConfinesMCPServers(t *testing.T) {
	if err := confine.Check(context.Background()); err != nil {
		t.Skipf("confinement unavailable here: %v", err)
	}
	secret, err := os.MkdirTemp("/var/tmp", "hermes-mcp-secret-*")
	if err != nil {
		t.Skipf("no folder outside /tmp to hide: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(secret) })
	if err := os.WriteFile(filepath.Join(secret, "id_secret"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	q, _ := json.Marshal(secret)
	script := `{"scripts": [{"match": "^peek$", "steps": [
  {"tool_calls": [{"name": "mcp_srv_ls", "arguments": {"path": ` + string(q) + `}}]},
  {"content": "done"}]}]}`
	cfg := writeMCPConfig(t, "srv", "")
	url := startFake(t, fakellm.Config{}, script)
	prompts := writePrompts(t, `{"prompt": "peek"}`)
	for _, iso := range []string{"bwrap", "none"} {
		out := filepath.Join(t.TempDir(), "out")
		code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none",
			"--sandbox", "local", "--local-isolation", iso, "--mcp-config", cfg, "--toolsets", "mcp-srv")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", iso, code, errs)
		}
		recs := catRecords(t, out)
		if len(recs) != 1 {
			t.Fatalf("%s: %d records", iso, len(recs))
		}
		b, _ := json.Marshal(recs[0]["conversations"])
		saw := strings.Contains(string(b), "id_secret")
		if iso == "bwrap" && saw {
			t.Errorf("a confined MCP server listed %s: %s", secret, b)
		}
		if iso == "none" && !saw {
			t.Errorf("the unconfined MCP server could not list %s (the probe proves nothing): %s", secret, b)
		}
	}
}
