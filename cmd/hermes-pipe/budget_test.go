package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// loopScript makes every "loop X" rollout call the model seven times: six
// terminal calls, then an answer.
const loopScript = `{"scripts": [{"match": "^loop (.*)$", "steps": [
  {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo {{m1}} 1"}}]},
  {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo {{m1}} 2"}}]},
  {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo {{m1}} 3"}}]},
  {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo {{m1}} 4"}}]},
  {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo {{m1}} 5"}}]},
  {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo {{m1}} 6"}}]},
  {"content": "looped {{m1}}"}]}]}`

// Prices of the budget tests, USD per million tokens (--price-in/--price-out).
const (
	budgetPriceIn  = 2000.0
	budgetPriceOut = 4000.0
)

// callCost is what one call's usage costs at the test prices, computed here
// independently of pipeline/cost.
func callCost(prompt, completion float64) float64 {
	return (prompt*budgetPriceIn + completion*budgetPriceOut) / 1e6
}

// meteredFake is fakellm behind a handler that keeps the cost of every
// answered chat call, as the fake reported its usage.
type meteredFake struct {
	fake  *fakellm.Server
	mu    sync.Mutex
	costs []float64
}

func (m *meteredFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	m.fake.ServeHTTP(rec, r)
	var resp struct {
		Usage *struct {
			PromptTokens     float64 `json:"prompt_tokens"`
			CompletionTokens float64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if strings.HasSuffix(r.URL.Path, "/chat/completions") && rec.Code == http.StatusOK &&
		json.Unmarshal(rec.Body.Bytes(), &resp) == nil && resp.Usage != nil {
		m.mu.Lock()
		m.costs = append(m.costs, callCost(resp.Usage.PromptTokens, resp.Usage.CompletionTokens))
		m.mu.Unlock()
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

// calls returns how many calls were answered, their total cost and the
// most expensive one.
func (m *meteredFake) calls() (n int, total, most float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.costs {
		total += c
		most = max(most, c)
	}
	return len(m.costs), total, most
}

func startMetered(t *testing.T, cfg fakellm.Config) (*meteredFake, string) {
	t.Helper()
	m := &meteredFake{fake: fakellm.New(cfg)}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return m, srv.URL + "/v1"
}

// ledgerSpent sums the cost_usd of every ledger line of dir.
func ledgerSpent(t *testing.T, dir string) float64 {
	t.Helper()
	data, _, err := outdir.ReadLedger(filepath.Join(dir, outdir.LedgerFile))
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	if _, err := outdir.Scan(data, func(_ int, l *outdir.Line) error { sum += l.CostUSD; return nil }); err != nil {
		t.Fatal(err)
	}
	return sum
}

// statsTotal reads statistics.json's cost total.
func statsTotal(t *testing.T, dir string) float64 {
	t.Helper()
	var st struct {
		Cost struct {
			TotalUSD float64 `json:"total_usd"`
		} `json:"cost"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "statistics.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st.Cost.TotalUSD
}

// checkRecordCosts checks every live record's cost_usd against its usage at
// the test prices and that they sum to statistics.json's total to the cent;
// it returns the outcomes counted.
func checkRecordCosts(t *testing.T, dir string) map[string]int {
	t.Helper()
	outcomes := map[string]int{}
	sum := 0.0
	for _, r := range catRecords(t, dir) {
		outcomes[r["outcome"].(string)]++
		u := r["usage"].(map[string]any)
		want := callCost(u["prompt_tokens"].(float64), u["completion_tokens"].(float64))
		got, ok := r["cost_usd"].(float64)
		if !ok || math.Abs(got-want) > 1e-9 {
			t.Errorf("record %v: cost_usd %v, want %.9f", r["key"], r["cost_usd"], want)
		}
		sum += got
	}
	if st := statsTotal(t, dir); math.Round(st*100) != math.Round(sum*100) || math.Abs(st-sum) > 1e-9 {
		t.Errorf("statistics.json total $%.9f, records sum to $%.9f", st, sum)
	}
	return outcomes
}

func loopPrompts(t *testing.T, n int) string {
	var lines []string
	for i := range n {
		lines = append(lines, fmt.Sprintf(`{"prompt": "loop row%d"}`, i))
	}
	return writePrompts(t, lines...)
}

// TestMaxCostStopsWithinOvershootAndResumes: a run with --max-cost stops
// at the first model call whose projected cost does not fit under the cap
// even once the calls in flight end (until then it waits for them), so it
// ends within one reservation below the cap and passes it by at most one
// call per worker (only where a call cost more than projected); it exits 5
// saying how to go on, and commits every call's spend (the ledger sums to
// what the fake billed, to the cent); records' cost_usd match prices ×
// usage and sum to statistics.json. A --resume with the same cap makes no
// model call; one with a higher cap finishes every row.
func TestMaxCostStopsWithinOvershootAndResumes(t *testing.T) {
	// A rollout's first call is projected at about $1.4 (its tool
	// definitions and a 256-token completion at the test prices), the
	// others at about $0.4: the cap leaves room for every worker's first
	// call and some twenty more.
	const workers, rows, maxCost = 3, 12, 8.0
	m, url := startMetered(t, fakellm.Config{Scripts: mustScripts(t, loopScript)})
	prompts := loopPrompts(t, rows)
	out := filepath.Join(t.TempDir(), "out")
	args := func(cap string, resume bool) []string {
		a := []string{"generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none",
			"--toolsets", "terminal", "--workers", fmt.Sprint(workers), "--price-in", fmt.Sprint(budgetPriceIn),
			"--price-out", fmt.Sprint(budgetPriceOut), "--max-cost", cap}
		if resume {
			a = append(a, "--resume")
		}
		return a
	}
	code, _, errs := hp(t, args(fmt.Sprint(maxCost), false)...)
	if code != exitBudget {
		t.Fatalf("exit %d, want %d: %s", code, exitBudget, errs)
	}
	if !strings.Contains(errs, "--resume --max-cost HIGHER") || !strings.Contains(errs, "run budget reached: $") {
		t.Errorf("the message does not give the spend and how to go on:\n%s", errs)
	}
	n, billed, most := m.calls()
	spent := ledgerSpent(t, out)
	if math.Abs(spent-billed) > 1e-9 {
		t.Errorf("the ledger holds $%.9f, the fake billed $%.9f over %d calls", spent, billed, n)
	}
	if under := maxCost - spent; under > largestReservation(t, out) {
		t.Errorf("stopped at $%.6f, more than a reservation of at most $%.6f below the cap $%v", spent, largestReservation(t, out), maxCost)
	}
	if over := spent - maxCost; over > workers*most {
		t.Errorf("overshoot $%.6f exceeds %d calls of at most $%.6f", over, workers, most)
	}
	t.Logf("cap $%v, %d workers: spent $%.4f in %d calls (one at most $%.4f, the largest reservation $%.4f)", maxCost, workers, spent, n, most, largestReservation(t, out))
	if n >= rows*7 {
		t.Fatalf("all %d calls were made: the cap of $%v did not stop the run (spent $%.4f)", n, maxCost, spent)
	}
	outcomes := checkRecordCosts(t, out)
	if outcomes["budget_paused"] == 0 {
		t.Errorf("no rollout was stopped in flight (outcomes %v)", outcomes)
	}
	mustVerify(t, out)

	// The same cap again: no model call, exit 5 at once.
	code, _, errs = hp(t, args(fmt.Sprint(maxCost), true)...)
	if code != exitBudget {
		t.Fatalf("resume with the same cap: exit %d: %s", code, errs)
	}
	if n2, _, _ := m.calls(); n2 != n {
		t.Errorf("resume with the same cap made %d model calls", n2-n)
	}

	// A higher cap finishes the run; paused rows are redone.
	code, _, errs = hp(t, args("1000", true)...)
	if code != 0 {
		t.Fatalf("resume with a higher cap: exit %d: %s", code, errs)
	}
	outcomes = checkRecordCosts(t, out)
	if outcomes["completed"] != rows {
		t.Errorf("outcomes %v, want %d completed", outcomes, rows)
	}
	_, billed, _ = m.calls()
	if spent := ledgerSpent(t, out); math.Abs(spent-billed) > 1e-9 {
		t.Errorf("after the resumes the ledger holds $%.9f, the fake billed $%.9f", spent, billed)
	}
	mustVerify(t, out)
}

// TestMaxCostSurvivesKillNine: a run killed with SIGKILL mid-run and
// resumed with the same cap stops at the cap counted over both runs (what
// the fake billed, within one call per worker), and a further --resume
// makes no model call.
func TestMaxCostSurvivesKillNine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	const maxCost = 20.0 // about ten of the twenty rollouts
	m, url := startMetered(t, fakellm.Config{Latency: 20 * time.Millisecond, Scripts: mustScripts(t, loopScript)})
	out := filepath.Join(t.TempDir(), "out")
	base := []string{"generate", "--prompts", loopPrompts(t, 20), "--out", out, "--base-url", url, "--model", "m", "--progress", "none",
		"--toolsets", "terminal", "--workers", "2", "--commit-interval", "50ms", "--price-in", fmt.Sprint(budgetPriceIn),
		"--price-out", fmt.Sprint(budgetPriceOut), "--max-cost", fmt.Sprint(maxCost)}
	cmd := exec.Command(bin, base...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill once some rollouts are committed and before the cap: wait on
	// the folder's committed spend, not on time.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if s := ledgerSpentQuiet(out); s > maxCost/8 {
			break
		}
		if processGone(cmd.Process.Pid) || time.Now().After(deadline) {
			t.Fatalf("the run ended or stalled before committing an eighth of the cap: %s", stderr.String())
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if s := ledgerSpent(t, out); s >= maxCost {
		t.Fatalf("the cap was reached before the kill ($%.4f): the test proves nothing", s)
	}

	res := exec.Command(bin, append(base, "--resume")...)
	b, err := res.CombinedOutput()
	if code := res.ProcessState.ExitCode(); code != exitBudget {
		t.Fatalf("resume after kill -9: exit %d (%v), want %d:\n%s", code, err, exitBudget, b)
	}
	// What was spent is what the fake billed: the spend journal counts the
	// calls of rows the kill left uncommitted, so the ledger may hold less,
	// and those in flight at the kill at their projection (at most one per
	// worker). No call goes out whose projection does not fit under the
	// cap, and a call is refused only when it cannot fit even once the
	// calls in flight end: the journal ends within one reservation below
	// the cap, and the bill passes it by at most one call per worker.
	_, billed, most := m.calls()
	if r := largestReservation(t, out); billed < maxCost-3*r || billed-maxCost > 2*most {
		t.Errorf("billed $%.6f over both runs; want the cap $%v less at most 3 reservations of $%.6f, plus at most 2 calls of $%.6f", billed, maxCost, r, most)
	}
	if spent := ledgerSpent(t, out); spent > billed+1e-9 {
		t.Errorf("the ledger holds $%.6f, more than the $%.6f billed", spent, billed)
	}
	before, _, _ := m.calls()
	again := exec.Command(bin, append(base, "--resume")...)
	b, _ = again.CombinedOutput()
	if code := again.ProcessState.ExitCode(); code != exitBudget {
		t.Fatalf("second resume: exit %d, want %d:\n%s", code, exitBudget, b)
	}
	if after, _, _ := m.calls(); after != before {
		t.Errorf("a resume with the cap reached made %d model calls", after-before)
	}
	mustVerify(t, out)
}

// ledgerSpentQuiet is ledgerSpent for a folder being written: 0 on any error.
func ledgerSpentQuiet(dir string) float64 {
	data, _, err := outdir.ReadLedger(filepath.Join(dir, outdir.LedgerFile))
	if err != nil {
		return 0
	}
	sum := 0.0
	outdir.Scan(data, func(_ int, l *outdir.Line) error { sum += l.CostUSD; return nil })
	return sum
}

// TestPerRolloutCapsEndBudgetExceeded: --max-tokens-per-rollout and
// --max-cost-per-rollout end each rollout with budget_exceeded after at most
// one call past the cap, the trajectory so far kept; --resume does not run
// them again; a cost cap without a price is a usage error.
func TestPerRolloutCapsEndBudgetExceeded(t *testing.T) {
	m, url := startMetered(t, fakellm.Config{Scripts: mustScripts(t, loopScript)})
	prompts := loopPrompts(t, 3)
	for _, tc := range []struct {
		flag, value string
		over        func(r map[string]any) bool // the cap is reached by the calls made
	}{
		{"--max-tokens-per-rollout", "300", func(r map[string]any) bool { return tokens(r) >= 300 }},
		{"--max-cost-per-rollout", "0.5", func(r map[string]any) bool { return r["cost_usd"].(float64) >= 0.5 }},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := []string{"generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none",
				"--toolsets", "terminal", "--price-in", fmt.Sprint(budgetPriceIn), "--price-out", fmt.Sprint(budgetPriceOut), tc.flag, tc.value}
			code, _, errs := hp(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			for _, r := range catRecords(t, out) {
				if r["outcome"] != "budget_exceeded" {
					t.Fatalf("record %v: outcome %v (%v), want budget_exceeded", r["key"], r["outcome"], r["error"])
				}
				calls := r["api_calls"].(float64)
				if !tc.over(r) || calls >= 7 {
					t.Errorf("record %v: %v calls, usage %v, cost %v: not stopped at the cap", r["key"], calls, r["usage"], r["cost_usd"])
				}
				// The trajectory so far: human, then a gpt and a tool turn per call.
				if conv := r["conversations"].([]any); len(conv) < 1+2*int(calls) {
					t.Errorf("record %v: %d turns for %v calls", r["key"], len(conv), calls)
				}
				if !strings.Contains(r["error"].(string), strings.TrimPrefix(tc.flag, "--")) {
					t.Errorf("record %v: error %q does not name the cap", r["key"], r["error"])
				}
			}
			if code, text, _ := hp(t, "stats", out); code != 0 || !strings.Contains(text, "budget_exceeded") {
				t.Errorf("stats exit %d does not count budget_exceeded:\n%s", code, text)
			}
			before, _, _ := m.calls()
			if code, _, errs := hp(t, append(args, "--resume")...); code != 0 || !strings.Contains(errs, "nothing to do") {
				t.Errorf("resume: exit %d: %s", code, errs)
			}
			if after, _, _ := m.calls(); after != before {
				t.Errorf("resume ran budget_exceeded rollouts again: %d calls", after-before)
			}
			mustVerify(t, out)
		})
	}
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", filepath.Join(t.TempDir(), "o"), "--base-url", url,
		"--model", "m", "--max-cost-per-rollout", "1")
	if code != exitUsage || !strings.Contains(errs, "needs the price") {
		t.Errorf("a cost cap without a price: exit %d: %s", code, errs)
	}
	code, _, errs = hp(t, "generate", "--prompts", prompts, "--out", filepath.Join(t.TempDir(), "o"), "--base-url", url,
		"--model", "m", "--max-cost", "1")
	if code != exitUsage || !strings.Contains(errs, "needs the price") {
		t.Errorf("--max-cost without a price: exit %d: %s", code, errs)
	}
}

func tokens(r map[string]any) float64 {
	u := r["usage"].(map[string]any)
	return u["prompt_tokens"].(float64) + u["completion_tokens"].(float64)
}
