package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// npmServer returns the entry point of an MCP server package installed by
// `npm ci --prefix scripts` (see .ci/run).
func npmServer(t testing.TB, pkg string) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	p, err := filepath.Abs(filepath.Join("..", "..", "..", "scripts", "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not installed: run npm ci --prefix scripts (%v)", pkg, err)
	}
	return p
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestRealNpmServers runs the reference servers users run: filesystem and
// memory over stdio (one per rollout, in the rollout's folder) and
// everything over Streamable HTTP.
func TestRealNpmServers(t *testing.T) {
	fs, mem, every := npmServer(t, "server-filesystem"), npmServer(t, "server-memory"), npmServer(t, "server-everything")
	port := freePort(t)
	ev := exec.Command("node", every, "streamableHttp")
	ev.Env = []string{"PATH=" + os.Getenv("PATH"), fmt.Sprintf("PORT=%d", port)}
	if err := ev.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ev.Process.Kill(); _ = ev.Wait() })
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("server-everything did not listen")
		}
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	cfg := mustParse(t, `{"mcpServers": {
  "fs": {"command": "node", "args": [`+q(fs)+`, "${workdir}"]},
  "mem": {"command": "node", "args": [`+q(mem)+`], "env": {"MEMORY_FILE_PATH": "${workdir}/memory.jsonl"}},
  "every": {"url": "http://127.0.0.1:`+fmt.Sprint(port)+`/mcp", "tools": {"include": ["echo"]}}
}}`, nil)
	m, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	for _, n := range []string{"mcp_fs_list_directory", "mcp_mem_create_entities", "mcp_mem_read_graph", "mcp_every_echo"} {
		if !m.Has(n) {
			t.Fatalf("no %s in %v", n, m.ToolNames())
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := m.NewSession(dir)
	if r := call(t, s, "mcp_fs_list_directory", map[string]any{"path": dir}); !strings.Contains(fmt.Sprint(r["result"]), "notes.txt") {
		t.Fatalf("list_directory: %v", r)
	}
	if r := call(t, s, "mcp_fs_list_directory", map[string]any{"path": "/etc"}); r["error"] == nil {
		t.Fatalf("filesystem server read outside ${workdir}: %v", r)
	}
	call(t, s, "mcp_mem_create_entities", map[string]any{"entities": []map[string]any{{"name": "Ada", "entityType": "person", "observations": []string{"writes code"}}}})
	if r := call(t, s, "mcp_mem_read_graph", nil); !strings.Contains(schemas.ToolResultJSON(r), "Ada") {
		t.Fatalf("read_graph: %v", r)
	}
	if r := call(t, s, "mcp_every_echo", map[string]any{"message": "over http"}); !strings.Contains(fmt.Sprint(r["result"]), "over http") {
		t.Fatalf("echo: %v", r)
	}
	s.Close()
	// The next rollout's memory server starts empty.
	s2 := m.NewSession(t.TempDir())
	defer s2.Close()
	if r := call(t, s2, "mcp_mem_read_graph", nil); strings.Contains(schemas.ToolResultJSON(r), "Ada") {
		t.Fatalf("memory leaked between rollouts: %v", r)
	}
}
