package cron

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/sandbox/fake"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout/mcp/mcptest"
)

// writeConfig writes body at path and returns path.
func writeConfig(t *testing.T, path, body string) string {
	t.Helper()
	writeFile(t, path, body)
	return path
}

// An agent job with an MCP config: the scheduler reads it and hands it to
// the runner, which starts the server, offers its tools beside terminal,
// and keeps the calls in the execution's trajectory under their mcp_ names;
// the skills toolset reads <home>/skills unless the job names its own.
func TestAgentJobCallsMCPServer(t *testing.T) {
	web := httptest.NewServer(mcptest.Handler("web"))
	t.Cleanup(web.Close)
	home := t.TempDir()
	cfg := writeConfig(t, filepath.Join(t.TempDir(), "mcp.json"), `{"mcpServers": {"web": {"url": "`+web.URL+`"}}}`)
	url := server(t, fakellm.Config{}, `{"scripts": [{"match": "add them", "steps": [
	  {"tool_calls": [{"name": "mcp_web_add", "arguments": {"a": 2, "b": 3}}, {"name": "todo", "arguments": {"todos": [{"id": "1", "content": "add", "status": "completed"}]}}]},
	  {"content": "The sum is 5."}]}]}`)
	clock := newFakeClock(utc("2026-05-01T10:00:00Z"))
	s := newTestScheduler(t, home, clock, &RolloutRunner{Driver: fake.New(), DefaultBaseURL: url, DefaultModel: "m"})
	j := addJob(t, s, JobSpec{Schedule: "every 1h", Prompt: "add them", MCPConfig: cfg, Toolsets: []string{"terminal", "mcp-web", "todo"}})
	if j.Policy.MCPConfig != cfg || j.Policy.SkillsDir != "" {
		t.Fatalf("stored policy %+v", j.Policy)
	}
	clock.Advance(61 * 60e9)
	rep, err := s.Tick(context.Background())
	if err != nil || len(rep.Results) != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
	r := rep.Results[0]
	if r.State != StateDone || r.Output != "The sum is 5." {
		t.Fatalf("result %+v", r)
	}
	var rec *schemas.Record
	err = pipeline.EachRecord(RunDir(home, j.ID, r.ExecutionID), func(_ pipeline.RecordRef, line []byte) error {
		rec = &schemas.Record{}
		return json.Unmarshal(line, rec)
	})
	if err != nil || rec == nil {
		t.Fatalf("trajectory: %v", err)
	}
	if st := rec.ToolStats["mcp_web_add"]; st.Success != 1 {
		t.Errorf("tool_stats %+v", rec.ToolStats)
	}
	if st := rec.ToolStats["todo"]; st.Success != 1 {
		t.Errorf("tool_stats %+v", rec.ToolStats)
	}
	if b, _ := json.Marshal(rec.Conversations); !strings.Contains(string(b), `\"sum\": 5`) {
		t.Errorf("conversations lack the server's result: %s", b)
	}
}

// The runner's pre-flight: a server it cannot reach fails the execution
// before any model call, naming the server.
func TestAgentJobMCPPreflightFails(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String() + "/mcp"
	l.Close()
	cfgPath := writeConfig(t, filepath.Join(t.TempDir(), "mcp.json"), `{"mcpServers": {"gone": {"url": "`+dead+`", "connect_timeout": 5}}}`)
	j := &Job{ID: "j", Policy: Policy{MCPConfig: cfgPath}}
	cfg, err := jobMCP(j)
	if err != nil {
		t.Fatal(err)
	}
	fs := fakellm.New(fakellm.Config{})
	srv := httptest.NewServer(fs)
	t.Cleanup(srv.Close)
	r := &RolloutRunner{Driver: fake.New(), DefaultBaseURL: srv.URL + "/v1", DefaultModel: "m"}
	res, err := r.RunAgent(context.Background(), AgentJob{JobID: "j", ExecutionID: "e", Prompt: "x", Toolsets: []string{"mcp-gone"}, MCP: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != schemas.OutcomeError || !strings.Contains(res.Error, `"gone"`) {
		t.Fatalf("result %+v", res)
	}
	if n := fs.Stats().Requests; n != 0 {
		t.Errorf("the model got %d requests", n)
	}
}

// The job's tool settings are checked where its other fields are: a bad
// or missing config file, a relative path in a hand-edited store, an
// mcp- toolset the config lacks, ${workdir} outside the local sandbox.
func TestJobMCPConfigChecks(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	now := utc("2026-05-01T10:00:00Z")
	good := writeConfig(t, filepath.Join(dir, "good.json"), `{"mcpServers": {"fs": {"command": "true", "args": ["${workdir}"]}}}`)
	bad := writeConfig(t, filepath.Join(dir, "bad.json"), `{"mcpServers": {"x": {"command": "y", "scope": "forever"}}}`)
	for _, tc := range []struct {
		spec JobSpec
		want string
	}{
		{JobSpec{MCPConfig: bad}, bad + ":1: mcpServers.x.scope"},
		{JobSpec{MCPConfig: filepath.Join(dir, "none.json")}, "none.json"},
		{JobSpec{Toolsets: []string{"mcp-fs"}}, "unknown toolsets mcp-fs"},
		{JobSpec{MCPConfig: good, Toolsets: []string{"mcp-other"}}, "unknown toolsets mcp-other"},
		{JobSpec{MCPConfig: good, Sandbox: "docker:alpine"}, "only the local sandbox"},
		{JobSpec{SkillsDir: filepath.Join(dir, "nothing")}, "skills_dir"},
	} {
		tc.spec.Schedule, tc.spec.Timezone, tc.spec.Prompt = "every 1h", "UTC", "x"
		_, err := NewJob(home, tc.spec, now)
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.spec, err, tc.want)
		}
	}
	j, err := NewJob(home, JobSpec{Schedule: "every 1h", Timezone: "UTC", Prompt: "x", MCPConfig: good, Toolsets: []string{"mcp-fs"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := (JobEdit{Sandbox: ptr("docker:alpine")}).Apply(j, now); err != nil {
		t.Fatal(err) // Apply sets; ValidateJob (in ModifyJob) refuses:
	}
	if err := ValidateJob(home, j); err == nil || !strings.Contains(err.Error(), "${workdir}") {
		t.Errorf("docker sandbox with ${workdir}: %v", err)
	}

	// A hand-edited store: a relative path marks that job invalid on load;
	// the other job stays schedulable.
	st := NewStore(home)
	if err := os.MkdirAll(st.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, st.Path(), `{"jobs": [
  {"id": "rel", "prompt": "x", "schedule": {"kind": "interval", "minutes": 60}, "next_run_at": "2026-05-01T11:00:00Z", "policy": {"mcp_config": "mcp.json"}},
  {"id": "ok", "prompt": "x", "schedule": {"kind": "interval", "minutes": 60}, "next_run_at": "2026-05-01T11:00:00Z", "policy": {"mcp_config": "`+good+`"}}
]}`)
	tx, err := st.Load()
	if err != nil {
		t.Fatal(err)
	}
	inv := tx.Invalid()
	if len(inv) != 1 || inv[0].ID != "rel" || !strings.Contains(inv[0].Error, "policy.mcp_config") {
		t.Fatalf("invalid %+v", inv)
	}
}
