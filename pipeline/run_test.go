package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/cost"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

func TestRunOutOfOrderFinishCatsInOrder(t *testing.T) {
	dir := t.TempDir()
	const n = 150
	stage := &funcStage{name: "slow", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		// Later records finish first within each window of workers.
		time.Sleep(time.Duration((n-rec.PromptIndex)%7) * time.Millisecond)
		complete(rec)
		return []*schemas.Record{rec}, nil
	}}
	sum := runAll(t, dir, ModeFresh, n, stage)
	if sum.Processed != n || sum.Written != n || sum.OK != n || sum.Failed != 0 || sum.Interrupted {
		t.Fatalf("summary %+v", sum)
	}
	if ExitCode(sum) != ExitOK {
		t.Fatalf("exit code %d", ExitCode(sum))
	}
	if len(sum.Stages) != 1 || sum.Stages[0].Calls != n || sum.Stages[0].Total <= 0 {
		t.Fatalf("stage metrics %+v", sum.Stages)
	}
	checkWhole(t, dir, n)
	shards, _ := filepath.Glob(filepath.Join(dir, DataDir, "shard-*.jsonl"))
	if len(shards) < n/7 {
		t.Fatalf("%d shards, want at least %d (row limit 7)", len(shards), n/7)
	}
	var b bytes.Buffer
	if err := Cat(dir, &b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `answer <b>&</b>`) {
		t.Fatalf("HTML characters were escaped: %.200s", b.String())
	}
}

func TestPanicInStageRejectsOnlyThatRecord(t *testing.T) {
	dir := t.TempDir()
	stage := &funcStage{name: "boom", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		if rec.Key == "k00003" {
			panic("kaboom at three")
		}
		complete(rec)
		return []*schemas.Record{rec}, nil
	}}
	sum := runAll(t, dir, ModeFresh, 10, stage)
	if sum.OK != 9 || sum.Failed != 1 || sum.Stages[0].Panics != 1 {
		t.Fatalf("summary %+v", sum)
	}
	if ExitCode(sum) != ExitFailedRows {
		t.Fatalf("exit code %d, want 3", ExitCode(sum))
	}
	recs := catRecords(t, dir)
	if len(recs) != 10 || recs[3].Outcome != schemas.OutcomeInternal || !strings.Contains(recs[3].Error, "kaboom at three") {
		t.Fatalf("record 3: %+v", recs[3])
	}
	var final bytes.Buffer
	if err := CatWith(dir, &final, CatOptions{Final: true}); err != nil {
		t.Fatal(err)
	}
	if strings.Count(final.String(), "\n") != 9 {
		t.Fatalf("final-only cat has %d lines", strings.Count(final.String(), "\n"))
	}
	mustVerify(t, dir)
}

func TestStageErrorBecomesInternalError(t *testing.T) {
	dir := t.TempDir()
	later := 0
	stages := []Stage{
		&funcStage{name: "first", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
			if rec.PromptIndex%2 == 1 {
				return nil, errors.New("odd rows break")
			}
			complete(rec)
			return []*schemas.Record{rec}, nil
		}},
		&funcStage{name: "second", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
			later++ // single-threaded count is fine under Workers: 1 below
			return []*schemas.Record{rec}, nil
		}},
	}
	out := openOut(t, dir, ModeFresh)
	sum, err := Run(context.Background(), Options{Workers: 1}, SliceSource(records(6)), stages, out)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Failed != 3 || sum.OK != 3 || later != 3 {
		t.Fatalf("summary %+v, second stage saw %d records (failed records must skip it)", sum, later)
	}
	recs := catRecords(t, dir)
	if recs[1].Outcome != schemas.OutcomeInternal || recs[1].Error != "stage first: odd rows break" {
		t.Fatalf("record 1: %s %q", recs[1].Outcome, recs[1].Error)
	}
}

