package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/stages/cron"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// TestCronAgentJobsUseMCPServers adds three agent jobs with an MCP config
// and runs them in one tick with the local sandbox: the job whose server
// works calls it (a stdio server started in the job's workdir, gone after
// the execution) and its trajectory counts the calls under their mcp_
// names; the job whose server cannot start and the job whose config file
// went missing each fail alone, their recorded errors naming the server
// with its stderr and the file.
func TestCronAgentJobsUseMCPServers(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "notes.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := writeMCPConfig(t, "cronsrv", "")
	broken := writeFailingMCPConfig(t, "no database here")
	gone := filepath.Join(t.TempDir(), "gone.json")
	if err := os.WriteFile(gone, []byte(`{"mcpServers": {"web": {"url": "http://127.0.0.1:1/mcp"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	fs, url := startFakeServer(t, fakellm.Config{Scripts: mustScripts(t, `{"scripts": [{"match": "list the folder", "steps": [
  {"tool_calls": [{"name": "mcp_cronsrv_ls", "arguments": {}}, {"name": "mcp_cronsrv_echo", "arguments": {"text": "seen"}}]},
  {"content": "The folder holds notes.txt."}]}]}`)})
	now := time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)
	deps := cronDeps{
		Agent: &cron.RolloutRunner{Driver: lazyDriver{scheme: "local"}, DefaultBaseURL: url, DefaultModel: "m"},
		Now:   func() time.Time { return now },
	}
	ids := map[string]string{}
	for _, j := range []struct{ name, cfg, toolsets, prompt string }{
		{"good", good, "terminal,mcp-cronsrv", "list the folder"},
		{"broken", broken, "mcp-db", "query the database"},
		{"gone", gone, "mcp-web", "fetch the page"},
	} {
		out, err := cronApp(t, deps, "--home", home, "add", "--tz", "UTC", "--name", j.name, "--workdir", work,
			"--mcp-config", j.cfg, "--toolsets", j.toolsets, "every 1h", j.prompt)
		if err != nil {
			t.Fatalf("add %s: %v\n%s", j.name, err, out)
		}
		ids[j.name] = strings.Fields(out)[1] // "added ID ..."
	}
	// An mcp- toolset that the job's config lacks is refused at add.
	if out, err := cronApp(t, deps, "--home", home, "add", "--tz", "UTC", "--mcp-config", good, "--toolsets", "mcp-other", "every 1h", "x"); err == nil ||
		!strings.Contains(out+err.Error(), "unknown toolsets mcp-other") {
		t.Fatalf("mcp-other accepted: %v\n%s", err, out)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour + 10*time.Second)
	out, _ := cronApp(t, deps, "--home", home, "tick", "--json")
	var rep struct {
		Results []cron.Result `json:"results"`
	}
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&rep); err != nil {
		t.Fatalf("tick: %v\n%s", err, out)
	}
	byJob := map[string]cron.Result{}
	for _, r := range rep.Results {
		byJob[r.JobID] = r
	}
	if r := byJob[ids["good"]]; r.State != cron.StateDone || r.Output != "The folder holds notes.txt." {
		t.Errorf("good job: %+v", r)
	}
	if r := byJob[ids["broken"]]; r.State != cron.StateFailed || !strings.Contains(r.Error, `mcp server "db"`) || !strings.Contains(r.Error, "no database here") {
		t.Errorf("broken job: %+v", r)
	}
	if r := byJob[ids["gone"]]; r.State != cron.StateFailed || !strings.Contains(r.Error, gone) || !strings.Contains(r.Error, "--mcp-config") {
		t.Errorf("job with a missing config: %+v", r)
	}
	if n := fs.Stats().Requests; n != 2 {
		t.Errorf("the model got %d requests, want the good job's 2", n)
	}
	// The good execution's trajectory: the server ran in the job's workdir.
	exec := byJob[ids["good"]].ExecutionID
	out, err := cronApp(t, deps, "--home", home, "history", "--show", exec, ids["good"])
	if err != nil {
		t.Fatalf("history: %v\n%s", err, out)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &rec); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	stats := rec["tool_stats"].(map[string]any)
	for _, n := range []string{"mcp_cronsrv_ls", "mcp_cronsrv_echo"} {
		if s, ok := stats[n].(map[string]any); !ok || s["success"] != 1.0 {
			t.Errorf("tool_stats[%s] = %v", n, stats[n])
		}
	}
	if b, _ := json.Marshal(rec["conversations"]); !strings.Contains(string(b), `notes.txt`) {
		t.Errorf("the ls result lacks the workdir's file: %s", b)
	}
	if left := mcpServersWith("cronsrv"); len(left) > 0 {
		t.Errorf("stdio servers left after the execution: %v", left)
	}
	// cron edit --mcp-config "" removes the servers; the job's mcp- toolset
	// must go with them.
	if out, err := cronApp(t, deps, "--home", home, "edit", "--mcp-config", "", ids["good"]); err == nil || !strings.Contains(err.Error(), "unknown toolsets mcp-cronsrv") {
		t.Errorf("edit kept mcp-cronsrv without a config: %v\n%s", err, out)
	}
	if out, err := cronApp(t, deps, "--home", home, "edit", "--mcp-config", "", "--toolsets", "terminal", ids["good"]); err != nil {
		t.Errorf("edit: %v\n%s", err, out)
	}
}
