package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// TestGenerateCostsFromPriceFile: every record's cost_usd equals its usage
// at the sample file's prices, computed here independently, and the records
// sum to statistics.json's total; without a price the cost is null, never 0,
// and the run says so once.
func TestGenerateCostsFromPriceFile(t *testing.T) {
	url := startFake(t, fakellm.Config{}, echoScript)
	prompts := writePrompts(t, `{"prompt": "echo one"}`, `{"prompt": "echo two"}`, `{"prompt": "echo three"}`)
	prices := filepath.Join("..", "..", "datasets", "prices", "sample-2026-12-01.json")
	out := filepath.Join(t.TempDir(), "out")
	// "demo" in the sample: 0.5 in, 1.5 out, 0.25 cached, USD per 1M tokens.
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "demo", "--progress", "none", "--prices", prices)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.Contains(errs, "costs unknown") {
		t.Errorf("priced run says costs are unknown: %s", errs)
	}
	sum, cached := 0.0, 0.0
	for _, r := range catRecords(t, out) {
		u := r["usage"].(map[string]any)
		p, c, cp := u["prompt_tokens"].(float64), u["completion_tokens"].(float64), u["cached_prompt_tokens"]
		if cp == nil {
			t.Fatalf("record %v: no cached_prompt_tokens although the server reports them", r["key"])
		}
		cached += cp.(float64)
		want := ((p-cp.(float64))*0.5 + cp.(float64)*0.25 + c*1.5) / 1e6
		got, ok := r["cost_usd"].(float64)
		if !ok || math.Abs(got-want) > 1e-12 {
			t.Errorf("record %v: cost_usd %v, want %.12f", r["key"], r["cost_usd"], want)
		}
		sum += got
	}
	if cached == 0 {
		t.Error("no cached prompt tokens counted over three two-call rollouts")
	}
	var st struct {
		Cost struct {
			TotalUSD      float64 `json:"total_usd"`
			PricedRecords int     `json:"priced_records"`
		} `json:"cost"`
	}
	b, err := os.ReadFile(filepath.Join(out, "statistics.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.Cost.PricedRecords != 3 || math.Abs(st.Cost.TotalUSD-sum) > 1e-12 {
		t.Errorf("statistics cost %+v; want 3 records, total %.12f", st.Cost, sum)
	}
	if code, text, _ := hp(t, "stats", out); code != 0 || !strings.Contains(text, "spend") || !strings.Contains(text, "per 1k rows") {
		t.Errorf("stats exit %d does not show the spend:\n%s", code, text)
	}

	// A model the file does not price: null costs and one line saying so.
	out2 := filepath.Join(t.TempDir(), "out")
	code, _, errs = hp(t, "generate", "--prompts", prompts, "--out", out2, "--base-url", url, "--model", "unpriced-model", "--progress", "none", "--prices", prices)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if n := strings.Count(errs, "costs unknown"); n != 1 {
		t.Errorf("%d 'costs unknown' lines, want 1:\n%s", n, errs)
	}
	for _, r := range catRecords(t, out2) {
		if v, present := r["cost_usd"]; !present || v != nil {
			t.Errorf("record %v: cost_usd %v (present %v), want null", r["key"], v, present)
		}
	}

	// --price-in/--price-out override the file for --model.
	out3 := filepath.Join(t.TempDir(), "out")
	code, _, errs = hp(t, "generate", "--prompts", prompts, "--out", out3, "--base-url", url, "--model", "unpriced-model", "--progress", "none", "--price-in", "2", "--price-out", "8")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, r := range catRecords(t, out3) {
		u := r["usage"].(map[string]any)
		want := (u["prompt_tokens"].(float64)*2 + u["completion_tokens"].(float64)*8) / 1e6
		if got, _ := r["cost_usd"].(float64); math.Abs(got-want) > 1e-12 {
			t.Errorf("record %v: cost_usd %v, want %.12f", r["key"], r["cost_usd"], want)
		}
	}
	if code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", filepath.Join(t.TempDir(), "o"), "--base-url", url, "--model", "m", "--price-in", "2"); code != 2 || !strings.Contains(errs, "--price-out") {
		t.Errorf("--price-in alone: exit %d %s; want 2 naming --price-out", code, errs)
	}
}
