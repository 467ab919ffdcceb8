package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// batchRows writes n rows, every other one over a 600-token budget and
// every tenth of those asking the fake for a long summary, so that it needs
// a second pass.
func batchRows(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		steps := 1
		if i%2 == 0 {
			steps = 8
		}
		line := trajLine("r"+strconv.Itoa(i), steps, 40)
		if i%20 == 0 {
			var row struct {
				Conversations []map[string]string `json:"conversations"`
				ID            string              `json:"id"`
			}
			if err := json.Unmarshal([]byte(line), &row); err != nil {
				t.Fatal(err)
			}
			for _, turn := range row.Conversations[4:] {
				if turn["from"] == "tool" {
					turn["value"] += " [[words=150]]"
				}
			}
			raw, _ := json.Marshal(row)
			line = string(raw)
		}
		b.WriteString(line + "\n")
	}
	in := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return in
}

// byID maps the records of an output folder by their id.
func byID(t *testing.T, dir string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, r := range catRecords(t, dir) {
		id, _ := r["id"].(string)
		if _, dup := out[id]; dup {
			t.Fatalf("%s: row %s written twice", dir, id)
		}
		out[id] = r
	}
	return out
}

// sameRecords fails unless both folders hold the same rows with the same
// conversations and compression metrics.
func sameRecords(t *testing.T, want, got map[string]map[string]any, n int) {
	t.Helper()
	if len(want) != n || len(got) != n {
		t.Fatalf("rows: direct %d, batch %d, want %d", len(want), len(got), n)
	}
	diff := 0
	for id, w := range want {
		g := got[id]
		if !reflect.DeepEqual(w["conversations"], g["conversations"]) || !reflect.DeepEqual(w["compression_metrics"], g["compression_metrics"]) {
			if diff++; diff <= 3 {
				a, _ := json.Marshal(w["compression_metrics"])
				b, _ := json.Marshal(g["compression_metrics"])
				t.Errorf("row %s differs:\ndirect %s\nbatch  %s", id, a, b)
			}
		}
	}
	if diff > 0 {
		t.Fatalf("%d of %d rows differ between the direct and the batch run", diff, n)
	}
}

// waitBatches waits until the fake has created at least n batches or the
// process ended.
func waitBatches(t *testing.T, fs *fakellm.Server, n int64, cmd *exec.Cmd) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); fs.Stats().Batches < n; time.Sleep(5 * time.Millisecond) {
		if processGone(cmd.Process.Pid) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fake saw %d batches in 2 minutes, waited for %d", fs.Stats().Batches, n)
		}
	}
}

// TestCompressBatchKillNine compresses 2,000 rows through the Batch API of
// the fake, killing the real binary with SIGKILL three times while it polls:
// no summary request is submitted in two batches, every row is written once,
// and the rows equal those of a direct run against the same fake logic.
func TestCompressBatchKillNine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	const n = 2000
	bin := buildBinary(t)
	in := batchRows(t, n)
	common := []string{"compress", "--in", in, "--target-tokens", "600", "--summary-tokens", "80", "--model", "m",
		"--progress", "none", "--commit-interval", "50ms"}

	t0 := time.Now()
	direct, durl := startFakeServer(t, fakellm.Config{SummaryWords: 40})
	dOut := filepath.Join(t.TempDir(), "direct")
	if b, err := exec.Command(bin, append(common, "--out", dOut, "--base-url", durl, "--workers", "8")...).CombinedOutput(); err != nil {
		t.Fatalf("direct run: %v\n%s", err, b)
	}
	directCalls := direct.Stats().Requests

	// Each batch stays in progress long enough for the kill to land while
	// the run polls it.
	fk, burl := startFakeServer(t, fakellm.Config{SummaryWords: 40, BatchDelay: 700 * time.Millisecond})
	bOut := filepath.Join(t.TempDir(), "batch")
	args := append(append([]string{}, common...), "--out", bOut, "--base-url", burl, "--batch",
		"--batch-max-requests", "300", "--batch-collect", "100ms", "--batch-poll", "20ms", "--batch-poll-max", "100ms")
	t.Logf("direct run: %d calls in %s", directCalls, time.Since(t0))
	for i := range 3 {
		a := args
		if i > 0 {
			a = append(append([]string{}, args...), "--resume")
		}
		cmd := exec.Command(bin, a...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitBatches(t, fk, fk.Stats().Batches+1, cmd)
		t.Logf("kill %d at %d batches, %s", i+1, fk.Stats().Batches, time.Since(t0))
		_ = cmd.Process.Signal(syscall.SIGKILL) // by PID, only our child
		_ = cmd.Wait()
	}
	final := exec.Command(bin, append(args, "--resume")...)
	b, err := final.CombinedOutput()
	if err != nil {
		t.Fatalf("final resume: %v\n%s", err, b)
	}

	t.Logf("final run done at %s", time.Since(t0))
	st := fk.Stats()
	if st.BatchDuplicates != 0 {
		t.Fatalf("%d summary requests were submitted in more than one batch", st.BatchDuplicates)
	}
	bases := map[string]int{}
	seconds := 0
	for id := range fk.BatchSubmitted() {
		base := id[:strings.LastIndexByte(id, '/')]
		bases[base]++
		if strings.Contains(base, "/2/") {
			seconds++
		}
	}
	for base, c := range bases {
		if c > 1 {
			t.Fatalf("request %s submitted %d times under different attempts", base, c)
		}
	}
	if int64(len(bases)) != directCalls {
		t.Errorf("batch run submitted %d requests, the direct run made %d calls", len(bases), directCalls)
	}
	if seconds == 0 {
		t.Errorf("no row needed a second summary: the test does not exercise pass 2")
	}
	if st.Requests != 0 {
		t.Errorf("the batch run made %d direct calls", st.Requests)
	}
	sameRecords(t, byID(t, dOut), byID(t, bOut), n)
	mustVerify(t, bOut)
	t.Logf("%d batches, %d batch requests, %d direct calls, %d second summaries", st.Batches, st.BatchRequests, directCalls, seconds)
}

