package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// killWhen starts bin with args and kills it with SIGKILL once ready says
// so (polled on the fake's counts, not on time), or lets it end by itself.
// It returns whether the process was killed.
func killWhen(t *testing.T, bin string, args []string, ready func() bool) bool {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = killedRunEnv(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(2 * time.Millisecond) {
		if ready() {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			return true
		}
		if processGone(cmd.Process.Pid) {
			err := cmd.Wait()
			if code := cmd.ProcessState.ExitCode(); code != 0 && code != exitBudget {
				t.Fatalf("run exit %d (%v): %s", code, err, stderr.String())
			}
			return false
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			t.Fatalf("the run stalled: %s", stderr.String())
		}
	}
}

// spendArgs are the arguments of a priced generate run of the loop prompts
// (seven calls a rollout) into out. Rows are committed only at the end of
// a run (--commit-interval 1h): a killed run leaves nothing in the ledger,
// the worst case for a cap that counted the ledger.
func spendArgs(prompts, out, url string, workers int, maxCost float64) []string {
	a := []string{"generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none",
		"--toolsets", "terminal", "--workers", fmt.Sprint(workers), "--commit-interval", "1h",
		"--price-in", fmt.Sprint(budgetPriceIn), "--price-out", fmt.Sprint(budgetPriceOut)}
	if maxCost > 0 {
		a = append(a, "--max-cost", fmt.Sprint(maxCost))
	}
	return a
}

// journalAfterKill checks the spend journal of out right after its kills-th
// kill: it counts every call the fake billed (each call's projected cost is
// journalled before it goes out, and the projection covers what the fake
// bills), and more only by the reservations open at each kill (at most one
// per worker: each worker makes one call at a time) at their projection.
func journalAfterKill(t *testing.T, out string, m *meteredFake, workers, kills int) {
	t.Helper()
	_, billed, _ := m.calls()
	sp, err := outdir.ReadSpend(out)
	if err != nil {
		t.Fatal(err)
	}
	most := largestReservation(t, out)
	if open := workers * kills; sp.USD < billed-1e-9 || sp.USD > billed+float64(open)*most+1e-9 {
		t.Errorf("after %d kills the spend journal holds $%.4f; the fake billed $%.4f, so it must hold that plus at most %d open reservations of $%.4f",
			kills, sp.USD, billed, open, most)
	}
}

// usedCap checks that the runs of out, stopped at the cap maxCost, were not
// stopped long before it. A call is refused only when it cannot fit even
// without the calls in flight, so the journal ends less than one
// reservation below the cap; it holds more than was billed only by the
// reservations open at the kills (open, at most one per worker a kill).
func usedCap(t *testing.T, out string, billed, maxCost float64, open int) {
	t.Helper()
	if r := largestReservation(t, out); billed < maxCost-float64(open+1)*r {
		t.Errorf("the fake billed $%.4f: the runs stopped more than %d reservations of $%.4f below the cap $%.4f", billed, open+1, r, maxCost)
	}
}

// largestReservation is the largest projected cost reserved in the spend
// journal of dir.
func largestReservation(t *testing.T, dir string) float64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, outdir.SpendFile))
	if err != nil {
		t.Fatal(err)
	}
	most := 0.0
	for _, line := range bytes.Split(data, []byte("\n")) {
		var l outdir.SpendLine
		if json.Unmarshal(line, &l) == nil && l.Reserve > 0 {
			most = max(most, l.USD)
		}
	}
	if most == 0 {
		t.Fatalf("no reservation in %s", outdir.SpendFile)
	}
	return most
}

// resumeAtCap runs a --resume of args that must stop at the cap (exit 5)
// and then another one, which must make no model call.
func resumeAtCap(t *testing.T, bin string, args []string, m *meteredFake) {
	t.Helper()
	res := exec.Command(bin, append(args, "--resume")...)
	b, err := res.CombinedOutput()
	if code := res.ProcessState.ExitCode(); code != exitBudget {
		t.Fatalf("resume after kill -9: exit %d (%v), want %d:\n%s", code, err, exitBudget, b)
	}
	n, _, _ := m.calls()
	again := exec.Command(bin, append(args, "--resume")...)
	b, _ = again.CombinedOutput()
	if code := again.ProcessState.ExitCode(); code != exitBudget {
		t.Fatalf("resume at the cap: exit %d, want %d:\n%s", code, exitBudget, b)
	}
	if n2, _, _ := m.calls(); n2 != n {
		t.Errorf("a resume at the cap made %d model calls", n2-n)
	}
}