func TestFatalErrorStopsRunAndResumeFinishes(t *testing.T) {
	dir := t.TempDir()
	var calls atomic.Int64
	stage := &funcStage{name: "disk", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		calls.Add(1)
		if rec.PromptIndex == 20 {
			return nil, fmt.Errorf("disk full: %w", ErrFatal)
		}
		complete(rec)
		return []*schemas.Record{rec}, nil
	}}
	out := openOut(t, dir, ModeFresh)
	sum, err := Run(context.Background(), Options{Workers: 2}, SliceSource(records(500)), []Stage{stage}, out)
	if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "stage disk: record k00020") {
		t.Fatalf("Run error %v, want fatal naming the stage and record", err)
	}
	if calls.Load() >= 500 || sum.Interrupted {
		t.Fatalf("run went on after the fatal error: %d calls, summary %+v", calls.Load(), sum)
	}
	out.Close()
	mustVerify(t, dir)
	sum = runAll(t, dir, ModeResume, 500, completeStage())
	if sum.Skipped == 0 || sum.Skipped+sum.Processed != 500 {
		t.Fatalf("resume summary %+v", sum)
	}
	checkWhole(t, dir, 500)
}

type lifecycleStage struct {
	funcStage
	mu          sync.Mutex
	events      []string
	preflightOK bool
}

func (s *lifecycleStage) Preflight(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, "preflight")
	if !s.preflightOK {
		return errors.New("image missing")
	}
	return nil
}

func (s *lifecycleStage) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() != nil {
		s.events = append(s.events, "close-with-dead-context")
	}
	s.events = append(s.events, "close")
	return nil
}

func newLifecycle(ok bool) *lifecycleStage {
	s := &lifecycleStage{preflightOK: ok}
	s.funcStage = funcStage{name: "life", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		s.mu.Lock()
		s.events = append(s.events, "process")
		s.mu.Unlock()
		complete(rec)
		return []*schemas.Record{rec}, nil
	}}
	return s
}

func TestPreflightBeforeProcessCloseAlways(t *testing.T) {
	s := newLifecycle(true)
	runAll(t, t.TempDir(), ModeFresh, 3, s)
	if got := strings.Join(s.events, ","); got != "preflight,process,process,process,close" {
		t.Fatalf("events %s", got)
	}

	s = newLifecycle(false)
	out := openOut(t, t.TempDir(), ModeFresh)
	_, err := Run(context.Background(), Options{}, SliceSource(records(3)), []Stage{s}, out)
	if err == nil || !strings.Contains(err.Error(), "preflight life: image missing") {
		t.Fatalf("Run error %v", err)
	}
	if got := strings.Join(s.events, ","); got != "preflight,close" {
		t.Fatalf("events %s", got)
	}

	// Hard stop: Close still gets a live context.
	s = newLifecycle(true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out = openOut(t, t.TempDir(), ModeFresh)
	sum, _ := Run(ctx, Options{}, SliceSource(records(3)), []Stage{s}, out)
	if got := strings.Join(s.events, ","); !strings.HasSuffix(got, ",close") || strings.Contains(got, "dead") {
		t.Fatalf("events %s", got)
	}
	if !sum.Interrupted || ExitCode(sum) != ExitInterrupted {
		t.Fatalf("summary %+v", sum)
	}
}

// budgetStage is a lifecycleStage that spends: it notes the budget it is
// handed.
type budgetStage struct {
	*lifecycleStage
	budget *cost.Budget
}

func (s *budgetStage) UseBudget(b *cost.Budget) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, "budget")
	s.budget = b
}

// TestBudgetHandedBeforePreflight: Run hands its budget to a BudgetUser
// stage once, before its Preflight and any Process, and nil when the run
// has no cap.
func TestBudgetHandedBeforePreflight(t *testing.T) {
	b := cost.NewBudget(10, 0)
	s := &budgetStage{lifecycleStage: newLifecycle(true)}
	out := openOut(t, t.TempDir(), ModeFresh)
	if _, err := Run(context.Background(), Options{Budget: b}, SliceSource(records(2)), []Stage{s}, out); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.events, ","); got != "budget,preflight,process,process,close" || s.budget != b {
		t.Fatalf("events %s, budget %p (want %p)", got, s.budget, b)
	}
	s = &budgetStage{lifecycleStage: newLifecycle(true), budget: b}
	runAll(t, t.TempDir(), ModeFresh, 1, s)
	if s.budget != nil || !strings.HasPrefix(strings.Join(s.events, ","), "budget,preflight,") {
		t.Fatalf("without a cap: events %v, budget %p", s.events, s.budget)
	}
}

// gateStage blocks every record until release is closed (or ctx ends) and
// counts records that entered.
type gateStage struct {
	entered chan string
	release chan struct{}
}