// TestCompressBatchFailuresAndExpiry runs in-process against a fake whose
// first batch expires half done and whose requests sometimes fail: the
// unanswered and failed requests go to later batches and the rows match a
// direct run. With --batch-attempts 1 and --batch-fallback direct a failed
// request is answered directly.
func TestCompressBatchFailuresAndExpiry(t *testing.T) {
	const n = 120
	in := batchRows(t, n)
	common := []string{"compress", "--in", in, "--target-tokens", "600", "--summary-tokens", "80", "--model", "m", "--progress", "plain"}
	_, durl := startFakeServer(t, fakellm.Config{SummaryWords: 40})
	dOut := filepath.Join(t.TempDir(), "direct")
	if code, _, errs := hpc(t, append(common, "--out", dOut, "--base-url", durl)...); code != 0 {
		t.Fatalf("direct: %d %s", code, errs)
	}
	batchArgs := []string{"--batch", "--batch-collect", "50ms", "--batch-poll", "10ms", "--batch-poll-max", "50ms", "--batch-max-requests", "25"}

	fk, burl := startFakeServer(t, fakellm.Config{SummaryWords: 40, BatchFail: 0.2, BatchExpire: 1})
	bOut := filepath.Join(t.TempDir(), "batch")
	code, _, errs := hpc(t, append(append(common, "--out", bOut, "--base-url", burl, "--prices", writePrices(t), "--batch-attempts", "6"), batchArgs...)...)
	if code != 0 {
		t.Fatalf("batch: %d %s", code, errs)
	}
	st := fk.Stats()
	if st.Faults["batch_request"] == 0 || st.BatchDuplicates != 0 {
		t.Fatalf("stats %+v: want injected failures and no duplicates", st)
	}
	if !strings.Contains(errs, "expired") || !strings.Contains(errs, "summaries cost $") {
		t.Errorf("no expired batch or no cost in the output:\n%s", errs)
	}
	got := byID(t, bOut)
	for _, r := range got {
		if m, ok := r["compression_metrics"].(map[string]any); ok {
			delete(m, "summary_cost_usd")
		}
	}
	sameRecords(t, byID(t, dOut), got, n)

	// Every request fails once: attempts 1 with the direct fallback.
	fk2, url2 := startFakeServer(t, fakellm.Config{SummaryWords: 40, BatchFail: 1})
	fOut := filepath.Join(t.TempDir(), "fallback")
	code, _, errs = hpc(t, append(append(common, "--out", fOut, "--base-url", url2, "--batch-attempts", "1", "--batch-fallback", "direct"), batchArgs...)...)
	if code != 0 {
		t.Fatalf("fallback: %d %s", code, errs)
	}
	if fk2.Stats().Requests == 0 {
		t.Errorf("no direct call made by the fallback")
	}
	sameRecords(t, byID(t, dOut), byID(t, fOut), n)
}

