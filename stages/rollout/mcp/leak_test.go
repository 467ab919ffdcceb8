package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/stages/rollout/mcp/mcptest"
)

func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// leakMarkEnv is given to every server of a leak test (through its
// config's env) so the processes it and its children leave can be found.
const leakMarkEnv = "MCPTEST_LEAK_MARK"

// marked lists the live processes whose environment holds
// leakMarkEnv=mark, and the live children of this process.
func marked(mark string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	self := strconv.Itoa(os.Getpid())
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		_, rest, _ := strings.Cut(string(stat), ") ")
		f := strings.Fields(rest)
		if len(f) < 2 || f[0] == "Z" {
			continue // gone, or a zombie about to be reaped
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if f[1] == self || strings.Contains("\x00"+string(env)+"\x00", "\x00"+leakMarkEnv+"="+mark+"\x00") {
			cl, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			out = append(out, e.Name()+" "+strings.ReplaceAll(string(cl), "\x00", " "))
		}
	}
	return out
}

// leakServer is one server for the leak test and the benchmarks: its
// config entry (named srv, scope rollout), the offered tool a rollout
// calls, and that call's arguments and expected result.
type leakServer struct {
	name, tool string
	cfg        func(testing.TB) string
	args       map[string]any
	want       string
}

func leakServers(t testing.TB, mark string) []leakServer {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	env := `"` + leakMarkEnv + `": ` + q(mark)
	return []leakServer{{
		name: "gosdk",
		cfg: func(testing.TB) string {
			return `"srv": {"command": ` + q(exe) + `, "env": {"` + mcptest.EnvServe + `": "leak", ` + env + `}}`
		},
		tool: "mcp_srv_echo", args: map[string]any{"text": "x"}, want: `{"result":"x"}`,
	}, {
		name: "npm-memory",
		cfg: func(t testing.TB) string {
			return `"srv": {"command": "node", "args": [` + q(npmServer(t, "server-memory")) + `],
			  "env": {"MEMORY_FILE_PATH": "${workdir}/memory.jsonl", ` + env + `}}`
		},
		tool: "mcp_srv_read_graph", args: map[string]any{},
		want: `{"result":"{\n  \"entities\": [],\n  \"relations\": []\n}","structuredContent":{"entities":[],"relations":[]}}`,
	}}
}

// TestManyRolloutsLeakNothing runs MCPTEST_ROLLOUTS rollouts (default 25;
// scripts/bench-mcp.sh runs 1000) against a rollout-scoped stdio server:
// the in-process SDK's test server, and the npm memory server
// (MCPTEST_LEAK_SERVER=gosdk or npm-memory runs one of them). Each
// rollout starts its server, makes six calls and stops it. Afterwards no
// server, no process the server started, no guard and no other child of
// this process is alive, and no file descriptor is left open. It logs the
// costs: start (the first call less a call on a running server), a call on
// a running server, and stop.
func TestManyRolloutsLeakNothing(t *testing.T) {
	n := 25
	if v, err := strconv.Atoi(os.Getenv("MCPTEST_ROLLOUTS")); err == nil && v > 0 {
		n = v
	}
	mark := fmt.Sprintf("leak-%d-%d", os.Getpid(), time.Now().UnixNano())
	only := os.Getenv("MCPTEST_LEAK_SERVER")
	for _, ls := range leakServers(t, mark) {
		t.Run(ls.name, func(t *testing.T) {
			if only != "" && only != ls.name {
				t.Skipf("MCPTEST_LEAK_SERVER=%s", only)
			}
			m := start(t, `{"mcpServers": {`+ls.cfg(t)+`}}`)
			before := openFDs(t)
			var first, calls, stop time.Duration
			ncalls := 0
			for i := 0; i < n; i++ {
				s := m.NewSession(t.TempDir())
				for j := 0; j < 6; j++ {
					t0 := time.Now()
					out, err := s.Call(context.Background(), ls.tool, ls.args)
					d := time.Since(t0)
					if err != nil || out != ls.want {
						t.Fatalf("rollout %d call %d: %s %v", i, j, out, err)
					}
					if j == 0 {
						first += d
					} else {
						calls += d
						ncalls++
					}
				}
				t0 := time.Now()
				s.Close()
				stop += time.Since(t0)
			}
			if left := marked(mark); len(left) > 0 {
				t.Errorf("processes left after %d rollouts: %v", n, left)
			}
			if after := openFDs(t); after > before {
				t.Errorf("file descriptors: %d before, %d after %d rollouts", before, after, n)
			}
			call := calls / time.Duration(ncalls)
			t.Logf("%s: %d rollouts: start %v per rollout (first call %v less a call), call on a running server %v, stop %v",
				ls.name, n, first/time.Duration(n)-call, first/time.Duration(n), call, stop/time.Duration(n))
		})
	}
}
