package llm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

func batchPair(t testing.TB, cfg fakellm.Config) (*fakellm.Server, Client, *BatchClient) {
	t.Helper()
	fk := fakellm.New(cfg)
	srv := httptest.NewServer(fk)
	t.Cleanup(srv.Close)
	opts := Options{BaseURL: srv.URL + "/v1", Model: "m", MaxRetries: -1}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	bc, err := NewBatch(opts)
	if err != nil {
		t.Fatal(err)
	}
	return fk, c, bc
}

// TestBatchRoundTrip sends requests through upload, create, get, list and
// the output file, and checks each reply equals the direct call's, usage
// details included; a failed request comes back with its error and the
// expired batch with only half its answers.
func TestBatchRoundTrip(t *testing.T) {
	ctx := context.Background()
	fk, direct, bc := batchPair(t, fakellm.Config{Model: "m", BatchExpire: 2})
	reqs := []Request{
		{Messages: []schemas.Message{{Role: "user", Content: "summarise <this> & that [[words=7]]"}}, MaxTokens: 50},
		{Messages: []schemas.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "again"}}},
	}
	var file bytes.Buffer
	for i, r := range reqs {
		body, err := bc.Body(r)
		if err != nil {
			t.Fatal(err)
		}
		line, err := Line(fmt.Sprintf("req-%d", i), body)
		if err != nil {
			t.Fatal(err)
		}
		file.Write(line)
	}
	fileID, err := bc.UploadFile(ctx, "in.jsonl", file.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	b, err := bc.CreateBatch(ctx, fileID, map[string]string{"k": "v"})
	if err != nil || b.ID == "" || b.InputFileID != fileID {
		t.Fatalf("create: %+v %v", b, err)
	}
	found := ""
	if err := bc.ListBatches(ctx, func(x Batch) bool { found = x.ID; return x.InputFileID != fileID }); err != nil || found != b.ID {
		t.Fatalf("list found %q (%v), want %s", found, err, b.ID)
	}
	if b, err = bc.GetBatch(ctx, b.ID); err != nil || b.Status != BatchCompleted || b.RequestCounts.Completed != 2 {
		t.Fatalf("get: %+v %v", b, err)
	}
	data, err := bc.FileContent(ctx, b.OutputFileID)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	n := 0
	for sc.Scan() {
		res, err := bc.ParseResult(sc.Bytes())
		if err != nil || res.Err != nil {
			t.Fatalf("result %s: %v %v", sc.Bytes(), err, res.Err)
		}
		var i int
		fmt.Sscanf(res.CustomID, "req-%d", &i)
		want, err := direct.Chat(ctx, reqs[i])
		if err != nil {
			t.Fatal(err)
		}
		want.Batch = true
		if fmt.Sprintf("%+v", want) != fmt.Sprintf("%+v", res.Response) {
			t.Errorf("request %d:\nbatch  %+v\ndirect %+v", i, res.Response, want)
		}
		n++
	}
	if n != 2 {
		t.Fatalf("%d results, want 2", n)
	}

	// The second batch expires with half its requests answered.
	fileID, _ = bc.UploadFile(ctx, "in.jsonl", file.Bytes())
	b, _ = bc.CreateBatch(ctx, fileID, nil)
	if b, err = bc.GetBatch(ctx, b.ID); err != nil || b.Status != BatchExpired || b.RequestCounts.Completed != 1 {
		t.Fatalf("expired batch: %+v %v", b, err)
	}
	if fk.Stats().Batches != 2 || fk.Stats().BatchDuplicates != 2 {
		t.Errorf("stats %+v: want 2 batches and the two ids counted as resubmitted", fk.Stats())
	}
	if _, err := bc.CancelBatch(ctx, b.ID); err != nil {
		t.Fatal(err)
	}

	// A failing request lands in the error file.
	_, _, bc2 := batchPair(t, fakellm.Config{BatchFail: 1, BatchDelay: time.Hour})
	fileID, _ = bc2.UploadFile(ctx, "in.jsonl", file.Bytes())
	b, _ = bc2.CreateBatch(ctx, fileID, nil)
	if b, _ = bc2.GetBatch(ctx, b.ID); b.Status != BatchInProgress {
		t.Fatalf("status %s before the delay, want in_progress", b.Status)
	}
	if b, err = bc2.CancelBatch(ctx, b.ID); err != nil || b.Status != BatchCancelled {
		t.Fatalf("cancel: %+v %v", b, err)
	}
	_, _, bc3 := batchPair(t, fakellm.Config{BatchFail: 1})
	fileID, _ = bc3.UploadFile(ctx, "in.jsonl", file.Bytes())
	b, _ = bc3.CreateBatch(ctx, fileID, nil)
	b, _ = bc3.GetBatch(ctx, b.ID)
	data, err = bc3.FileContent(ctx, b.ErrorFileID)
	if err != nil || b.OutputFileID != "" {
		t.Fatalf("error file: %v, output %q", err, b.OutputFileID)
	}
	res, err := bc3.ParseResult(bytes.SplitN(data, []byte("\n"), 2)[0])
	if err != nil || res.Err == nil || !strings.Contains(res.Err.Error(), "http 500") {
		t.Fatalf("failed request: %+v %v", res, err)
	}
}

