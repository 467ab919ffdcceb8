package mcp

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/stages/rollout/mcp/mcptest"
)

func TestMain(m *testing.M) {
	mcptest.MaybeServe()
	os.Exit(m.Run())
}

// self is this test binary, which serves MCP over stdio when asked.
func self(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func parse(t testing.TB, text string, env map[string]string) (*Config, error) {
	t.Helper()
	return Parse("cfg.json", []byte(text), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
}

func mustParse(t testing.TB, text string, env map[string]string) *Config {
	t.Helper()
	c, err := parse(t, text, env)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestParseForms(t *testing.T) {
	c := mustParse(t, `{"mcpServers": {
  "fs": {"command": "node", "args": ["srv.js", "${workdir}"], "env": {"TOKEN": "${env:TOK}", "PORT": 8080}, "timeout": 5},
  "web": {"url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer ${env:TOK}"}, "tools": {"exclude": ["x"]}},
  "old": {"type": "sse", "url": "http://127.0.0.1:1/sse"}
}}`, map[string]string{"TOK": "s3cret"})
	if len(c.Servers) != 3 {
		t.Fatalf("servers: %d", len(c.Servers))
	}
	fs, old, web := c.Servers[0], c.Servers[1], c.Servers[2]
	if fs.Toolset != "mcp-fs" || fs.Transport != TransportStdio || fs.Scope != ScopeRollout || fs.Args[1] != "${workdir}" ||
		fs.Env["TOKEN"] != "s3cret" || fs.Env["PORT"] != "8080" || fs.Timeout.Seconds() != 5 {
		t.Fatalf("fs: %+v", fs)
	}
	if web.Transport != TransportHTTP || web.Scope != ScopeRun || web.Headers["Authorization"] != "Bearer s3cret" || web.Exclude[0] != "x" {
		t.Fatalf("web: %+v", web)
	}
	if old.Transport != TransportSSE {
		t.Fatalf("old: %+v", old)
	}
	// Hermes' config.yaml, with other sections around it.
	y := mustParse(t, "model: x\nmcp_servers:\n  mem:\n    command: npx\n    args: [\"-y\", \"pkg\"]\n    timeout: 30\n    connect_timeout: 10\n    tools:\n      include: [a]\n", nil)
	if s := y.Servers[0]; s.Name != "mem" || s.Args[1] != "pkg" || s.ConnectTimeout.Seconds() != 10 || s.Include[0] != "a" {
		t.Fatalf("yaml: %+v", s)
	}
}

func TestParseErrorsNameFileLineField(t *testing.T) {
	cases := []struct{ text, want string }{
		{`{"other": 1}`, "cfg.json:1: no mcpServers"},
		{"{\"mcpServers\": {\n \"a\": {\"command\": 3}}}", "cfg.json:2: mcpServers.a.command: must be a string"},
		{`{"mcpServers": {"a": {"command": "x", "args": ["ok", 1]}}}`, "mcpServers.a.args[1]: must be a string"},
		{`{"mcpServers": {"a": {"command": "x", "env": {"K": "${env:NOPE}"}}}}`, "mcpServers.a.env.K: ${env:NOPE}: environment variable NOPE is not set"},
		{`{"mcpServers": {"a": {"command": "x", "args": ["${HOME}"]}}}`, "unknown placeholder ${HOME}"},
		{`{"mcpServers": {"a": {"command": "x", "scope": "run", "args": ["${workdir}"]}}}`, "only a scope: rollout server may use it"},
		{`{"mcpServers": {"a": {"command": "x", "scope": "global"}}}`, "mcpServers.a.scope: \"global\": want rollout or run"},
		{`{"mcpServers": {"a": {"url": "ftp://x"}}}`, "mcpServers.a.url"},
		{`{"mcpServers": {"a": {"command": "x", "timeout": "soon"}}}`, "mcpServers.a.timeout"},
		{`{"mcpServers": {"a": {"command": "x", "tools": {"only": []}}}}`, "mcpServers.a.tools.only: unknown member"},
		{`{"mcpServers": {"a": {"command": "x", "colour": "red"}}}`, "mcpServers.a.colour: unknown setting"},
		{`{"mcpServers": {"a": {"args": []}}}`, "needs command"},
		{`{"mcpServers": {"a.b": {"command": "x"}, "a_b": {"command": "y"}}}`, "both become toolset \"mcp-a_b\""},
		{`{"mcpServers": `, "not valid JSON or YAML"},
	}
	for _, c := range cases {
		_, err := parse(t, c.text, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %q", c.text, err, c.want)
		}
	}
}

func TestToolName(t *testing.T) {
	if got := ToolName("my.server", "do thing/now"); got != "mcp_my_server_do_thing_now" {
		t.Fatal(got)
	}
	long := ToolName(strings.Repeat("s", 40), strings.Repeat("t", 40))
	if len(long) != MaxToolName || !strings.HasPrefix(long, "mcp_sss") {
		t.Fatal(long, len(long))
	}
}

// stdioConfig is a config with the test binary as a stdio server.
func stdioConfig(t *testing.T, name, extra string) string {
	t.Helper()
	exe, _ := json.Marshal(self(t))
	return `"` + name + `": {"command": ` + string(exe) + `, "env": {"` + mcptest.EnvServe + `": "` + name + `"` + extra + `}}`
}

func start(t testing.TB, cfgText string) *Manager {
	t.Helper()
	cfg := mustParse(t, cfgText, map[string]string{"PARENT_SECRET": "visible"})
	m, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func call(t *testing.T, s *Session, name string, args map[string]any) map[string]any {
	t.Helper()
	out, err := s.Call(context.Background(), name, args)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%s: %q is not a JSON object", name, out)
	}
	return m
}

func TestStdioServerToolsResultsCrashAndRestart(t *testing.T) {
	t.Setenv("PARENT_ONLY", "leak")
	m := start(t, `{"mcpServers": {`+stdioConfig(t, "t1", `, "FROM_PARENT": "${env:PARENT_SECRET}"`)+`}}`)
	names := m.ToolNames()
	if !m.Has("mcp_t1_echo") || len(names) != 10 || m.Toolsets()[0] != "mcp-t1" {
		t.Fatalf("tools %v toolsets %v", names, m.Toolsets())
	}
	var echo string
	for _, tl := range m.Tools("mcp-t1") {
		if tl.Function.Name == "mcp_t1_echo" {
			echo = string(tl.Function.Parameters)
			if tl.Function.Description != "Echo the text back." {
				t.Fatal(tl.Function.Description)
			}
		}
	}
	if !strings.Contains(echo, `"required":["text"]`) {
		t.Fatalf("echo schema %s", echo)
	}
	s := m.NewSession(t.TempDir())
	defer s.Close()
	if r := call(t, s, "mcp_t1_echo", map[string]any{"text": "hi <there>"}); r["result"] != "hi <there>" {
		t.Fatalf("echo: %v", r)
	}
	if r := call(t, s, "mcp_t1_add", map[string]any{"a": 2, "b": 3}); r["result"] != "5" || r["structuredContent"].(map[string]any)["sum"] != 5.0 {
		t.Fatalf("add: %v", r)
	}
	if r := call(t, s, "mcp_t1_fail", nil); r["error"] != "this tool always fails" {
		t.Fatalf("fail: %v", r)
	}
	if r := call(t, s, "mcp_t1_picture", nil); r["result"] != "a picture:\n[image: image/png, 8 bytes]" {
		t.Fatalf("picture: %v", r)
	}
	// Only the named variables (and PATH) reach the server.
	if r := call(t, s, "mcp_t1_env", map[string]any{"name": "FROM_PARENT"}); r["result"] != "visible" {
		t.Fatalf("env: %v", r)
	}
	if r := call(t, s, "mcp_t1_env", map[string]any{"name": "PARENT_ONLY"}); r["result"] != "<unset>" {
		t.Fatalf("env leak: %v", r)
	}
	pid1 := call(t, s, "mcp_t1_pid", nil)["result"]
	if r := call(t, s, "mcp_t1_count", nil); r["result"] != "1" {
		t.Fatalf("count: %v", r)
	}
	r := call(t, s, "mcp_t1_crash", nil)
	if e, _ := r["error"].(string); !strings.Contains(e, "exited") || !strings.Contains(e, "crashing as asked") {
		t.Fatalf("crash: %v", r)
	}
	pid2 := call(t, s, "mcp_t1_pid", nil)["result"]
	if pid2 == pid1 {
		t.Fatalf("not restarted: pid %v", pid2)
	}
	if r := call(t, s, "mcp_t1_count", nil); r["result"] != "1" {
		t.Fatalf("count after restart: %v", r)
	}
	// A second rollout gets its own server.
	s2 := m.NewSession(t.TempDir())
	if r := call(t, s2, "mcp_t1_count", nil); r["result"] != "1" {
		t.Fatalf("rollout scope shared state: %v", r)
	}
	s2.Close()
	pid, _ := pid2.(string)
	s.Close()
	if alive(pid) {
		t.Fatalf("server %s outlived its session", pid)
	}
}

func alive(pid string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

func TestCheckSandbox(t *testing.T) {
	c := mustParse(t, `{"mcpServers": {"a": {"command": "node"}, "fs": {"command": "node", "env": {"ROOT": "${workdir}/x"}}}}`, nil)
	if err := c.CheckSandbox("local"); err != nil {
		t.Fatalf("local: %v", err)
	}
	err := c.CheckSandbox("docker")
	if err == nil || !strings.Contains(err.Error(), `server "fs" uses ${workdir}`) || !strings.Contains(err.Error(), "this one is docker") {
		t.Fatalf("docker: %v", err)
	}
	plain := mustParse(t, `{"mcpServers": {"a": {"command": "node", "args": ["x"]}}}`, nil)
	if err := plain.CheckSandbox("ssh"); err != nil {
		t.Fatalf("no ${workdir}: %v", err)
	}
}

func TestWorkdirPlaceholder(t *testing.T) {
	exe, _ := json.Marshal(self(t))
	m := start(t, `{"mcpServers": {"w": {"command": `+string(exe)+`, "cwd": "${workdir}", "env": {"`+mcptest.EnvServe+`": "w", "WD": "${workdir}"}}}}`)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "marker.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := m.NewSession(dir)
	defer s.Close()
	if r := call(t, s, "mcp_w_ls", nil); r["result"] != `["marker.txt"]` {
		t.Fatalf("ls: %v", r)
	}
	if r := call(t, s, "mcp_w_env", map[string]any{"name": "WD"}); r["result"] != dir {
		t.Fatalf("WD: %v", r)
	}
	// A rollout whose sandbox has no folder here cannot start it.
	s2 := m.NewSession("")
	defer s2.Close()
	if r := call(t, s2, "mcp_w_ls", nil); !strings.Contains(r["error"].(string), "uses ${workdir}") {
		t.Fatalf("no workdir: %v", r)
	}
}

func TestHTTPAndSSEServersAreSharedByTheRun(t *testing.T) {
	// Cleanups run last-registered first: the servers close after the
	// manager has closed its connections to them.
	h := httptest.NewServer(mcptest.Handler("h"))
	t.Cleanup(h.Close)
	sse := httptest.NewServer(mcptest.SSEHandler("s"))
	t.Cleanup(sse.Close)
	m := start(t, `{"mcpServers": {"web": {"url": "`+h.URL+`", "tools": {"include": ["count", "echo"]}}, "old": {"type": "sse", "url": "`+sse.URL+`"}}}`)
	if got := strings.Join(m.ToolNames(), ","); !strings.HasPrefix(got, "mcp_old_add,") || !strings.HasSuffix(got, "mcp_web_count,mcp_web_echo") {
		t.Fatal(got)
	}
	a, b := m.NewSession(""), m.NewSession("")
	defer a.Close()
	defer b.Close()
	if r := call(t, a, "mcp_web_count", nil); r["result"] != "1" {
		t.Fatal(r)
	}
	if r := call(t, b, "mcp_web_count", nil); r["result"] != "2" {
		t.Fatalf("run scope not shared: %v", r)
	}
	if r := call(t, a, "mcp_old_echo", map[string]any{"text": "over sse"}); r["result"] != "over sse" {
		t.Fatal(r)
	}
	if r := call(t, a, "mcp_web_add", map[string]any{"a": 1, "b": 1}); !strings.Contains(r["error"].(string), "unknown MCP tool") {
		t.Fatalf("excluded tool called: %v", r)
	}
}

func TestTimeoutRestartsAStdioServer(t *testing.T) {
	m := start(t, `{"mcpServers": {`+stdioConfig(t, "slow", "")[:len(stdioConfig(t, "slow", ""))-1]+`, "timeout": "300ms"}}}`)
	s := m.NewSession("")
	defer s.Close()
	pid1 := call(t, s, "mcp_slow_pid", nil)["result"]
	r := call(t, s, "mcp_slow_sleep", map[string]any{"ms": 60000})
	if e, _ := r["error"].(string); !strings.Contains(e, "timed out after 300ms") {
		t.Fatal(r)
	}
	if pid2 := call(t, s, "mcp_slow_pid", nil)["result"]; pid2 == pid1 {
		t.Fatal("a timed-out server was kept")
	}
}

func TestPreflightFailures(t *testing.T) {
	exe, _ := json.Marshal(self(t))
	cfg := mustParse(t, `{"mcpServers": {"good": {"command": `+string(exe)+`, "env": {"`+mcptest.EnvServe+`": "good"}},
"bad": {"command": `+string(exe)+`, "env": {"`+mcptest.EnvServe+`": "bad", "MCPTEST_FAIL_START": "no database"}},
"missing": {"command": "/nonexistent/server"}}}`, nil)
	_, err := Start(context.Background(), cfg)
	if err == nil {
		t.Fatal("pre-flight passed")
	}
	for _, want := range []string{`mcp server "bad"`, "refusing to start: no database", "exit status 3", `mcp server "missing"`, "/nonexistent/server"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nlacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), `"good"`) {
		t.Errorf("good server reported: %v", err)
	}
	cfg = mustParse(t, `{"mcpServers": {`+stdioConfig(t, "g", "")[:len(stdioConfig(t, "g", ""))-1]+`, "tools": {"include": ["nope"]}}}}`, nil)
	if _, err := Start(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), `has no tool "nope"`) {
		t.Fatal(err)
	}
	// Two servers whose names sanitise alike and overlong tool names collide.
	long := strings.Repeat("x", 60)
	cfg = mustParse(t, `{"mcpServers": {`+stdioConfig(t, long+"a", "")+`, `+stdioConfig(t, long+"b", "")+`}}`, nil)
	if _, err := Start(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "are both offered as") {
		t.Fatal(err)
	}
}
