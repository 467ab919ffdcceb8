package compress

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/cost"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// budgetPrice is the test price: $2,000 / $4,000 per million tokens, half
// that in batches, so a few requests cost dollars.
var budgetPrice = cost.Price{Input: 2000e-6, Output: 4000e-6, BatchInput: 1000e-6, BatchOutput: 2000e-6}

// wordRows writes n rows, each over a 1,500-token target once, whose text
// ("w12 w19 ...") cl100k counts at about two tokens per four bytes: never
// below what fakellm bills (four bytes a token), as the projection assumes
// of the endpoint.
func wordRows(t *testing.T, dir string, n int) string {
	t.Helper()
	var lines [][]byte
	for i := range n {
		turns := []schemas.Turn{{From: "system", Value: "You are a function calling AI model."}, {From: "human", Value: fmt.Sprintf("do r%d", i)}}
		for s := range 12 {
			var b strings.Builder
			for w := range 120 {
				fmt.Fprintf(&b, "w%d ", (w*7+s+i)%97)
			}
			turns = append(turns, schemas.Turn{From: "gpt", Value: "<tool_call>\n{\"name\": \"terminal\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>"},
				schemas.Turn{From: "tool", Value: "<tool_response>\n" + b.String() + "\n</tool_response>"})
		}
		turns = append(turns, schemas.Turn{From: "gpt", Value: "done"})
		lines = append(lines, row(fmt.Sprintf("r%d", i), turns, false))
	}
	p := filepath.Join(dir, "in.jsonl")
	writeLines(t, p, lines)
	return p
}