// TestBatchRetries: the Batch API calls go through the chat client's retry
// policy: an upload refused with 429 and Retry-After is sent again after
// the server's wait, a list page refused with 502 after the jittered
// backoff, and a 400 is not retried; the file the fake keeps (it takes
// only purpose "batch") holds the bytes uploaded.
func TestBatchRetries(t *testing.T) {
	fk := fakellm.New(fakellm.Config{Model: "m"})
	var mu sync.Mutex
	fail := map[string][]int{ // method and path → statuses of the next replies
		"POST /v1/files":   {429},
		"GET /v1/batches":  {502},
		"POST /v1/batches": {400},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := r.Method + " " + r.URL.Path
		mu.Lock()
		var code int
		if l := fail[k]; len(l) > 0 {
			code, fail[k] = l[0], l[1:]
		}
		mu.Unlock()
		if code != 0 {
			w.Header().Set("Retry-After", "3")
			if code != 429 {
				w.Header().Del("Retry-After")
			}
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"error":{"message":"refused %d"}}`, code)
			return
		}
		fk.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rec := &sleepRecorder{}
	bc, err := NewBatch(Options{BaseURL: srv.URL + "/v1", Model: "m", Sleep: rec.sleep, BackoffBase: time.Second, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	body, _ := bc.Body(Request{Messages: []schemas.Message{{Role: "user", Content: "x"}}})
	line, _ := Line("r1", body)
	file, err := bc.UploadFile(ctx, "in.jsonl", line)
	if err != nil {
		t.Fatal(err)
	}
	if w := rec.all(); len(w) != 1 || w[0] != 3*time.Second {
		t.Fatalf("waits %v after a 429 with Retry-After: 3, want [3s]", w)
	}
	_, err = bc.CreateBatch(ctx, file, nil)
	var e *Error
	if !errors.As(err, &e) || e.Status != 400 || e.Attempts != 1 || IsRetryable(err) || !strings.Contains(err.Error(), "refused 400") {
		t.Fatalf("create refused with 400: %v, want one attempt, not retryable", err)
	}
	bt, err := bc.CreateBatch(ctx, file, map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	if err := bc.ListBatches(ctx, func(x Batch) bool { seen++; return x.ID != bt.ID || x.Metadata["k"] != "v" }); err != nil || seen != 1 {
		t.Fatalf("list after a 502: %d seen, %v", seen, err)
	}
	if w := rec.all(); len(w) != 2 || w[1] < 500*time.Millisecond || w[1] > time.Second {
		t.Fatalf("waits %v: the 502 wants one backoff between half and all of 1s", w)
	}
	data, err := bc.FileContent(ctx, file)
	if err != nil || !bytes.Equal(data, line) {
		t.Fatalf("uploaded file %q (%v), want the line", data, err)
	}
	if fk.Stats().Batches != 1 {
		t.Errorf("%d batches, want 1", fk.Stats().Batches)
	}
}

// BenchmarkPollBatches measures what polling costs: one op is one round of
// GET /v1/batches/{id} for 100 batches in progress, over loopback, with the
// fake server in the same process (so the CPU figure is an upper bound for
// the client alone). It reports CPU per round and the share of one core
// that polling every 5s (--batch-poll's default, the fastest rate) takes.
func BenchmarkPollBatches(b *testing.B) {
	ctx := context.Background()
	_, _, bc := batchPair(b, fakellm.Config{BatchDelay: time.Hour})
	var ids []string
	for i := range 100 {
		body, _ := bc.Body(Request{Messages: []schemas.Message{{Role: "user", Content: fmt.Sprint("row ", i)}}})
		line, _ := Line(fmt.Sprint("r", i), body)
		f, err := bc.UploadFile(ctx, "in.jsonl", line)
		if err != nil {
			b.Fatal(err)
		}
		bt, err := bc.CreateBatch(ctx, f, nil)
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, bt.ID)
	}
	b.ResetTimer()
	c0 := cpuTime(b)
	for range b.N {
		for _, id := range ids {
			if _, err := bc.GetBatch(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
	}
	cpu := cpuTime(b) - c0
	perRound := float64(cpu) / float64(b.N)
	b.ReportMetric(perRound/1e6, "cpu-ms/round")
	b.ReportMetric(100*perRound/float64(5*time.Second), "%core@5s")
}