func (g *gateStage) Name() string { return "gate" }
func (g *gateStage) Process(ctx context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
	g.entered <- rec.Key
	select {
	case <-g.release:
		complete(rec)
		return []*schemas.Record{rec}, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("llm call: %w", ctx.Err())
	}
}

func TestSoftStopFinishesInFlightAndCommits(t *testing.T) {
	dir := t.TempDir()
	g := &gateStage{entered: make(chan string, 100), release: make(chan struct{})}
	stop := make(chan struct{})
	out := openOut(t, dir, ModeFresh)
	type result struct {
		sum Summary
		err error
	}
	done := make(chan result)
	go func() {
		sum, err := Run(context.Background(), Options{Workers: 3, Stop: stop}, SliceSource(records(50)), []Stage{g}, out)
		done <- result{sum, err}
	}()
	for range 3 {
		<-g.entered
	}
	// The producer holds no free slot while the three are in flight, and it
	// checks Stop again after taking one, so nothing else can start once
	// stop is closed before the release.
	close(stop)
	close(g.release)
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	if !res.sum.Interrupted || res.sum.Written != 3 || res.sum.Dropped != 0 || ExitCode(res.sum) != ExitInterrupted {
		t.Fatalf("summary %+v", res.sum)
	}
	out.Close()
	if recs := catRecords(t, dir); len(recs) != 3 {
		t.Fatalf("%d records committed, want the 3 in flight", len(recs))
	}
	sum := runAll(t, dir, ModeResume, 50, completeStage())
	if sum.Skipped != 3 || sum.Processed != 47 {
		t.Fatalf("resume summary %+v", sum)
	}
	checkWhole(t, dir, 50)
}

func TestHardStopCommitsWhatFinished(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	stage := &funcStage{name: "hang", fn: func(ctx context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		if n.Add(1) <= 10 {
			complete(rec)
			return []*schemas.Record{rec}, nil
		}
		if n.Load() == 14 {
			cancel()
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	out := openOut(t, dir, ModeFresh)
	sum, err := Run(ctx, Options{Workers: 4}, SliceSource(records(100)), []Stage{stage}, out)
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Interrupted || sum.Written != 10 || sum.Dropped < 1 {
		t.Fatalf("summary %+v", sum)
	}
	out.Close()
	mustVerify(t, dir)
	if recs := catRecords(t, dir); len(recs) != 10 {
		t.Fatalf("%d records after hard stop, want 10", len(recs))
	}
	runAll(t, dir, ModeResume, 100, completeStage())
	checkWhole(t, dir, 100)
}

func TestRetryableSupersededOnResume(t *testing.T) {
	dir := t.TempDir()
	flaky := &funcStage{name: "flaky", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		complete(rec)
		if rec.PromptIndex%3 == 0 {
			rec.Outcome, rec.Error = schemas.OutcomeAPIError, "HTTP 503"
		}
		return []*schemas.Record{rec}, nil
	}}
	sum := runAll(t, dir, ModeFresh, 30, flaky)
	if sum.Failed != 10 || ExitCode(sum) != ExitFailedRows {
		t.Fatalf("first run %+v", sum)
	}
	failedShards, _ := filepath.Glob(filepath.Join(dir, FailedDir, "*.jsonl"))
	if len(failedShards) == 0 {
		t.Fatal("no failed shard written")
	}
	var seen []string
	var mu sync.Mutex
	retry := &funcStage{name: "retry", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		mu.Lock()
		seen = append(seen, rec.Key)
		mu.Unlock()
		complete(rec)
		return []*schemas.Record{rec}, nil
	}}
	sum = runAll(t, dir, ModeResume, 30, retry)
	if sum.Skipped != 20 || len(seen) != 10 || ExitCode(sum) != ExitOK {
		t.Fatalf("resume %+v retried %v", sum, seen)
	}
	checkWhole(t, dir, 30)
	st, err := Stats(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Records != 30 || st.Outcomes[schemas.OutcomeCompleted] != 30 {
		t.Fatalf("stats %+v", st)
	}
	// Nothing left to do: the third run skips everything.
	sum = runAll(t, dir, ModeResume, 30, retry)
	if sum.Skipped != 30 || sum.Processed != 0 {
		t.Fatalf("third run %+v", sum)
	}
}

func TestFilterAndFanOutAreJournalled(t *testing.T) {
	dir := t.TempDir()
	stage := &funcStage{name: "shape", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		switch rec.PromptIndex % 3 {
		case 0:
			return nil, nil // filtered
		case 1:
			a, b := *rec, *rec
			a.Key, b.Key = rec.Key+"-a", rec.Key+"-b"
			b.Sample = 1
			complete(&a)
			complete(&b)
			return []*schemas.Record{&a, &b}, nil
		}
		complete(rec)
		return []*schemas.Record{rec}, nil
	}}
	sum := runAll(t, dir, ModeFresh, 9, stage)
	if sum.Filtered != 3 || sum.Written != 9 || sum.Processed != 9 {
		t.Fatalf("summary %+v", sum)
	}
	recs := catRecords(t, dir)
	var keys []string
	for _, r := range recs {
		keys = append(keys, r.Key)
	}
	if got := strings.Join(keys, " "); got != "k00001-a k00001-b k00002 k00004-a k00004-b k00005 k00007-a k00007-b k00008" {
		t.Fatalf("cat keys %s", got)
	}
	mustVerify(t, dir)
	var calls atomic.Int64
	counting := &funcStage{name: "count", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		calls.Add(1)
		complete(rec)
		return []*schemas.Record{rec}, nil
	}}
	if sum := runAll(t, dir, ModeResume, 9, counting); sum.Skipped != 9 || calls.Load() != 0 {
		t.Fatalf("resume re-ran filtered or fanned-out inputs: %+v", sum)
	}
}

