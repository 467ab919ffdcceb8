package mcp

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/stages/rollout/mcp/mcptest"
)

// The costs the MCP client adds to a rollout (scripts/bench-mcp.sh runs
// these). BenchmarkMCPRollout is one rollout's whole use of a
// rollout-scoped stdio server: start, initialise, one call, stop;
// BenchmarkMCPCall is one call on a running server. Their difference is
// the per-rollout start cost.

func benchCall(b *testing.B, s *Session, ls leakServer) {
	out, err := s.Call(context.Background(), ls.tool, ls.args)
	if err != nil || out != ls.want {
		b.Fatalf("%s: %s %v", ls.tool, out, err)
	}
}

func BenchmarkMCPRollout(b *testing.B) {
	mark := fmt.Sprintf("bench-%d-%d", os.Getpid(), time.Now().UnixNano())
	for _, ls := range leakServers(b, mark) {
		b.Run(ls.name, func(b *testing.B) {
			m := start(b, `{"mcpServers": {`+ls.cfg(b)+`}}`)
			dir := b.TempDir()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s := m.NewSession(dir)
				benchCall(b, s, ls)
				s.Close()
			}
		})
	}
}

func BenchmarkMCPCall(b *testing.B) {
	mark := fmt.Sprintf("bench-%d-%d", os.Getpid(), time.Now().UnixNano())
	servers := leakServers(b, mark)
	web := httptest.NewServer(mcptest.Handler("srv"))
	b.Cleanup(web.Close)
	servers = append(servers, leakServer{name: "gosdk-http", cfg: func(testing.TB) string { return `"srv": {"url": "` + web.URL + `"}` },
		tool: "mcp_srv_echo", args: map[string]any{"text": "x"}, want: `{"result":"x"}`})
	for _, ls := range servers {
		b.Run(ls.name, func(b *testing.B) {
			m := start(b, `{"mcpServers": {`+ls.cfg(b)+`}}`)
			s := m.NewSession(b.TempDir())
			defer s.Close()
			benchCall(b, s, ls) // the server starts here
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				benchCall(b, s, ls)
			}
		})
	}
}
