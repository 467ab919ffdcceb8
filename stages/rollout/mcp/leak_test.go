package mcp

import (
	"os"
	"strconv"
	"testing"
	"time"
)

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestManyRolloutsLeakNothing starts and stops a rollout-scoped stdio
// server per rollout, MCPTEST_ROLLOUTS times (default 40; the closing note
// of the feature used 1000), and checks that no server process and no file
// descriptor is left. It logs the start cost per rollout and the cost of a
// call on a running server.
func TestManyRolloutsLeakNothing(t *testing.T) {
	n := 40
	if v, err := strconv.Atoi(os.Getenv("MCPTEST_ROLLOUTS")); err == nil && v > 0 {
		n = v
	}
	m := start(t, `{"mcpServers": {`+stdioConfig(t, "leak", "")+`}}`)
	before := openFDs(t)
	var pids []string
	var startCost, callCost time.Duration
	calls := 0
	for i := 0; i < n; i++ {
		s := m.NewSession(t.TempDir())
		t0 := time.Now()
		pid := call(t, s, "mcp_leak_pid", nil)["result"].(string)
		startCost += time.Since(t0)
		for j := 0; j < 5; j++ {
			t1 := time.Now()
			if r := call(t, s, "mcp_leak_echo", map[string]any{"text": "x"}); r["result"] != "x" {
				t.Fatal(r)
			}
			callCost += time.Since(t1)
			calls++
		}
		s.Close()
		pids = append(pids, pid)
	}
	for _, p := range pids {
		if alive(p) {
			t.Errorf("server %s outlived its rollout", p)
		}
	}
	if after := openFDs(t); after > before {
		t.Errorf("file descriptors: %d before, %d after %d rollouts", before, after, n)
	}
	t.Logf("%d rollouts: start+first call %v per rollout, call on a running server %v", n, startCost/time.Duration(n), callCost/time.Duration(calls))
}