func TestFanOutRetryKeepsFinishedParts(t *testing.T) {
	dir := t.TempDir()
	fan := func(failB bool) *funcStage {
		return &funcStage{name: "fan", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
			a, b := *rec, *rec
			a.Key, b.Key, b.Sample = rec.Key+"-a", rec.Key+"-b", 1
			complete(&a)
			complete(&b)
			if failB {
				b.Outcome = schemas.OutcomeTimeout
			}
			return []*schemas.Record{&a, &b}, nil
		}}
	}
	if sum := runAll(t, dir, ModeFresh, 4, fan(true)); sum.Failed != 4 || sum.OK != 4 {
		t.Fatalf("first run %+v", sum)
	}
	// The inputs are retried (their marker is retryable); the parts that
	// already finished are not written twice.
	if sum := runAll(t, dir, ModeResume, 4, fan(false)); sum.Skipped != 0 || sum.Written != 4 || sum.OK != 4 {
		t.Fatalf("resume %+v", sum)
	}
	recs := catRecords(t, dir)
	if len(recs) != 8 {
		t.Fatalf("%d records", len(recs))
	}
	for _, r := range recs {
		if r.Outcome != schemas.OutcomeCompleted {
			t.Fatalf("%s: %s", r.Key, r.Outcome)
		}
	}
	mustVerify(t, dir)
	if sum := runAll(t, dir, ModeResume, 4, fan(false)); sum.Skipped != 4 {
		t.Fatalf("third run %+v", sum)
	}
}

func TestBadStageOutputIsInternalError(t *testing.T) {
	dir := t.TempDir()
	stage := &funcStage{name: "bad", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		switch rec.PromptIndex {
		case 0:
			return []*schemas.Record{rec}, nil // no outcome
		case 1:
			rec.Outcome = "exploded"
		case 2:
			complete(rec)
			rec.Metadata = []byte("{not json")
		case 3:
			a, b := *rec, *rec // fan-out reusing the input key
			complete(&a)
			complete(&b)
			return []*schemas.Record{&a, &b}, nil
		default:
			complete(rec)
		}
		return []*schemas.Record{rec}, nil
	}}
	sum := runAll(t, dir, ModeFresh, 5, stage)
	if sum.Failed != 4 || sum.OK != 1 {
		t.Fatalf("summary %+v", sum)
	}
	for _, r := range catRecords(t, dir)[:4] {
		if r.Outcome != schemas.OutcomeInternal || r.Error == "" {
			t.Fatalf("record %s: %s %q", r.Key, r.Outcome, r.Error)
		}
	}
	mustVerify(t, dir)
}