// writePrices writes a price file for model m with batch rates.
func writePrices(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(p, []byte(`{"m": {"input": 2, "output": 8, "batch_discount": 0.5}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCompressBatchExportImport exports the requests, answers them as an
// offline batch runner would (each line posted to the fake's chat
// endpoint), imports the results, and repeats until no row is pending: the
// rows equal a direct run's. A results file missing some answers leaves
// those rows pending.
func TestCompressBatchExportImport(t *testing.T) {
	const n = 60
	in := batchRows(t, n)
	common := []string{"compress", "--in", in, "--target-tokens", "600", "--summary-tokens", "80", "--model", "m", "--progress", "none"}
	fk, url := startFakeServer(t, fakellm.Config{SummaryWords: 40})
	dOut := filepath.Join(t.TempDir(), "direct")
	if code, _, errs := hpc(t, append(common, "--out", dOut, "--base-url", url)...); code != 0 {
		t.Fatalf("direct: %d %s", code, errs)
	}
	directCalls := fk.Stats().Requests
	work := t.TempDir()
	out := filepath.Join(work, "out")
	req := filepath.Join(work, "requests-0.jsonl")
	// The batch-file rounds name no endpoint: the requests run elsewhere
	// (answerOffline stands in for vllm run-batch).
	code, _, errs := hpc(t, append(common, "--out", out, "--batch-export", req)...)
	if code != 0 || !strings.Contains(errs, "rows pending") {
		t.Fatalf("export: %d %s", code, errs)
	}
	answered := 0
	for round := 0; ; round++ {
		lines := readLines(t, req)
		if len(lines) == 0 {
			break
		}
		if round > 5 {
			t.Fatalf("still %d requests after %d rounds", len(lines), round)
		}
		res := filepath.Join(work, fmt.Sprintf("results-%d.jsonl", round))
		skip := 0
		if round == 0 {
			skip = 1 // the first results file lacks one answer
		}
		answered += answerOffline(t, url, lines[skip:], res)
		next := filepath.Join(work, fmt.Sprintf("requests-%d.jsonl", round+1))
		code, _, errs = hpc(t, append(common, "--out", out, "--resume", "--batch-import", res, "--batch-export", next)...)
		if code != 0 {
			t.Fatalf("import %d: %d %s", round, code, errs)
		}
		if round == 0 && len(readLines(t, next)) == 0 {
			t.Fatalf("the request missing from the results was not exported again")
		}
		req = next
	}
	if int64(answered) != directCalls {
		t.Errorf("answered %d requests offline, the direct run made %d calls", answered, directCalls)
	}
	sameRecords(t, byID(t, dOut), byID(t, out), n)
	mustVerify(t, out)
}

func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		out = append(out, append([]byte(nil), sc.Bytes()...))
	}
	return out
}

// answerOffline posts each request line's body to the chat endpoint and
// writes the batch output file, as vllm run-batch would.
func answerOffline(t *testing.T, url string, lines [][]byte, path string) int {
	t.Helper()
	var b bytes.Buffer
	for _, l := range lines {
		var r struct {
			CustomID string          `json:"custom_id"`
			URL      string          `json:"url"`
			Body     json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(l, &r); err != nil || r.URL != "/v1/chat/completions" {
			t.Fatalf("request line %s: %v", l, err)
		}
		resp, err := http.Post(url+"/chat/completions", "application/json", bytes.NewReader(r.Body))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		line, _ := json.Marshal(map[string]any{"id": "x", "custom_id": r.CustomID,
			"response": map[string]any{"status_code": resp.StatusCode, "body": json.RawMessage(bytes.TrimSpace(body))}, "error": nil})
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return len(lines)
}

// TestCompressDryRunProjectsSpend: --dry-run prices the projected tokens,
// at the batch rates with --batch, and says so when the model has no price.
func TestCompressDryRunProjectsSpend(t *testing.T) {
	in := batchRows(t, 40)
	args := []string{"compress", "--in", in, "--dry-run", "--json", "--target-tokens", "600", "--summary-tokens", "80", "--model", "m", "--prices", writePrices(t)}
	var rep struct {
		Prompt     int64    `json:"projected_prompt_tokens"`
		Completion int64    `json:"projected_completion_tokens"`
		MaxCompl   int64    `json:"max_completion_tokens"`
		Cost       *float64 `json:"projected_cost_usd"`
		Max        *float64 `json:"max_cost_usd"`
		Batch      bool     `json:"batch_prices"`
	}
	for _, batch := range []bool{false, true} {
		a := args
		if batch {
			a = append(append([]string{}, args...), "--batch")
		}
		code, out, errs := hpc(t, a...)
		if code != 0 {
			t.Fatalf("dry run: %d %s", code, errs)
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		f := 1.0
		if batch {
			f = 0.5 // the price file's batch_discount
		}
		want := f * (float64(rep.Prompt)*2 + float64(rep.Completion)*8) / 1e6
		wantMax := f * (float64(rep.Prompt)*2 + float64(rep.MaxCompl)*8) / 1e6
		if rep.Prompt == 0 || rep.Cost == nil || rep.Max == nil || rep.Batch != batch ||
			fmt.Sprintf("%.9f %.9f", *rep.Cost, *rep.Max) != fmt.Sprintf("%.9f %.9f", want, wantMax) {
			t.Errorf("batch=%v: report %+v, want cost %.9f max %.9f", batch, rep, want, wantMax)
		}
	}
	code, out, _ := hpc(t, "compress", "--in", in, "--dry-run", "--target-tokens", "600", "--summary-tokens", "80")
	if code != 0 || !strings.Contains(out, "projected spend") || !strings.Contains(out, "unknown") {
		t.Errorf("dry run without a price: %d %q", code, out)
	}
}

// TestCompressBatchRetriesCounted: the Batch API answers its first three
// requests (file uploads, batch creation or polls) 429; the batch client
// retries them and the closing summary counts those three retries, as it
// counts a direct client's.
func TestCompressBatchRetriesCounted(t *testing.T) {
	const n, refused = 10, 3
	in := batchRows(t, n)
	fk := fakellm.New(fakellm.Config{SummaryWords: 40})
	var mu sync.Mutex
	left := refused
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/files") || strings.Contains(r.URL.Path, "/batches") {
			mu.Lock()
			refuse := left > 0
			left--
			mu.Unlock()
			if refuse {
				w.Header().Set("retry-after-ms", "1")
				http.Error(w, `{"error":{"message":"slow down"}}`, http.StatusTooManyRequests)
				return
			}
		}
		fk.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hpc(t, "compress", "--in", in, "--out", out, "--target-tokens", "600", "--summary-tokens", "80",
		"--model", "m", "--base-url", srv.URL+"/v1", "--progress", "none",
		"--batch", "--batch-collect", "50ms", "--batch-poll", "10ms", "--batch-poll-max", "50ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := summaryBlock(t, errs, out)
	if !hasLine(lines, fmt.Sprintf(`^  retries: %d \(%d 429 rate-limited\)$`, refused, refused)) {
		t.Fatalf("summary does not count the %d Batch API retries:\n%s", refused, strings.Join(lines, "\n"))
	}
	if len(fk.BatchSubmitted()) == 0 {
		t.Fatalf("no batch reached the fake")
	}
}

// TestCompressBatchNotBoundByWorkers: under --batch a row waiting on its
// batch holds no worker, so `--workers 8` over 275 rows still sends their
// summary requests in one batch (not one per eight rows, each waiting its
// own window) and every row is compressed. Counted from the outside: the
// batches and requests the fake received.
func TestCompressBatchNotBoundByWorkers(t *testing.T) {
	const rows = 275
	var lines []string
	for i := range rows {
		lines = append(lines, trajLine("w"+strconv.Itoa(i), 12, 200))
	}
	in := writePrompts(t, lines...)
	fk, url := startFakeServer(t, fakellm.Config{SummaryWords: 40, BatchDelay: 3 * time.Second})
	out := filepath.Join(t.TempDir(), "out")
	start := time.Now()
	code, _, errs := hpc(t, "compress", "--in", in, "--out", out, "--target-tokens", "1500", "--summary-tokens", "100",
		"--base-url", url, "--model", "m", "--progress", "none", "--batch", "--workers", "8", "--batch-poll", "1s")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	st := fk.Stats()
	t.Logf("%d rows, --workers 8: %d batches of %d requests in all, %s (each batch answered 3s after its creation)",
		rows, st.Batches, st.BatchRequests, time.Since(start).Round(100*time.Millisecond))
	if st.BatchRequests != rows || st.Requests != 0 {
		t.Fatalf("the fake got %d batch requests and %d direct calls, want one summary request per row in batches", st.BatchRequests, st.Requests)
	}
	if st.Batches > 2 {
		t.Errorf("%d batches for %d requests: --workers 8 bounded the rows waiting on a batch", st.Batches, rows)
	}
	if recs := catRecords(t, out); len(recs) != rows {
		t.Errorf("%d records, want %d", len(recs), rows)
	}
	mustVerify(t, out)
}