// TestMaxCostCountsSpendInFlightAtKill: a generate run capped at 40 % of
// what the whole run costs, killed with SIGKILL at 20 % (nothing
// committed), and resumed with the same cap, spends in all (as the fake
// bills it) at most the cap plus one call per worker: the calls in flight
// at the kill are in the spend journal at their projected cost (reserved
// before they went out), and no call goes out whose projection does not fit
// under the cap. Before the journal the resume started from the empty
// ledger and spent the whole cap again (150 % of it); before reservations
// the bound was the cap plus two calls per worker. A further resume makes
// no model call.
func TestMaxCostCountsSpendInFlightAtKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	const workers, rows = 2, 10
	cfg := fakellm.Config{Latency: 30 * time.Millisecond, Scripts: mustScripts(t, loopScript)}
	prompts := loopPrompts(t, rows)

	// What the whole run costs, with its own fake.
	whole, wurl := startMetered(t, cfg)
	if code, _, errs := hp(t, spendArgs(prompts, filepath.Join(t.TempDir(), "whole"), wurl, workers, 0)...); code != 0 {
		t.Fatalf("uncapped run: exit %d: %s", code, errs)
	}
	_, total, _ := whole.calls()
	maxCost := 0.4 * total

	m, url := startMetered(t, cfg)
	out := filepath.Join(t.TempDir(), "out")
	args := spendArgs(prompts, out, url, workers, maxCost)
	if !killWhen(t, bin, args, func() bool { _, billed, _ := m.calls(); return billed >= 0.2*total }) {
		t.Fatal("the run ended before 20 % of its cost: the test proves nothing")
	}
	_, atKill, _ := m.calls()
	journalAfterKill(t, out, m, workers, 1)
	resumeAtCap(t, bin, args, m)
	n, billed, most := m.calls()
	t.Logf("whole run $%.4f, cap $%.4f, %d workers, killed at $%.4f, billed over the killed run and the resume $%.4f (%.0f %% of the cap, overshoot $%.4f; one call at most $%.4f) in %d calls",
		total, maxCost, workers, atKill, billed, 100*billed/maxCost, billed-maxCost, most, n)
	if billed > maxCost+workers*most {
		t.Errorf("the fake billed $%.4f over %d calls; the cap is $%.4f plus at most %d calls of $%.4f", billed, n, maxCost, workers, most)
	}
	usedCap(t, out, billed, maxCost, workers)
	if ledgerSpent(t, out) > billed+1e-9 {
		t.Errorf("the ledger holds more than was billed")
	}
	mustVerify(t, out)
}

// TestMaxCostSurvivesRepeatedKills: a capped generate run killed with
// SIGKILL six times, each time once it made six calls (long before a
// commit: the ledger stays empty, as for a crash-looping pod killed 1.5 s
// after each start), then resumed to the cap, spends in all at most the cap
// plus one call per worker (the acceptance allows one per worker per
// crash): every start counts what the killed ones spent and sent.
func TestMaxCostSurvivesRepeatedKills(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	const workers, kills, maxCost = 2, 6, 10.0
	m, url := startMetered(t, fakellm.Config{Latency: 30 * time.Millisecond, Scripts: mustScripts(t, loopScript)})
	out := filepath.Join(t.TempDir(), "out")
	args := spendArgs(loopPrompts(t, 40), out, url, workers, maxCost)
	for i := range kills {
		a := args
		if i > 0 {
			a = append(a, "--resume")
		}
		start, _, _ := m.calls()
		if !killWhen(t, bin, a, func() bool { n, _, _ := m.calls(); return n >= start+6 }) {
			t.Fatalf("run %d reached the cap before its kill: the test proves nothing", i+1)
		}
		journalAfterKill(t, out, m, workers, i+1)
	}
	if _, err := os.Stat(filepath.Join(out, outdir.LedgerFile)); err == nil && ledgerSpent(t, out) > 0 {
		t.Fatalf("the killed runs committed rows: the test does not show the spend of uncommitted rows")
	}
	_, afterKills, _ := m.calls()
	resumeAtCap(t, bin, args, m)
	n, billed, most := m.calls()
	t.Logf("cap $%v, %d workers, %d kills after $%.4f, billed $%.4f (%.0f %% of the cap, overshoot $%.4f; one call at most $%.4f) in %d calls",
		maxCost, workers, kills, afterKills, billed, 100*billed/maxCost, billed-maxCost, most, n)
	if bound := maxCost + float64(workers)*most; billed > bound {
		t.Errorf("the fake billed $%.4f over %d calls and %d kills; the cap is $%v plus at most %d calls of $%.4f",
			billed, n, kills, maxCost, workers, most)
	}
	if ledgerSpent(t, out) > billed+1e-9 {
		t.Errorf("the ledger holds more than was billed")
	}
	mustVerify(t, out)
}