// rejectingSource reports every fifth row as bad input.
type rejectingSource struct {
	out *Output
	n   int
	i   int
}

func (s *rejectingSource) Next(ctx context.Context) (*schemas.Record, error) {
	for {
		if s.i >= s.n {
			return nil, io.EOF
		}
		s.i++
		if s.i%5 == 0 {
			s.out.AddReject(schemas.Reject{File: "prompts.jsonl", Line: s.i, Field: "prompt", Reason: "missing", Raw: "{}"})
			continue
		}
		return &schemas.Record{Key: fmt.Sprintf("k%05d", s.i), PromptIndex: s.i}, nil
	}
}

func TestRejectsWrittenPerRun(t *testing.T) {
	dir := t.TempDir()
	out := openOut(t, dir, ModeFresh)
	sum, err := Run(context.Background(), Options{}, &rejectingSource{out: out, n: 20}, []Stage{completeStage()}, out)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Rejected != 4 || sum.Written != 16 || ExitCode(sum) != ExitFailedRows {
		t.Fatalf("summary %+v", sum)
	}
	out.Close()
	data, err := os.ReadFile(filepath.Join(dir, RejectsFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 4 || lines[0] != `{"file":"prompts.jsonl","line":5,"field":"prompt","reason":"missing","raw":"{}"}` {
		t.Fatalf("rejects.jsonl:\n%s", data)
	}
	// The next run has no rejects: the file holds the latest run only.
	runAll(t, dir, ModeResume, 0, completeStage())
	if data, _ := os.ReadFile(filepath.Join(dir, RejectsFile)); len(data) != 0 {
		t.Fatalf("rejects.jsonl after a clean run: %q", data)
	}
	mustVerify(t, dir)
}

func TestProgressPlainLines(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	})
	prog := NewProgress(ProgressOptions{Writer: w, Interval: 10 * time.Millisecond, Label: "generate"})
	// The first record waits for a progress line, so at least one line is
	// printed mid-run however slowly the machine schedules the ticker.
	stage := &funcStage{name: "slow", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		for deadline := time.Now().Add(30 * time.Second); rec.PromptIndex == 0; time.Sleep(time.Millisecond) {
			mu.Lock()
			printed := strings.Contains(buf.String(), "\n")
			mu.Unlock()
			if printed {
				break
			}
			if time.Now().After(deadline) {
				return nil, errors.New("no progress line within 30 s")
			}
		}
		complete(rec)
		return []*schemas.Record{rec}, nil
	}}
	out := openOut(t, t.TempDir(), ModeFresh)
	if _, err := Run(context.Background(), Options{Workers: 2, Progress: prog}, SliceSource(records(40)), []Stage{stage}, out); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	text := buf.String()
	mu.Unlock()
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) < 2 || strings.Contains(text, "\r") {
		t.Fatalf("progress output %q", text)
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "generate: 40/40 done, 40 ok, 0 failed, 0 in flight, 0 skipped") {
		t.Fatalf("last progress line %q", last)
	}
	s := prog.Snapshot()
	if s.Done != 40 || s.Total != 40 || s.ETA != 0 {
		t.Fatalf("snapshot %+v", s)
	}
}

// TestProgressSpend: the progress line carries the tokens and spend of the
// finished records and projects the total from the mean cost per record.
func TestProgressSpend(t *testing.T) {
	var buf syncBuffer
	prog := NewProgress(ProgressOptions{Writer: &buf, Mode: ProgressPlain, Interval: time.Hour, Label: "generate"})
	stage := &funcStage{name: "priced", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		complete(rec)
		rec.Usage = schemas.Usage{PromptTokens: 900, CompletionTokens: 100, TotalTokens: 1000}
		if rec.PromptIndex%2 == 0 {
			c := 0.002
			rec.CostUSD = &c
		}
		return []*schemas.Record{rec}, nil
	}}
	out := openOut(t, t.TempDir(), ModeFresh)
	if _, err := Run(context.Background(), Options{Workers: 2, Progress: prog}, SliceSource(records(20)), []Stage{stage}, out); err != nil {
		t.Fatal(err)
	}
	s := prog.Snapshot()
	if s.Tokens != 20_000 || s.Priced != 10 || math.Abs(s.CostUSD-0.02) > 1e-9 || math.Abs(s.ProjectedUSD-0.02) > 1e-9 {
		t.Fatalf("snapshot %+v", s)
	}
	// Half way, the projection is the mean cost times the records left.
	mid := Snapshot{Total: 100, Done: 40, Tokens: 12_345, CostUSD: 0.4, Priced: 40, ProjectedUSD: 1.0, ETA: -1}
	if line := mid.Line("generate"); !strings.Contains(line, "12.3k tokens, $0.4000 (projected $1.0000)") {
		t.Fatalf("line %q", line)
	}
	if line := (Snapshot{Total: -1, ETA: -1, ProjectedUSD: -1, Tokens: 50}).Line("g"); !strings.HasSuffix(line, "50 tokens") {
		t.Fatalf("unpriced line %q", line)
	}
}

