package pipeline

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// countingSource is a SliceSource whose count (SizerContext) waits until
// Next has been called past the first wait records, so it can only finish
// when Run reads the input while counting.
type countingSource struct {
	Source
	n       int
	wait    int
	calls   atomic.Int64
	reached chan struct{}
	once    sync.Once
	counted atomic.Bool
}

func (s *countingSource) Next(ctx context.Context) (*schemas.Record, error) {
	if s.calls.Add(1) > int64(s.wait) {
		s.once.Do(func() { close(s.reached) })
	}
	return s.Source.Next(ctx)
}

func (s *countingSource) TotalContext(ctx context.Context) int {
	select {
	case <-s.reached:
	case <-ctx.Done():
		return -1
	}
	s.counted.Store(true)
	return s.n
}

// TestRunCountsWhileSkippingDone: Run counts the input in the background
// while it passes over the records the folder already holds, and sends no
// record to work before the count is in: the first record it runs sees the
// total set.
func TestRunCountsWhileSkippingDone(t *testing.T) {
	dir := t.TempDir()
	runAll(t, dir, ModeFresh, 20, completeStage())
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d) // a count that never ends fails the test below
		defer cancel()
	}
	src := &countingSource{Source: SliceSource(records(25)), n: 25, wait: 20, reached: make(chan struct{})}
	prog := NewProgress(ProgressOptions{Mode: ProgressPlain, Writer: io.Discard})
	var early atomic.Int64
	var totals []int64
	var mu sync.Mutex
	stage := &funcStage{name: "check", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		if !src.counted.Load() {
			early.Add(1)
		}
		mu.Lock()
		totals = append(totals, prog.Snapshot().Total)
		mu.Unlock()
		complete(rec)
		return []*schemas.Record{rec}, nil
	}}
	out := openOut(t, dir, ModeResume)
	sum, err := Run(ctx, Options{Workers: 2, Progress: prog}, src, []Stage{stage}, out)
	if err != nil {
		t.Fatal(err)
	}
	if !src.counted.Load() || sum.Skipped != 20 || sum.Processed != 5 || early.Load() != 0 {
		t.Fatalf("counted %v, summary %+v, %d records run before the count", src.counted.Load(), sum, early.Load())
	}
	for _, total := range totals {
		if total != 5 {
			t.Errorf("a record ran with progress total %d, want 5 (25 counted, 20 skipped)", total)
		}
	}
}

// sizedSource is a SliceSource that records whether it was asked for its
// count.
type sizedSource struct {
	Source
	asked atomic.Bool
}

func (s *sizedSource) TotalContext(context.Context) int {
	s.asked.Store(true)
	return -1
}

// TestRunCountsOnlyForProgress: without a Progress nothing shows the total,
// so Run does not count the input (a second pass over it); with one it
// does.
func TestRunCountsOnlyForProgress(t *testing.T) {
	for _, withProgress := range []bool{false, true} {
		dir := t.TempDir()
		src := &sizedSource{Source: SliceSource(records(3))}
		var prog *Progress
		if withProgress {
			prog = NewProgress(ProgressOptions{Mode: ProgressPlain, Writer: io.Discard})
		}
		sum, err := Run(context.Background(), Options{Workers: 2, Progress: prog}, src, []Stage{completeStage()}, openOut(t, dir, ModeFresh))
		if err != nil {
			t.Fatal(err)
		}
		if sum.Processed != 3 || src.asked.Load() != withProgress {
			t.Errorf("progress %v: summary %+v, count asked %v", withProgress, sum, src.asked.Load())
		}
	}
}
