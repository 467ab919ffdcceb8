package pipeline

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// timedStage is a stage whose records carry timings (RecordTimer).
type timedStage struct{ *funcStage }

func (timedStage) TimesRecords() {}

// signalSource yields recs and closes read once the last was read.
type signalSource struct {
	recs []*schemas.Record
	i    int
	read chan struct{}
}

func (s *signalSource) Next(context.Context) (*schemas.Record, error) {
	if s.i == len(s.recs) {
		return nil, io.EOF
	}
	s.i++
	if s.i == len(s.recs) {
		close(s.read)
	}
	return s.recs[s.i-1], nil
}

// TestQueueMSIsTheWaitForAWorker: on one worker the second record is read
// while the first is still at work, and waits for the worker: its
// queue_ms covers the first record's work (which goes on well after the
// second was read). A run whose stages keep no timings gets none.
func TestQueueMSIsTheWaitForAWorker(t *testing.T) {
	src := &signalSource{recs: records(2), read: make(chan struct{})}
	var first atomic.Bool
	stage := timedStage{&funcStage{name: "timed", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		if first.CompareAndSwap(false, true) {
			<-src.read
			time.Sleep(200 * time.Millisecond) // the work the second record waits for
		}
		complete(rec)
		return []*schemas.Record{rec}, nil
	}}}
	dir := t.TempDir()
	out := openOut(t, dir, ModeFresh)
	if _, err := Run(context.Background(), Options{Workers: 1}, src, []Stage{stage}, out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	recs := catRecords(t, dir)
	if len(recs) != 2 || recs[0].Timings == nil || recs[1].Timings == nil {
		t.Fatalf("records %+v", recs)
	}
	if recs[1].Timings.QueueMS == 0 || recs[1].Timings.QueueMS <= recs[0].Timings.QueueMS {
		t.Fatalf("queue_ms of the first record %d, of the one that waited %d", recs[0].Timings.QueueMS, recs[1].Timings.QueueMS)
	}

	plain := t.TempDir()
	runAll(t, plain, ModeFresh, 3, completeStage())
	for _, r := range catRecords(t, plain) {
		if r.Timings != nil {
			t.Fatalf("a stage without timings got %+v", r.Timings)
		}
	}
}

// TestTallyTimingsAreThisRunsOnly: a run whose stages keep no timings
// (compress over generate's records) leaves the timings its records brought
// out of the run's tally; a timed run tallies them.
func TestTallyTimingsAreThisRunsOnly(t *testing.T) {
	bring := func(rec *schemas.Record) {
		complete(rec)
		rec.Timings = &schemas.Timings{ModelMS: 100}
		rec.DurationMS = 100
	}
	plain := &funcStage{name: "plain", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		bring(rec)
		return []*schemas.Record{rec}, nil
	}}
	if sum := runAll(t, t.TempDir(), ModeFresh, 3, plain); sum.Tally.Timings != nil {
		t.Fatalf("an untimed run tallied timings %+v", sum.Tally.Timings)
	}
	timed := timedStage{plain}
	sum := runAll(t, t.TempDir(), ModeFresh, 3, timed)
	if tm := sum.Tally.Timings; tm == nil || tm.Records != 3 || tm.Biggest().Name != PartModel || tm.Parts[0].TotalMS != 300 {
		t.Fatalf("a timed run's tally %+v", tm)
	}
}