func TestProgressBarMode(t *testing.T) {
	var buf syncBuffer
	prog := NewProgress(ProgressOptions{Writer: &buf, Mode: ProgressBar, Label: "generate"})
	out := openOut(t, t.TempDir(), ModeFresh)
	if _, err := Run(context.Background(), Options{Progress: prog}, SliceSource(records(5)), []Stage{completeStage()}, out); err != nil {
		t.Fatal(err)
	}
	if s := buf.String(); !strings.Contains(s, "5/5") || !strings.Contains(s, "generate 100% |") || !strings.Contains(s, ") 5 ok, 0 failed") {
		t.Fatalf("bar output %q", s)
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestSchedulingUnderRandomLatency(t *testing.T) {
	// Many workers, random latencies, random outcomes: every input ends with
	// exactly one committed record.
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	delays := make([]time.Duration, 300)
	for i := range delays {
		delays[i] = time.Duration(rng.IntN(500)) * time.Microsecond
	}
	stage := &funcStage{name: "rand", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		time.Sleep(delays[rec.PromptIndex])
		complete(rec)
		return []*schemas.Record{rec}, nil
	}}
	out := openOut(t, dir, ModeFresh)
	sum, err := Run(context.Background(), Options{Workers: 16}, SliceSource(records(300)), []Stage{stage}, out)
	if err != nil || sum.Written != 300 {
		t.Fatalf("%+v %v", sum, err)
	}
	out.Close()
	checkWhole(t, dir, 300)
}

// TestProgressBarText draws the bar on a fake clock: the percentage agrees
// with the count (rounded down, so never 100% before the end), the ETA is the
// records left at the rate so far and shrinks to 0, and a projected spend
// shows from the first priced record.
func TestProgressBarText(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	prog := NewProgress(ProgressOptions{Writer: &buf, Mode: ProgressBar, Label: "generate", Now: func() time.Time { return now }})
	prog.started = now
	prog.setTotal(40)
	step := func(n int, after time.Duration) string {
		now = now.Add(after)
		for range n {
			prog.dispatch()
			prog.finish(1, 0)
			c := 0.01
			prog.spend([]*schemas.Record{{Usage: schemas.Usage{TotalTokens: 100}, CostUSD: &c}})
		}
		buf.Reset()
		prog.draw()
		return buf.String()
	}
	cases := []struct {
		n     int
		after time.Duration
		want  []string
	}{
		{8, 8 * time.Second, []string{"\rgenerate  20% |======>", "| 8/40 (1.00 rec/s, 8s elapsed, eta 32s) 8 ok", "$0.0800 (projected $0.4000)"}},
		{24, 24 * time.Second, []string{" 80% |", "32/40 (1.00 rec/s, 32s elapsed, eta 8s)"}},
		{7, 7 * time.Second, []string{" 97% |", "39/40 (1.00 rec/s, 39s elapsed, eta 1s)"}},
		{1, time.Second, []string{"100% |==============================| 40/40", "eta 0s"}},
	}
	for _, c := range cases {
		got := step(c.n, c.after)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Fatalf("bar %q lacks %q", got, w)
			}
		}
		if !strings.HasSuffix(got, "\x1b[K") {
			t.Fatalf("bar %q does not erase the rest of the line", got)
		}
	}
	if got := (Snapshot{Total: -1, ETA: -1, Done: 3}).BarLine("g", 0); !strings.HasPrefix(got, "g 3/? (") || !strings.Contains(got, "eta ?") {
		t.Fatalf("unknown total bar %q", got)
	}
}
