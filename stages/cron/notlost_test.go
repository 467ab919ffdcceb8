package cron

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// webhookSink collects the messages a webhook target receives.
type webhookSink struct {
	mu   sync.Mutex
	msgs []Message
}

func (w *webhookSink) serve(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		var m Message
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &m); err != nil {
			t.Errorf("webhook body %s: %v", b, err)
		}
		w.mu.Lock()
		w.msgs = append(w.msgs, m)
		w.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (w *webhookSink) alerts(jobID string) []Message {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Message
	for _, m := range w.msgs {
		if m.JobID == jobID && m.Kind == DeliverAlert {
			out = append(out, m)
		}
	}
	return out
}

// A one-shot found late (the machine was off) runs once, as in Hermes;
// with a starting deadline it is recorded missed instead, and that miss is
// delivered as an alert through the job's target.
func TestLateOneShotRunsOnceUnlessPastItsDeadline(t *testing.T) {
	home := t.TempDir()
	clock := newFakeClock(utc("2026-05-01T10:00:00Z"))
	agent := &fakeAgent{reply: "deploy ok"}
	s := newTestScheduler(t, home, clock, agent)
	sink := &webhookSink{}
	url := sink.serve(t)
	late := addJob(t, s, JobSpec{Schedule: "in 30m", Prompt: "check the deploy", Deliver: "webhook:" + url})
	strict := addJob(t, s, JobSpec{Schedule: "in 30m", Prompt: "check the canary", Deliver: "webhook:" + url, StartingDeadline: 10 * time.Minute})

	clock.Set(utc("2026-05-01T15:00:00Z")) // 4h30m late
	rep, err := s.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if agent.count(late.ID+"@2026-05-01T10:30:00Z") != 1 || agent.total() != 1 {
		t.Fatalf("runs %v", agent.runs)
	}
	if h := statesOf(t, s.Ledger, late.ID); len(h) != 1 || h[0] != "completed@2026-05-01T10:30:00Z" {
		t.Fatalf("late one-shot history %v", h)
	}
	if h := statesOf(t, s.Ledger, strict.ID); len(h) != 1 || h[0] != "missed@2026-05-01T10:30:00Z" || rep.Missed != 1 {
		t.Fatalf("one-shot past its deadline: %v (missed %d)", h, rep.Missed)
	}
	a := sink.alerts(strict.ID)
	if len(a) != 1 || a[0].Status != StateMissed || !strings.Contains(a[0].Text, "did not run") || !strings.Contains(a[0].Text, "grace window of 10m0s") {
		t.Fatalf("missed alert %+v", a)
	}
	// The miss's row records where the alert went.
	e, err := s.Ledger.Get(context.Background(), a[0].ExecutionID)
	if err != nil || !strings.Contains(e.Delivery, "webhook:ok") {
		t.Fatalf("missed row %+v %v", e, err)
	}
	// Nothing more on the next pass: no second run, no second alert.
	clock.Advance(time.Hour)
	if rep, err := s.Tick(context.Background()); err != nil || len(rep.Claims)+rep.Missed != 0 || len(sink.alerts(strict.ID)) != 1 {
		t.Fatalf("second tick %+v %v", rep, err)
	}
}

// Recurring occurrences recorded missed after an outage, and an occurrence
// skipped by the overlap policy, are each delivered as an alert (one per
// job and pass, listing the occurrences).
func TestMissedAndSkippedRunsAreAlerted(t *testing.T) {
	home := t.TempDir()
	clock := newFakeClock(utc("2026-05-01T07:50:00Z"))
	agent := &fakeAgent{reply: "ok"}
	s := newTestScheduler(t, home, clock, agent)
	hourly := addJob(t, s, JobSpec{Schedule: "@hourly", Prompt: "hourly"})
	clock.Set(utc("2026-05-01T11:55:00Z")) // 08:00 ... 11:00 all missed
	if _, err := s.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(OutputDir(home, hourly.ID), "*.md"))
	if len(files) != 1 {
		t.Fatalf("alerts %v", files)
	}
	b, _ := os.ReadFile(files[0])
	for _, want := range []string{"ALERT", "status: missed", "4 occurrences did not run", "2026-05-01T08:00:00Z", "2026-05-01T11:00:00Z"} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("alert lacks %q:\n%s", want, b)
		}
	}

	// Overlap: the 13:00 run is still going when 14:00 comes due.
	hold := make(chan struct{})
	slow := &fakeAgent{reply: "slow", hold: hold, started: make(chan struct{}, 1)}
	s.Agent = slow
	clock.Set(utc("2026-05-01T12:00:05Z"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := s.Tick(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-slow.started:
	case <-done:
		t.Fatal("the 12:00 pass ended without starting the 12:00 run")
	case <-time.After(time.Minute):
		close(hold)
		t.Fatal("the 12:00 run did not start within a minute")
	}
	clock.Set(utc("2026-05-01T13:00:05Z"))
	rep, err := s.ClaimDue(context.Background())
	close(hold)
	<-done
	if err != nil || rep.Skipped != 1 {
		t.Fatalf("overlap pass %+v %v", rep, err)
	}
	files, _ = filepath.Glob(filepath.Join(OutputDir(home, hourly.ID), "*.md"))
	found := false
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if strings.Contains(string(b), "status: skipped") && strings.Contains(string(b), "was skipped") && strings.Contains(string(b), "overlap policy forbid") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no skipped alert among %v", files)
	}
}

// A Hermes file with a late one-shot imports and runs it once.
func TestImportedLateOneShotRunsOnce(t *testing.T) {
	home := t.TempDir()
	src := filepath.Join(t.TempDir(), "jobs.json")
	body := `{"jobs":[{"id":"deploycheck","name":"check deploy","prompt":"check the deploy","schedule":{"kind":"once","run_at":"2026-05-01T10:30:00+00:00"},"repeat":{"times":1,"completed":0},"enabled":true,"next_run_at":"2026-05-01T10:30:00+00:00","deliver":"local"}]}`
	if err := os.WriteFile(src, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock(utc("2026-05-01T18:00:00Z"))
	agent := &fakeAgent{reply: "ok"}
	s := newTestScheduler(t, home, clock, agent)
	rep, err := ImportHermes(context.Background(), s.Store, home, src, "UTC", clock.Now(), false)
	if err != nil || len(rep.Imported) != 1 {
		t.Fatalf("import %+v %v", rep, err)
	}
	for range 2 {
		if _, err := s.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Hour)
	}
	if agent.count("deploycheck@2026-05-01T10:30:00Z") != 1 || agent.total() != 1 {
		t.Fatalf("runs %v", agent.runs)
	}
}
