package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// TestCompressPerRowCaps: compress's --max-tokens-per-rollout and
// --max-cost-per-rollout cap one row's summary calls. A row that needs a
// second summary once its first reached the cap stops summarising, keeps its
// original conversation byte for byte, ends budget_exceeded (counted in
// compression_metrics.json), and --resume does not summarise it again; a
// row under target makes no call and passes through byte-identical.
func TestCompressPerRowCaps(t *testing.T) {
	// Summaries far longer than --summary-tokens: one pass leaves each
	// over-target row over budget, so it needs a second summary.
	m, url := startMetered(t, fakellm.Config{SummaryWords: 600})
	const rows = 3
	var lines []string
	for i := range rows {
		lines = append(lines, trajLine("t"+strconv.Itoa(i), 12, 200))
	}
	lines = append(lines, trajLine("small", 1, 10))
	// t0 is a hermes-pipe record (key and outcome): its record outcome
	// becomes compress's, the input's kept as input_outcome.
	var keyed map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &keyed); err != nil {
		t.Fatal(err)
	}
	keyed["key"], keyed["outcome"], keyed["prompt_index"], keyed["sample"] = "row:0:t0#0", "completed", 0, 0
	b, _ := json.Marshal(keyed)
	lines[0] = string(b)
	in := writePrompts(t, lines...) // JSONL lines, trajectories here
	orig := map[string]string{}
	for _, l := range lines {
		var r struct {
			ID   string          `json:"id"`
			Conv json.RawMessage `json:"conversations"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		orig[r.ID] = string(r.Conv)
	}
	base := func(out string) []string {
		return []string{"compress", "--in", in, "--out", out, "--target-tokens", "1500", "--summary-tokens", "100",
			"--base-url", url, "--model", "m", "--progress", "none", "--price-in", fmt.Sprint(budgetPriceIn), "--price-out", fmt.Sprint(budgetPriceOut)}
	}
	type row struct {
		ID      string          `json:"id"`
		Outcome string          `json:"outcome"`
		Conv    json.RawMessage `json:"conversations"`
		Metrics struct {
			Input   string   `json:"input_outcome"`
			Calls   int      `json:"summarization_api_calls"`
			Outcome string   `json:"outcome"`
			Cost    *float64 `json:"summary_cost_usd"`
			Error   string   `json:"error"`
		} `json:"compression_metrics"`
	}
	read := func(out string) map[string]row {
		t.Helper()
		got := map[string]row{}
		for _, r := range catRecords(t, out) {
			b, _ := json.Marshal(r)
			var v row
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			got[v.ID] = v
		}
		return got
	}

	// Without a cap every over-target row makes at least two calls.
	free := filepath.Join(t.TempDir(), "free")
	if code, _, errs := hpc(t, base(free)...); code != 0 && code != 3 {
		t.Fatalf("uncapped: exit %d: %s", code, errs)
	}
	for id, r := range read(free) {
		if id != "small" && r.Metrics.Calls < 2 {
			t.Fatalf("uncapped row %s made %d summary calls: the capped run below proves nothing", id, r.Metrics.Calls)
		}
	}

	for _, tc := range []struct{ flag, value string }{
		{"--max-tokens-per-rollout", "1"},
		{"--max-cost-per-rollout", "0.000001"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := append(base(out), tc.flag, tc.value)
			if code, _, errs := hpc(t, args...); code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			got := read(out)
			if len(got) != rows+1 {
				t.Fatalf("%d records, want %d", len(got), rows+1)
			}
			for id, r := range got {
				if id == "small" {
					if r.Metrics.Calls != 0 || string(r.Conv) != orig[id] {
						t.Errorf("small (under target, passed through): %d calls, conversation changed: %v", r.Metrics.Calls, string(r.Conv) != orig[id])
					}
					continue
				}
				if r.Metrics.Outcome != "budget_exceeded" {
					t.Errorf("%s: outcome %s, want budget_exceeded", id, r.Metrics.Outcome)
				}
				if id == "t0" && (r.Outcome != "budget_exceeded" || r.Metrics.Input != "completed") {
					t.Errorf("t0: record outcome %q, input_outcome %q; want budget_exceeded, completed", r.Outcome, r.Metrics.Input)
				}
				if r.Metrics.Calls != 1 {
					t.Errorf("%s: %d summary calls, want 1 (the cap is reached by the first)", id, r.Metrics.Calls)
				}
				if string(r.Conv) != orig[id] {
					t.Errorf("%s: the original conversation was not kept", id)
				}
				if !strings.Contains(r.Metrics.Error, strings.TrimPrefix(tc.flag, "--")) {
					t.Errorf("%s: error %q does not name the cap", id, r.Metrics.Error)
				}
				if r.Metrics.Cost == nil || *r.Metrics.Cost <= 0 {
					t.Errorf("%s: the call made is not priced: %v", id, r.Metrics.Cost)
				}
			}
			var cm struct {
				Outcomes map[string]int `json:"outcomes"`
			}
			raw, err := os.ReadFile(filepath.Join(out, "compression_metrics.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &cm); err != nil {
				t.Fatal(err)
			}
			if cm.Outcomes["budget_exceeded"] != rows {
				t.Errorf("compression_metrics.json outcomes %v, want %d budget_exceeded", cm.Outcomes, rows)
			}
			before, _, _ := m.calls()
			if code, _, errs := hpc(t, append(args, "--resume")...); code != 0 {
				t.Errorf("resume: exit %d: %s", code, errs)
			}
			if after, _, _ := m.calls(); after != before {
				t.Errorf("resume summarised budget_exceeded rows again: %d calls", after-before)
			}
			mustVerify(t, out)
		})
	}
}
