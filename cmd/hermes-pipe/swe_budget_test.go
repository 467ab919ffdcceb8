package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// sweLoopScript makes the "loop swe" task call the model seven times: six
// terminal calls, then a submission.
const sweLoopScript = `{"scripts": [{"match": "^loop swe", "steps": [
  {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo 1 >> a.txt"}}]},
  {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo 2 >> a.txt"}}]},
  {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo 3 >> a.txt"}}]},
  {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo 4 >> a.txt"}}]},
  {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo 5 >> a.txt"}}]},
  {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo 6 >> a.txt"}}]},
  {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo MINI_SWE_AGENT_FINAL_OUTPUT; echo done"}}]}]}]}`

// TestSWEPerTaskCapsCountUnresolved: a swe task stopped by
// --max-tokens-per-rollout or --max-cost-per-rollout is unresolved (not an
// error, not pending), report.json's reason says the budget stopped it and
// names the cap, and --resume does not run it again.
func TestSWEPerTaskCapsCountUnresolved(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	m, url := startMetered(t, fakellm.Config{Scripts: mustScripts(t, sweLoopScript)})
	for _, tc := range []struct{ flag, value string }{
		{"--max-tokens-per-rollout", "300"},
		{"--max-cost-per-rollout", "0.5"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := []string{"swe", "--task", "loop swe", "--out", out, "--base-url", url, "--model", "m", "--sandbox", "local",
				"--progress", "none", "--price-in", fmt.Sprint(budgetPriceIn), "--price-out", fmt.Sprint(budgetPriceOut), tc.flag, tc.value}
			code, stdout, errs := hpSWE(t, args...)
			// One unresolved task of one: the default gate fails (exit 3).
			if code != 0 && code != 3 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, errs)
			}
			recs := catRecords(t, out)
			if len(recs) != 1 || recs[0]["outcome"] != "unresolved" {
				t.Fatalf("records %v", recs)
			}
			if calls := recs[0]["api_calls"].(float64); calls >= 7 {
				t.Errorf("%v calls: the cap did not stop the agent", calls)
			}
			var rep struct {
				Instances map[string]struct {
					Outcome string `json:"outcome"`
					Record  string `json:"record_outcome"`
					Reason  string `json:"reason"`
				} `json:"instances"`
			}
			b, err := os.ReadFile(filepath.Join(out, "report.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &rep); err != nil {
				t.Fatal(err)
			}
			if len(rep.Instances) != 1 {
				t.Fatalf("report.json instances %v", rep.Instances)
			}
			for id, in := range rep.Instances {
				if in.Outcome != "unresolved" || !strings.Contains(in.Reason, "budget") || !strings.Contains(in.Reason, strings.TrimPrefix(tc.flag, "--")) {
					t.Errorf("%s: outcome %s (record %s), reason %q: does not say the budget stopped it", id, in.Outcome, in.Record, in.Reason)
				}
			}
			before, _, _ := m.calls()
			if code, _, errs := hpSWE(t, append(args, "--resume")...); code != 0 && code != 3 {
				t.Errorf("resume: exit %d: %s", code, errs)
			}
			if after, _, _ := m.calls(); after != before {
				t.Errorf("resume ran the stopped task again: %d calls", after-before)
			}
			mustVerify(t, out)
		})
	}
}
