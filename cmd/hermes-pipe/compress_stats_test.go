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

	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// TestCompressStatisticsSumSummarySpend: statistics.json of a compress
// folder sums what the summary calls used and cost, not the usage and
// cost_usd the input records carry (kept in the output as they were): its
// cost equals compression_metrics.json's summarization cost, the ledger's
// spend and what the fake billed; a row passed through under target costs
// $0 and is counted priced. Its api_calls are the summary calls, not the
// input records' calls.
func TestCompressStatisticsSumSummarySpend(t *testing.T) {
	m, url := startMetered(t, fakellm.Config{SummaryWords: 40})
	const rows = 3
	withSpend := func(line string) string {
		// The input's own spend (e.g. what generating it cost): 9 calls,
		// 1000 tokens and $7 a row, which statistics.json must not count.
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		r["usage"] = map[string]any{"prompt_tokens": 900, "completion_tokens": 100, "total_tokens": 1000}
		r["cost_usd"] = 7.0
		r["api_calls"] = 9
		b, _ := json.Marshal(r)
		return string(b)
	}
	var lines []string
	for i := range rows {
		lines = append(lines, withSpend(trajLine("t"+strconv.Itoa(i), 12, 200)))
	}
	lines = append(lines, withSpend(trajLine("small", 1, 10)))
	in := writePrompts(t, lines...) // JSONL lines, trajectories here
	out := filepath.Join(t.TempDir(), "out")
	if code, _, errs := hpc(t, "compress", "--in", in, "--out", out, "--target-tokens", "1500", "--summary-tokens", "100",
		"--base-url", url, "--model", "m", "--progress", "none",
		"--price-in", fmt.Sprint(budgetPriceIn), "--price-out", fmt.Sprint(budgetPriceOut)); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	n, billed, _ := m.calls()
	if n < rows {
		t.Fatalf("%d summary calls for %d over-target rows", n, rows)
	}
	var cm struct {
		Summarization struct {
			Usage   schemas.Usage `json:"usage"`
			CostUSD *float64      `json:"cost_usd"`
		} `json:"summarization"`
	}
	readJSON(t, filepath.Join(out, "compression_metrics.json"), &cm)
	var st struct {
		APICalls int           `json:"api_calls"`
		Usage    schemas.Usage `json:"usage"`
		Cost     struct {
			TotalUSD        float64 `json:"total_usd"`
			PricedRecords   int     `json:"priced_records"`
			UnpricedRecords int     `json:"unpriced_records"`
		} `json:"cost"`
	}
	readJSON(t, filepath.Join(out, "statistics.json"), &st)
	if cm.Summarization.CostUSD == nil {
		t.Fatal("compression_metrics.json has no summarization cost")
	}
	sum := *cm.Summarization.CostUSD
	ledger := ledgerSpent(t, out)
	for name, v := range map[string]float64{"compression_metrics.json": sum, "ledger": ledger, "statistics.json": st.Cost.TotalUSD} {
		if math.Abs(v-billed) > 1e-9 || math.Round(v*100) != math.Round(billed*100) {
			t.Errorf("%s says $%.9f, the fake billed $%.9f", name, v, billed)
		}
	}
	if st.APICalls != n {
		t.Errorf("statistics.json api_calls %d, the fake answered %d summary calls (the inputs' own calls are 9 a row)", st.APICalls, n)
	}
	if st.Usage != cm.Summarization.Usage {
		t.Errorf("statistics.json usage %+v, compression_metrics.json summarization usage %+v", st.Usage, cm.Summarization.Usage)
	}
	if st.Cost.PricedRecords != rows+1 || st.Cost.UnpricedRecords != 0 {
		t.Errorf("priced %d, unpriced %d; want every row priced (the one under target at $0)", st.Cost.PricedRecords, st.Cost.UnpricedRecords)
	}
	// The input's spend is still in each record, unchanged.
	for _, r := range catRecords(t, out) {
		if r["cost_usd"] != 7.0 {
			t.Errorf("record %v: cost_usd %v, want the input's 7", r["id"], r["cost_usd"])
		}
	}
	if code, text, _ := hpc(t, "stats", out); code != 0 || !strings.Contains(text, fmt.Sprintf("$%.4f", billed)) {
		t.Errorf("stats exit %d does not show the summaries' spend $%.4f:\n%s", code, billed, text)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
