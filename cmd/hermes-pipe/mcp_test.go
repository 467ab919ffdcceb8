package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout/mcp/mcptest"
)

// mcpServersWith returns the PIDs of live processes whose environment holds
// MCPTEST_SERVE=name (the test binary serving as a stdio MCP server).
func mcpServersWith(name string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(b), "\x00") {
			if kv == mcptest.EnvServe+"="+name {
				if pid := e.Name(); !processGone(atoi(pid)) {
					out = append(out, pid)
				}
			}
		}
	}
	return out
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// writeMCPConfig writes an mcpServers file: the test binary as stdio server
// name (scope rollout, working in ${workdir}) plus extra servers.
func writeMCPConfig(t *testing.T, name, extra string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	q, _ := json.Marshal(exe)
	cfg := `{"mcpServers": {"` + name + `": {"command": ` + string(q) + `, "cwd": "${workdir}", "env": {"` + mcptest.EnvServe + `": "` + name + `"}}` + extra + `}}`
	p := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeFailingMCPConfig writes an MCP configuration of one stdio server,
// "db" (the test binary), that fails its start printing msg on stderr.
func writeFailingMCPConfig(t *testing.T, msg string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	q, _ := json.Marshal(exe)
	m, _ := json.Marshal(msg)
	p := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(p, []byte(`{"mcpServers": {"db": {"command": `+string(q)+`, "env": {"`+mcptest.EnvServe+`": "db", "MCPTEST_FAIL_START": `+string(m)+`}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const mcpScript = `{"scripts": [{"match": "^mcp run$", "steps": [
  {"tool_calls": [{"name": "mcp_srv_echo", "arguments": {"text": "hello from the model"}},
                  {"name": "mcp_web_add", "arguments": {"a": 2, "b": 3}},
                  {"name": "terminal", "arguments": {"command": "echo seen > marker.txt"}}]},
  {"tool_calls": [{"name": "mcp_srv_ls", "arguments": {}}, {"name": "mcp_srv_crash", "arguments": {}}]},
  {"tool_calls": [{"name": "mcp_srv_count", "arguments": {}}, {"name": "mcp_srv_fail", "arguments": {}},
                  {"name": "mcp_srv_picture", "arguments": {}}]},
  {"content": "All done."}]}]}`

// TestGenerateCallsMCPServers drives generate against a stdio server (one
// per rollout, in the rollout's folder) and a Streamable HTTP server: the
// calls reach the right server, results land in the tool turns, tool_stats
// count them under their mcp_ names, a crash is a tool error and the next
// call works on a restarted server, and no server outlives the run.
func TestGenerateCallsMCPServers(t *testing.T) {
	web := httptest.NewServer(mcptest.Handler("web"))
	t.Cleanup(web.Close)
	cfg := writeMCPConfig(t, "srv", `, "web": {"url": "`+web.URL+`"}`)
	url := startFake(t, fakellm.Config{}, mcpScript)
	prompts := writePrompts(t, `{"prompt": "mcp run"}`, `{"prompt": "mcp run", "toolsets": ["mcp-srv", "terminal"]}`)
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none",
		"--sandbox", "local", "--mcp-config", cfg, "--toolsets", "terminal,mcp-srv,mcp-web")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	recs := catRecords(t, out)
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	for _, r := range recs {
		if r["outcome"] != "completed" {
			t.Fatalf("outcome %v: %v", r["outcome"], r["error"])
		}
		stats := r["tool_stats"].(map[string]any)
		st := func(n string) map[string]any {
			s, ok := stats[n].(map[string]any)
			if !ok {
				t.Fatalf("tool_stats lacks %s: %v", n, stats)
			}
			return s
		}
		conv := r["conversations"].([]any)
		system := conv[0].(map[string]any)["value"].(string)
		var tools strings.Builder
		for _, turn := range conv {
			if m := turn.(map[string]any); m["from"] == "tool" {
				tools.WriteString(m["value"].(string))
			}
		}
		tt := tools.String()
		if !strings.Contains(system, `{"name": "mcp_srv_echo", "description": "Echo the text back.", "parameters": {`) {
			t.Errorf("system turn lacks the MCP tool: %.400s", system)
		}
		if st("mcp_srv_crash")["failure"] != 1.0 || st("mcp_srv_fail")["failure"] != 1.0 || st("mcp_srv_count")["success"] != 1.0 ||
			st("mcp_srv_echo")["success"] != 1.0 || st("mcp_srv_pid")["count"] != 0.0 {
			t.Errorf("tool_stats: %v", stats)
		}
		for _, want := range []string{`"result": "hello from the model"`, `"result": "[\"marker.txt\"]"`, "it will be restarted for the next call",
			`"result": "1"`, `"error": "this tool always fails"`, `[image: image/png, 8 bytes]`} {
			if !strings.Contains(tt, want) {
				t.Errorf("tool turns lack %s:\n%s", want, tt)
			}
		}
		toolsets, _ := json.Marshal(r["toolsets_used"])
		if strings.Contains(string(toolsets), "mcp-web") {
			if st("mcp_web_add")["success"] != 1.0 || !strings.Contains(tt, `"structuredContent": {"sum": 5}`) {
				t.Errorf("web add: %v\n%s", stats, tt)
			}
		} else if st("mcp_web_add")["failure"] != 1.0 || !strings.Contains(tt, `unknown tool \"mcp_web_add\"`) {
			// The second row offers no mcp-web: the call is a bad call.
			t.Errorf("a tool outside the row's toolsets was served: %v\n%s", stats, tt)
		}
	}
	mustVerify(t, out)
	if left := mcpServersWith("srv"); len(left) > 0 {
		t.Errorf("stdio servers left after the run: %v", left)
	}
}

// TestMCPPreflightFailureExits2WithoutATokenSpent: a server that cannot
// start is named with its stderr, the run exits 2, the model endpoint sees
// no request and no output folder is made.
func TestMCPPreflightFailureExits2WithoutATokenSpent(t *testing.T) {
	p := writeFailingMCPConfig(t, "cannot reach the database")
	fs, url := startFakeServer(t, fakellm.Config{Scripts: mustScripts(t, mcpScript)})
	prompts := writePrompts(t, `{"prompt": "mcp run"}`)
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none",
		"--mcp-config", p, "--toolsets", "terminal,mcp-db")
	if code != 2 {
		t.Fatalf("exit %d, want 2: %s", code, errs)
	}
	for _, want := range []string{`mcp server "db"`, "cannot reach the database", "exit status 3"} {
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
	// A bad config is also a usage error naming the file and field.
	bad := filepath.Join(t.TempDir(), "bad.json")
	_ = os.WriteFile(bad, []byte(`{"mcpServers": {"x": {"command": "y", "scope": "forever"}}}`), 0o600)
	code, _, errs = hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--mcp-config", bad)
	if code != 2 || !strings.Contains(errs, bad+":1: mcpServers.x.scope") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// An MCP toolset that is not configured.
	code, _, errs = hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--toolsets", "terminal,mcp-nope")
	if code != 2 || !strings.Contains(errs, `unknown toolset "mcp-nope"`) {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

// TestKillNineLeavesNoMCPServer kills hermes-pipe while a rollout's stdio
// server is busy in a call: the kernel kills the server with it.
func TestKillNineLeavesNoMCPServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	cfg := writeMCPConfig(t, "k9", "")
	_, url := startFakeServer(t, fakellm.Config{Scripts: mustScripts(t, `{"scripts": [{"match": "^hold$", "steps": [
  {"tool_calls": [{"name": "mcp_k9_sleep", "arguments": {"ms": 600000}}]}]}]}`)})
	prompts := writePrompts(t, `{"prompt": "hold"}`, `{"prompt": "hold"}`)
	cmd := exec.Command(bin, "generate", "--prompts", prompts, "--out", filepath.Join(t.TempDir(), "out"), "--base-url", url, "--model", "m",
		"--progress", "none", "--sandbox", "local", "--mcp-config", cfg, "--toolsets", "mcp-k9", "--workers", "2")
	cmd.Env = killedRunEnv(t)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// Two rollouts, each with its own server, both in their sleep call.
	for deadline := time.Now().Add(time.Minute); len(mcpServersWith("k9")) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) || processGone(cmd.Process.Pid) {
			t.Fatalf("servers never started: %s", stderr.String())
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	for deadline := time.Now().Add(30 * time.Second); len(mcpServersWith("k9")) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("servers outlived kill -9 of hermes-pipe: %v", mcpServersWith("k9"))
		}
	}
}
