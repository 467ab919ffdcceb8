package main

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/stages/compress"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// batchBilled reads compress_batches.jsonl of out: what the endpoint billed
// for the answered requests at writePrices' batch rates ($1 and $4 per
// million prompt and completion tokens) and how many were answered.
func batchBilled(t *testing.T, out string) (usd float64, answered int) {
	t.Helper()
	f, err := os.Open(filepath.Join(out, compress.BatchFile))
	if os.IsNotExist(err) {
		return 0, 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e struct {
			T string `json:"t"`
			R *struct {
				U struct {
					Prompt     float64 `json:"prompt_tokens"`
					Completion float64 `json:"completion_tokens"`
				} `json:"u"`
			} `json:"r"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("journal line %q: %v", sc.Bytes(), err)
		}
		if e.T == "res" && e.R != nil {
			usd += (e.R.U.Prompt*1 + e.R.U.Completion*4) / 1e6
			answered++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return usd, answered
}

// TestCompressBatchMaxCost is the acceptance of a capped batch run through
// the command: `compress --batch --max-cost X` submits only the requests the
// cap can pay for at their projected cost (batch price, prompt counted with
// --tokenizer, max_tokens of completion), exits 5 saying how to go on, the
// endpoint bills at most X (the stated bound: no overshoot while the
// endpoint counts no more prompt tokens than the tokenizer), the ledger
// holds what was billed, the other rows are pending; --resume with a higher
// cap finishes them and every over-target row is summarised exactly once.
func TestCompressBatchMaxCost(t *testing.T) {
	const rows = 30
	var lines []string
	for i := range rows {
		lines = append(lines, trajLine("t"+strconv.Itoa(i), 12, 200))
	}
	in := writePrompts(t, lines...)
	prices := writePrices(t)
	args := func(url, out string, cap float64, resume bool) []string {
		a := []string{"compress", "--in", in, "--out", out, "--target-tokens", "1500", "--summary-tokens", "100",
			"--base-url", url, "--model", "m", "--progress", "none", "--prices", prices, "--batch",
			"--batch-collect", "50ms", "--batch-poll", "10ms", "--batch-poll-max", "50ms", "--grace", "1ms"}
		if cap > 0 {
			a = append(a, "--max-cost", strconv.FormatFloat(cap, 'g', -1, 64))
		}
		if resume {
			a = append(a, "--resume")
		}
		return a
	}
	_, url0 := startFakeServer(t, fakellm.Config{SummaryWords: 40})
	all := filepath.Join(t.TempDir(), "all")
	if code, _, errs := hpc(t, args(url0, all, 0, false)...); code != 0 {
		t.Fatalf("uncapped: exit %d: %s", code, errs)
	}
	total, n := batchBilled(t, all)
	if n != rows || total <= 0 {
		t.Fatalf("uncapped: %d requests billed $%v for %d rows", n, total, rows)
	}
	maxCost := total / 3

	fk, url := startFakeServer(t, fakellm.Config{SummaryWords: 40})
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hpc(t, args(url, out, maxCost, false)...)
	if code != exitBudget {
		t.Fatalf("capped: exit %d, want %d: %s", code, exitBudget, errs)
	}
	if !strings.Contains(errs, "--resume --max-cost HIGHER") {
		t.Errorf("the message does not say how to go on:\n%s", errs)
	}
	billed, answered := batchBilled(t, out)
	t.Logf("cap $%.6f: %d of %d requests, billed $%.6f (uncapped $%.6f)", maxCost, answered, rows, billed, total)
	if billed > maxCost {
		t.Errorf("billed $%.6f with --max-cost $%.6f: past the stated bound (no overshoot)", billed, maxCost)
	}
	if answered == 0 || answered >= rows || len(fk.BatchSubmitted()) != answered {
		t.Fatalf("%d requests answered, %d submitted, of %d: the cap should stop part of them", answered, len(fk.BatchSubmitted()), rows)
	}
	if s := ledgerSpent(t, out); math.Abs(s-billed) > 1e-9 {
		t.Errorf("the ledger holds $%.9f, the endpoint billed $%.9f", s, billed)
	}
	if got := len(catRecords(t, out)); got != answered {
		t.Errorf("%d rows written, %d summaries paid for", got, answered)
	}

	if code, _, errs := hpc(t, args(url, out, 100*total, true)...); code != 0 {
		t.Fatalf("resume with a higher cap: exit %d: %s", code, errs)
	}
	if got := len(catRecords(t, out)); got != rows {
		t.Fatalf("%d rows after the resume, want %d", got, rows)
	}
	if st := fk.Stats(); st.BatchDuplicates != 0 || st.Requests != 0 || len(fk.BatchSubmitted()) != rows {
		t.Errorf("stats %+v, %d requests submitted for %d rows: each must be summarised once, in a batch", st, len(fk.BatchSubmitted()), rows)
	}
	mustVerify(t, out)
}
