package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// TestSWEAgentCallsMCPServer runs one swe task whose agent, besides its
// terminal, calls a stdio MCP server started for the task with ${workdir}
// = the task's repository: the server sees the file the agent's command
// wrote there, tool_stats count the calls under their mcp_ names, the task
// is graded as usual, and the server does not outlive the run.
func TestSWEAgentCallsMCPServer(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	cfg := writeMCPConfig(t, "swesrv", "")
	base := startFake(t, fakellm.Config{}, `{"scripts": [{"match": "^Create hello.py", "steps": [
 {"tool_calls": [{"name": "terminal", "arguments": {"command": "printf 'print(1)\\n' > hello.py"}}]},
 {"tool_calls": [{"name": "mcp_swesrv_ls", "arguments": {}}, {"name": "mcp_swesrv_echo", "arguments": {"text": "checked"}}]},
 {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo MINI_SWE_AGENT_FINAL_OUTPUT; echo created hello.py"}}]}]}]}`)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, errs := hpSWE(t, "swe", "--task", "Create hello.py that prints 1", "--out", out, "--base-url", base, "--model", "fake",
		"--sandbox", "local", "--progress", "none", "--mcp-config", cfg, "--toolsets", "mcp-swesrv")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, errs)
	}
	recs := catRecords(t, out)
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	r := recs[0]
	if r["outcome"] != "resolved" {
		t.Fatalf("outcome %v: %v", r["outcome"], r["error"])
	}
	used, _ := json.Marshal(r["toolsets_used"])
	if string(used) != `["terminal","mcp-swesrv"]` {
		t.Errorf("toolsets_used %s, want terminal added to mcp-swesrv", used)
	}
	stats := r["tool_stats"].(map[string]any)
	for name, want := range map[string]float64{"mcp_swesrv_ls": 1, "mcp_swesrv_echo": 1, "terminal": 2} {
		s, ok := stats[name].(map[string]any)
		if !ok || s["success"] != want || s["failure"] != 0.0 {
			t.Errorf("tool_stats[%s] = %v, want %v successes", name, stats[name], want)
		}
	}
	var tools strings.Builder
	for _, turn := range r["conversations"].([]any) {
		if m := turn.(map[string]any); m["from"] == "tool" {
			tools.WriteString(m["value"].(string))
		}
	}
	// ls runs in ${workdir}: the repository the agent's command wrote to.
	for _, want := range []string{`\"hello.py\"`, `"result": "checked"`} {
		if !strings.Contains(tools.String(), want) {
			t.Errorf("tool turns lack %s:\n%s", want, tools.String())
		}
	}
	mustVerify(t, out)
	if left := mcpServersWith("swesrv"); len(left) > 0 {
		t.Errorf("stdio servers left after the run: %v", left)
	}
}

// TestSWEMCPPreflightAndToolsets: a server that cannot start exits 2 with
// its name and stderr before any model request and before the output
// folder exists; an mcp- toolset without --mcp-config is a usage error.
func TestSWEMCPPreflightAndToolsets(t *testing.T) {
	p := writeFailingMCPConfig(t, "no database here")
	fs, base := startFakeServer(t, fakellm.Config{})
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hpSWE(t, "swe", "--task", "x", "--out", out, "--base-url", base, "--model", "fake", "--sandbox", "local",
		"--progress", "none", "--mcp-config", p, "--toolsets", "terminal,mcp-db")
	if code != exitUsage {
		t.Fatalf("exit %d, want 2: %s", code, errs)
	}
	for _, want := range []string{`mcp server "db"`, "no database here"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q: %s", want, errs)
		}
	}
	if n := fs.Stats().Requests; n != 0 {
		t.Errorf("the model got %d requests", n)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("an output folder was made")
	}
	code, _, errs = hpSWE(t, "swe", "--task", "x", "--out", out, "--base-url", base, "--model", "fake", "--sandbox", "local", "--toolsets", "mcp-nope")
	if code != exitUsage || !strings.Contains(errs, `unknown toolset "mcp-nope"`) {
		t.Fatalf("exit %d: %s", code, errs)
	}
}
