package compress

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// TestBatcherAdoptsUnnotedBatch plays the two crashes between upload and
// batch creation: a batch made from a journalled file but not journalled
// itself is found by its input file and polled (not created again), and a
// journalled file without a batch gets exactly one.
func TestBatcherAdoptsUnnotedBatch(t *testing.T) {
	for _, created := range []bool{true, false} {
		fk := fakellm.New(fakellm.Config{SummaryWords: 5})
		srv := httptest.NewServer(fk)
		defer srv.Close()
		bc, err := llm.NewBatch(llm.Options{BaseURL: srv.URL + "/v1", Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		req := llm.Request{Messages: []schemas.Message{{Role: "user", Content: "summarise this"}}}
		body, _ := bc.Body(req)
		id := requestID("row1", 1, body, 1)
		line, _ := llm.Line(id, body)
		file, err := bc.UploadFile(ctx, "in.jsonl", line)
		if err != nil {
			t.Fatal(err)
		}
		if created {
			if _, err := bc.CreateBatch(ctx, file, nil); err != nil {
				t.Fatal(err)
			}
		}
		dir := t.TempDir()
		var j []byte
		for _, e := range []batchEntry{{T: "group", Group: "g1", IDs: []string{id}}, {T: "file", Group: "g1", File: file}} {
			b, _ := json.Marshal(e)
			j = append(append(j, b...), '\n')
		}
		if err := os.WriteFile(filepath.Join(dir, BatchFile), j, 0o644); err != nil {
			t.Fatal(err)
		}
		bt, err := openBatcher(ctx, dir, false, BatchOptions{API: true, Client: bc, PollMin: 5 * time.Millisecond, Collect: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := bt.summary(ctx, &rowCall{key: "row1"}, req)
		if err != nil || resp.Message.Content == "" || !resp.Batch {
			t.Fatalf("created=%v: %+v %v", created, resp, err)
		}
		if err := bt.close(); err != nil {
			t.Fatal(err)
		}
		if st := fk.Stats(); st.Batches != 1 || st.BatchDuplicates != 0 {
			t.Errorf("created=%v: %d batches, %d duplicates; want one batch", created, st.Batches, st.BatchDuplicates)
		}
		// A third run finds the reply in the journal and asks nothing.
		bt, err = openBatcher(ctx, dir, false, BatchOptions{API: true, Client: bc, PollMin: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		again, err := bt.summary(ctx, &rowCall{key: "row1"}, req)
		_ = bt.close()
		if err != nil || again.Message.Content != resp.Message.Content || fk.Stats().Batches != 1 {
			t.Errorf("created=%v: from the journal %+v %v (%d batches)", created, again, err, fk.Stats().Batches)
		}
	}
}

// gateClient answers each Chat once the test releases it, noting the most
// calls it held at once.
type gateClient struct {
	mu       sync.Mutex
	in, most int
	release  chan struct{}
}

func (g *gateClient) Chat(ctx context.Context, _ llm.Request) (llm.Response, error) {
	g.mu.Lock()
	g.in++
	g.most = max(g.most, g.in)
	g.mu.Unlock()
	defer func() { g.mu.Lock(); g.in--; g.mu.Unlock() }()
	select {
	case <-g.release:
		return llm.Response{Message: schemas.Message{Role: "assistant", Content: "ok"}}, nil
	case <-ctx.Done():
		return llm.Response{}, ctx.Err()
	}
}

func (g *gateClient) inFlight() int { g.mu.Lock(); defer g.mu.Unlock(); return g.in }

// TestBatchWorkersBoundDirectCalls: with the Batch API a run keeps
// BatchRowsInFlight rows in work whatever --workers says (rows waiting on a
// batch hold no worker) and --workers bounds the fallback's direct calls:
// six rows falling back at once with DirectWorkers 2 never have more than
// two calls out.
func TestBatchWorkersBoundDirectCalls(t *testing.T) {
	o := Options{Batch: BatchOptions{API: true, Client: &llm.BatchClient{}}}
	o.Workers = 8
	if err := o.useBatch(nil, &lazyBatcher{}); err != nil {
		t.Fatal(err)
	}
	if o.Workers != BatchRowsInFlight || o.Batch.DirectWorkers != 8 {
		t.Fatalf("under the Batch API: %d rows in work, %d direct calls at once; want %d and --workers' 8", o.Workers, o.Batch.DirectWorkers, BatchRowsInFlight)
	}

	srv := httptest.NewServer(fakellm.New(fakellm.Config{}))
	defer srv.Close()
	bc, err := llm.NewBatch(llm.Options{BaseURL: srv.URL + "/v1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	g := &gateClient{release: make(chan struct{})}
	bt, err := openBatcher(context.Background(), t.TempDir(), true, BatchOptions{API: true, Client: bc,
		Fallback: BatchFallbackDirect, Direct: g, DirectWorkers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer bt.close()
	const calls = 6
	errs := make(chan error, calls)
	for i := range calls {
		go func() {
			_, err := bt.direct(context.Background(), &rowCall{key: "r" + strconv.Itoa(i)}, llm.Request{})
			errs <- err
		}()
	}
	for left := calls; left > 0; left-- {
		for g.inFlight() < min(2, left) { // wait for the calls a slot lets out
			runtime.Gosched()
		}
		g.release <- struct{}{}
	}
	for range calls {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if g.most != 2 {
		t.Errorf("at most %d direct calls at once, want DirectWorkers' 2", g.most)
	}
}
