package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// TestCompressMaxCost: compress keeps the run's --max-cost like generate.
// Summary calls stop at the first whose projected cost does not fit under
// the cap (overshoot at most one call per worker), the rows not summarised stay pending, the command exits
// 5, every answered call's spend is in the ledger, a --resume with the same
// cap makes no call and one with a higher cap finishes the run with every
// over-target row summarised exactly once.
func TestCompressMaxCost(t *testing.T) {
	const rows, workers = 12, 2
	m, url := startMetered(t, fakellm.Config{SummaryWords: 40})
	var lines []string
	for i := range rows {
		lines = append(lines, trajLine("t"+strconv.Itoa(i), 12, 200))
	}
	in := writePrompts(t, lines...) // JSONL lines, trajectories here
	out := filepath.Join(t.TempDir(), "out")
	args := func(cap float64, resume bool) []string {
		a := []string{"compress", "--in", in, "--out", out, "--target-tokens", "1500", "--summary-tokens", "100",
			"--base-url", url, "--model", "m", "--progress", "none", "--workers", strconv.Itoa(workers),
			"--price-in", fmt.Sprint(budgetPriceIn), "--price-out", fmt.Sprint(budgetPriceOut), "--max-cost", fmt.Sprint(cap)}
		if resume {
			a = append(a, "--resume")
		}
		return a
	}
	// Price a first call to set a cap of about three calls.
	probe := filepath.Join(t.TempDir(), "probe.jsonl")
	if err := os.WriteFile(probe, []byte(lines[0]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := hpc(t, "compress", "--in", probe, "--out", filepath.Join(t.TempDir(), "p"), "--target-tokens", "1500",
		"--summary-tokens", "100", "--base-url", url, "--model", "m", "--progress", "none"); code != 0 {
		t.Fatalf("probe: exit %d: %s", code, errs)
	}
	_, one, _ := m.calls()
	if one <= 0 {
		t.Fatal("the fake reported no usage")
	}
	// A call is projected at its prompt and every completion token it
	// allows, more than it costs: the cap leaves room for some eight.
	maxCost := 8.5 * one

	code, _, errs := hpc(t, args(maxCost, false)...)
	if code != exitBudget {
		t.Fatalf("exit %d, want %d: %s", code, exitBudget, errs)
	}
	if !strings.Contains(errs, "--resume --max-cost HIGHER") {
		t.Errorf("the message does not say how to go on:\n%s", errs)
	}
	n, billed, most := m.calls()
	n, billed = n-1, billed-one // the probe's call
	spent := ledgerSpent(t, out)
	if math.Abs(spent-billed) > 1e-9 {
		t.Errorf("the ledger holds $%.9f, the fake billed $%.9f over %d calls", spent, billed, n)
	}
	if r := largestReservation(t, out); spent < maxCost-r || spent-maxCost > workers*most {
		t.Errorf("stopped at $%.6f with a cap of $%.6f (at most a reservation of $%.6f below, %d calls of $%.6f above)", spent, maxCost, r, workers, most)
	}
	if n >= rows {
		t.Fatalf("%d calls for %d rows: the cap did not stop the run", n, rows)
	}

	before, _, _ := m.calls()
	if code, _, errs := hpc(t, args(maxCost, true)...); code != exitBudget {
		t.Fatalf("resume with the same cap: exit %d: %s", code, errs)
	}
	if after, _, _ := m.calls(); after != before {
		t.Errorf("a resume with the cap reached made %d model calls", after-before)
	}

	if code, _, errs := hpc(t, args(100*maxCost, true)...); code != 0 {
		t.Fatalf("resume with a higher cap: exit %d: %s", code, errs)
	}
	total, _, _ := m.calls()
	if total-1 != rows {
		t.Errorf("%d summary calls for %d over-target rows: some row was summarised twice or not at all", total-1, rows)
	}
	recs := catRecords(t, out)
	if len(recs) != rows {
		t.Fatalf("%d records, want %d", len(recs), rows)
	}
	var cm struct {
		Summarization struct {
			CostUSD *float64 `json:"cost_usd"`
		} `json:"summarization"`
	}
	raw, err := os.ReadFile(filepath.Join(out, "compression_metrics.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &cm); err != nil {
		t.Fatal(err)
	}
	_, all, _ := m.calls()
	if c := cm.Summarization.CostUSD; c == nil || math.Abs(*c-(all-one)) > 1e-9 || math.Abs(ledgerSpent(t, out)-(all-one)) > 1e-9 {
		t.Errorf("compression_metrics.json summarization cost %v, ledger $%.9f, billed $%.9f", c, ledgerSpent(t, out), all-one)
	}
}