// TestCompressMaxCostCountsSpendInFlightAtKill: compress's summary calls
// are reserved in the same journal: a run capped at 40 % of the whole run's
// summaries, killed at 20 % with nothing committed and resumed with the
// same cap, spends at most the cap plus one call per worker.
func TestCompressMaxCostCountsSpendInFlightAtKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	const workers, rows = 2, 30
	var lines []string
	for i := range rows {
		lines = append(lines, trajLine("t"+strconv.Itoa(i), 12, 200))
	}
	in := writePrompts(t, lines...)
	cfg := fakellm.Config{SummaryWords: 40, Latency: 30 * time.Millisecond}
	args := func(out, url string, maxCost float64) []string {
		a := []string{"compress", "--in", in, "--out", out, "--target-tokens", "1500", "--summary-tokens", "100",
			"--base-url", url, "--model", "m", "--progress", "none", "--workers", strconv.Itoa(workers), "--commit-interval", "1h",
			"--price-in", fmt.Sprint(budgetPriceIn), "--price-out", fmt.Sprint(budgetPriceOut)}
		if maxCost > 0 {
			a = append(a, "--max-cost", fmt.Sprint(maxCost))
		}
		return a
	}
	whole, wurl := startMetered(t, cfg)
	if code, _, errs := hpc(t, args(filepath.Join(t.TempDir(), "whole"), wurl, 0)...); code != 0 {
		t.Fatalf("uncapped run: exit %d: %s", code, errs)
	}
	_, total, _ := whole.calls()
	maxCost := 0.4 * total

	m, url := startMetered(t, cfg)
	out := filepath.Join(t.TempDir(), "out")
	a := args(out, url, maxCost)
	if !killWhen(t, bin, a, func() bool { _, billed, _ := m.calls(); return billed >= 0.2*total }) {
		t.Fatal("the run ended before 20 % of its cost: the test proves nothing")
	}
	journalAfterKill(t, out, m, workers, 1)
	resumeAtCap(t, bin, a, m)
	n, billed, most := m.calls()
	t.Logf("whole run $%.4f, cap $%.4f, %d workers, billed $%.4f (%.0f %% of the cap, overshoot $%.4f; one call at most $%.4f) in %d calls",
		total, maxCost, workers, billed, 100*billed/maxCost, billed-maxCost, most, n)
	if billed > maxCost+workers*most {
		t.Errorf("the fake billed $%.4f over %d calls; the cap is $%.4f plus at most %d calls of $%.4f", billed, n, maxCost, workers, most)
	}
	usedCap(t, out, billed, maxCost, workers)
	mustVerify(t, out)
}

// TestSWEMaxCostCountsSpendAtKill: swe's agent calls spend through the
// same journal: a task killed with SIGKILL after three of its seven calls
// (nothing committed) leaves them in spend.jsonl, and the call in flight at
// the kill at its projection, so a --resume capped at what the fake billed
// is at the cap at once and makes no model call; before the journal it
// started from the empty ledger and ran the task again, before
// reservations it had to be capped one call lower.
func TestSWEMaxCostCountsSpendAtKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	bin := buildBinary(t)
	m, url := startMetered(t, fakellm.Config{Latency: 50 * time.Millisecond, Scripts: mustScripts(t, sweLoopScript)})
	out := filepath.Join(t.TempDir(), "out")
	args := []string{"swe", "--task", "loop swe", "--out", out, "--base-url", url, "--model", "m", "--sandbox", "local",
		"--progress", "none", "--price-in", fmt.Sprint(budgetPriceIn), "--price-out", fmt.Sprint(budgetPriceOut)}
	if !killWhen(t, bin, args, func() bool { n, _, _ := m.calls(); return n >= 3 }) {
		t.Fatal("the task ended before its third call: the test proves nothing")
	}
	journalAfterKill(t, out, m, 1, 1)
	n, billed, _ := m.calls()
	if n >= 7 {
		t.Fatalf("%d calls before the kill: the task was done", n)
	}
	res := exec.Command(bin, append(args, "--resume", "--max-cost", fmt.Sprint(billed))...)
	b, err := res.CombinedOutput()
	if code := res.ProcessState.ExitCode(); code != exitBudget {
		t.Fatalf("resume capped at what the killed run spent: exit %d (%v), want %d:\n%s", code, err, exitBudget, b)
	}
	if n2, _, _ := m.calls(); n2 != n {
		t.Errorf("the resume made %d model calls with the cap already spent", n2-n)
	}
	mustVerify(t, out)
}