// journalSpend reads compress_batches.jsonl: what the endpoint billed (every
// answered request at the batch price), how many requests were answered,
// and the answered requests whose real cost passed their projection.
func journalSpend(t *testing.T, out string) (billed float64, answered int, overProjection []string) {
	t.Helper()
	f, err := os.Open(filepath.Join(out, BatchFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, nil // nothing was ever submitted
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	projected := map[string]float64{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e batchEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("journal line %q: %v", sc.Bytes(), err)
		}
		switch {
		case e.T == "group":
			if len(e.USD) != len(e.IDs) {
				t.Fatalf("group %s: %d projected costs for %d requests", e.Group, len(e.USD), len(e.IDs))
			}
			for i, id := range e.IDs {
				projected[id] = e.USD[i]
			}
		case e.T == "res" && e.Result != nil:
			c := budgetPrice.Cost(e.Result.Usage, true)
			billed += c
			answered++
			if p, ok := projected[e.ID]; !ok || c > p {
				overProjection = append(overProjection, fmt.Sprintf("%s: cost $%.6f, projected $%.6f", e.ID, c, p))
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return billed, answered, overProjection
}

// ledgerSpent sums the cost_usd of the ledger lines of out.
func ledgerSpent(t *testing.T, out string) float64 {
	t.Helper()
	data, _, err := outdir.ReadLedger(filepath.Join(out, outdir.LedgerFile))
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	if _, err := outdir.Scan(data, func(_ int, l *outdir.Line) error { sum += l.CostUSD; return nil }); err != nil {
		t.Fatal(err)
	}
	return sum
}

// TestBatchMaxCost: compress --batch keeps --max-cost. Every request is
// reserved at its projected cost before it joins a batch, so the endpoint
// bills no more than the cap (the stated bound: zero while the endpoint
// counts no more prompt tokens than the tokenizer plus the template
// allowance, which the test checks request by request); the run ends with
// the budget reached (exit 5), the rows whose request was refused pending,
// and the rows whose requests were in a batch committed, though --grace
// passed while they waited. A --resume with a higher cap finishes every row,
// each summarised exactly once.
func TestBatchMaxCost(t *testing.T) {
	const n = 30
	dir := t.TempDir()
	in := wordRows(t, dir, n)
	price := budgetPrice
	opts := func(url, out string, maxCost float64, resume bool) Options {
		bc, err := llm.NewBatch(llm.Options{BaseURL: url, Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		o := testOptions(t, url, []string{in}, out)
		o.Workers = 64
		o.MaxCost = maxCost
		o.Grace = time.Millisecond // the stages are cancelled while the batch is in progress
		o.Summary.Price = &price
		o.Batch = BatchOptions{API: true, Client: bc, Collect: 20 * time.Millisecond, PollMin: 5 * time.Millisecond, PollMax: 20 * time.Millisecond}
		if resume {
			o.Mode = pipeline.ModeResume
		}
		return o
	}

	// What the whole job costs, uncapped (a fake of its own, which counts
	// the requests it sees).
	cfg := fakellm.Config{SummaryWords: 40, BatchDelay: 300 * time.Millisecond}
	_, url0 := fake(t, cfg)
	all := filepath.Join(dir, "all")
	res, err := Run(bg, opts(url0, all, 0, false))
	if err != nil || pipeline.ExitCode(res.Summary) != 0 {
		t.Fatalf("uncapped run: %v, summary %+v", err, res.Summary)
	}
	total, calls, over := journalSpend(t, all)
	if calls != n || len(over) > 0 {
		t.Fatalf("uncapped run: %d requests for %d rows; over their projection: %v", calls, n, over)
	}
	maxCost := total / 3

	fk, url := fake(t, cfg)
	out := filepath.Join(dir, "capped")
	res, err = Run(bg, opts(url, out, maxCost, false))
	if err != nil {
		t.Fatal(err)
	}
	if code := pipeline.ExitCode(res.Summary); code != pipeline.ExitBudget || !res.Summary.BudgetReached {
		t.Fatalf("capped run: exit %d, summary %+v; want %d", code, res.Summary, pipeline.ExitBudget)
	}
	billed, answered, over := journalSpend(t, out)
	if len(over) > 0 {
		t.Errorf("requests cost more than projected, so the bound does not hold for them: %v", over)
	}
	if billed > maxCost {
		t.Errorf("the endpoint billed $%.6f with --max-cost $%.6f: over the stated bound (0)", billed, maxCost)
	}
	submitted := len(fk.BatchSubmitted())
	if answered != submitted || answered == 0 || answered >= n {
		t.Fatalf("%d requests submitted, %d answered, for %d rows: the cap should stop part of them", submitted, answered, n)
	}
	t.Logf("cap $%.4f: %d of %d requests submitted, billed $%.4f (uncapped $%.4f)", maxCost, answered, n, billed, total)
	// The rows whose requests were in a batch waited for it past --grace
	// and were committed with its spend; the others are pending.
	got := catLines(t, out)
	if len(got) != answered {
		t.Errorf("%d rows committed, %d requests answered: a paid reply was left behind", len(got), answered)
	}
	if s := ledgerSpent(t, out); math.Abs(s-billed) > 1e-9 {
		t.Errorf("the ledger holds $%.9f, the endpoint billed $%.9f", s, billed)
	}
	if res.Pending != 0 {
		t.Errorf("pending %d: rows stopped by the cap are not waiting for a batch result", res.Pending)
	}

	res, err = Run(bg, opts(url, out, 100*total, true))
	if err != nil || pipeline.ExitCode(res.Summary) != 0 {
		t.Fatalf("resume with a higher cap: %v, summary %+v", err, res.Summary)
	}
	if got := catLines(t, out); len(got) != n {
		t.Fatalf("%d rows after the resume, want %d", len(got), n)
	}
	if _, answered, _ := journalSpend(t, out); answered != n {
		t.Errorf("%d requests answered over both runs for %d rows", answered, n)
	}
	if st := fk.Stats(); st.BatchDuplicates != 0 || st.Requests != 0 || len(fk.BatchSubmitted()) != n {
		t.Errorf("stats %+v, %d requests submitted: every row must be summarised once, in batches", st, len(fk.BatchSubmitted()))
	}
	verifyOK(t, out)
}

// TestBatchResumeHoldsUncollectedBatches: a batch a killed run submitted
// but did not collect is held against the cap by the next run (from the
// projected costs journalled with its group), and a journalled reply whose
// row is not done yet at its real cost; a new request is refused once it
// would pass the cap, and the held reservation becomes the reply's real
// cost when the row takes it.
func TestBatchResumeHoldsUncollectedBatches(t *testing.T) {
	fk, url := fake(t, fakellm.Config{SummaryWords: 5})
	bc, err := llm.NewBatch(llm.Options{BaseURL: url, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	req := func(s string) llm.Request {
		return llm.Request{Messages: []schemas.Message{{Role: "user", Content: s}}, MaxTokens: 100}
	}
	body, _ := bc.Body(req("summarise row1"))
	id := requestID("row1", 1, body, 1)
	line, _ := llm.Line(id, body)
	file, err := bc.UploadFile(bg, "in.jsonl", line)
	if err != nil {
		t.Fatal(err)
	}
	bt0, err := bc.CreateBatch(bg, file, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := schemas.Usage{PromptTokens: 1000, CompletionTokens: 100}
	dir := t.TempDir()
	var j []byte
	for _, e := range []batchEntry{
		{T: "group", Group: "g1", IDs: []string{id}, USD: []float64{3}},
		{T: "file", Group: "g1", File: file},
		{T: "batch", Group: "g1", Batch: bt0.ID},
		{T: "res", ID: "row2/1/abc/1", Result: &journalResult{Content: "[CONTEXT SUMMARY]: x", Finish: "stop", Usage: done}},
		{T: "res", ID: "row3/1/abc/1", Result: &journalResult{Content: "[CONTEXT SUMMARY]: y", Finish: "stop", Usage: done}},
	} {
		b, _ := json.Marshal(e)
		j = append(append(j, b...), '\n')
	}
	mustWrite(t, filepath.Join(dir, BatchFile), j)
	price := budgetPrice
	meter := batchMeter{price: &price, project: projector(cl100k(t), 0, &price)}
	bt, err := openBatcher(bg, dir, false, BatchOptions{API: true, Client: bc, PollMin: 5 * time.Millisecond, Collect: 5 * time.Millisecond, meter: meter})
	if err != nil {
		t.Fatal(err)
	}
	defer bt.close()

	replyCost := price.Cost(done, true) // 1.2
	budget := cost.NewBudget(5, 0)
	bt.hold(budget, func(key string) bool { return key == "row3" }) // row3 is committed: its spend is in the ledger
	if s := budget.Spent(); math.Abs(s-(3+replyCost)) > 1e-9 {
		t.Fatalf("held $%.4f, want $%.4f (the uncollected batch's projection and row2's reply)", s, 3+replyCost)
	}
	// A new request projected at more than what is left is refused, and
	// the row is left pending.
	big := req(strings.Repeat("w1 ", 1000))
	if p := meter.projected(big, true); p <= 5-3-replyCost {
		t.Fatalf("projection $%.4f fits; the test needs one that does not", p)
	}
	if _, err := bt.summary(bg, &rowCall{key: "row4", budget: budget}, big); !errors.Is(err, pipeline.ErrDeferred) || !errors.Is(err, cost.ErrBudget) {
		t.Fatalf("a request past the cap: %v, want deferred by the budget", err)
	}
	if !budget.Reached() {
		t.Error("a refused reservation must stop the run")
	}
	// The held batch is collected; its row takes the reply at its real cost.
	resp, err := bt.summary(bg, &rowCall{key: "row1", budget: budget}, req("summarise row1"))
	if err != nil || !resp.Batch {
		t.Fatalf("row1: %+v %v", resp, err)
	}
	want := replyCost + price.Cost(resp.Usage, true)
	if s := budget.Spent(); math.Abs(s-want) > 1e-9 {
		t.Errorf("spent $%.6f after row1 took its reply, want $%.6f (the projection replaced by the real cost)", s, want)
	}
	if fk.Stats().Batches != 1 {
		t.Errorf("%d batches: the held batch was submitted again", fk.Stats().Batches)
	}
}
