package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// sleepScript makes every "loop X" rollout's first call ask for a terminal
// command that outlasts any test: only the --grace cancel can end it. The
// call's reply reasons at length (400 words: 400 completion tokens), more
// than a first call's projected completion (256 tokens): the call costs
// more than was reserved for it.
var sleepScript = `{"scripts": [{"match": "^loop (.*)$", "steps": [
  {"reasoning": "` + strings.TrimSpace(strings.Repeat("think ", 400)) + `",
   "tool_calls": [{"name": "terminal", "arguments": {"command": "sleep 600", "timeout": 900}}]},
  {"content": "slept {{m1}}"}]}]}`

// switchFake serves whichever metered fake is current, so a test can make
// the model answer differently on --resume.
type switchFake struct{ cur atomic.Pointer[meteredFake] }

func (s *switchFake) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.cur.Load().ServeHTTP(w, r) }

// TestMaxCostGraceCancelsALongToolCall: --max-cost is reached by a
// rollout's first call (it cost more than projected), whose tool call then
// sleeps far past --grace. After
// the grace the rollout is cancelled and committed as budget_paused, the
// command exits 5, and --resume with a higher cap runs it again to the end.
func TestMaxCostGraceCancelsALongToolCall(t *testing.T) {
	sleeper := &meteredFake{fake: fakellm.New(fakellm.Config{Scripts: mustScripts(t, sleepScript)})}
	looper := &meteredFake{fake: fakellm.New(fakellm.Config{Scripts: mustScripts(t, loopScript)})}
	sw := &switchFake{}
	sw.cur.Store(sleeper)
	srv := httptest.NewServer(sw)
	t.Cleanup(srv.Close)
	prompts := loopPrompts(t, 1)
	out := filepath.Join(t.TempDir(), "out")
	args := func(cap string, resume bool) []string {
		a := []string{"generate", "--prompts", prompts, "--out", out, "--base-url", srv.URL + "/v1", "--model", "m", "--progress", "none",
			"--toolsets", "terminal", "--sandbox", "local", "--price-in", fmt.Sprint(budgetPriceIn), "--price-out", fmt.Sprint(budgetPriceOut),
			"--max-cost", cap, "--grace", "1s"}
		if resume {
			a = append(a, "--resume")
		}
		return a
	}
	// The first call is projected at about $1.38 (its prompt and tools, a
	// 256-token completion) and costs about $1.65 (400 completion tokens):
	// it fits under a cap of $1.5 and reaches it.
	code, _, errs := hp(t, args("1.5", false)...)
	if code != exitBudget {
		t.Fatalf("exit %d, want %d: %s", code, exitBudget, errs)
	}
	if n, _, _ := sleeper.calls(); n != 1 {
		t.Errorf("%d model calls, want 1 (the cap was reached by the first)", n)
	}
	recs := catRecords(t, out)
	if len(recs) != 1 || recs[0]["outcome"] != "budget_paused" {
		t.Fatalf("records %v", recs)
	}
	if e, _ := recs[0]["error"].(string); !strings.Contains(e, "--grace") {
		t.Errorf("error %q does not say the grace passed", e)
	}
	// The paused rollout's spend is committed: the cap holds across resumes.
	if _, billed, _ := sleeper.calls(); ledgerSpent(t, out) < billed-1e-9 {
		t.Errorf("the ledger holds $%.6f, the fake billed $%.6f", ledgerSpent(t, out), billed)
	}
	mustVerify(t, out)

	sw.cur.Store(looper)
	code, _, errs = hp(t, args("1000", true)...)
	if code != 0 {
		t.Fatalf("resume with a higher cap: exit %d: %s", code, errs)
	}
	recs = catRecords(t, out)
	if len(recs) != 1 || recs[0]["outcome"] != "completed" {
		t.Fatalf("after resume: records %v", recs)
	}
	if n, _, _ := looper.calls(); n != 7 {
		t.Errorf("the resume made %d calls, want the 7 of a whole rollout", n)
	}
	mustVerify(t, out)
}
