package cron

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeHandStore writes jobs.json as a person or another program would:
// no index, any layout.
func writeHandStore(t *testing.T, home, body string) {
	t.Helper()
	dir := filepath.Join(home, "cron")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "jobs.json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(filepath.Join(dir, ".jobs.index"))
}

func TestOverflowingIntervalsAreRefusedAtAdd(t *testing.T) {
	now := utc("2026-05-01T10:00:00Z")
	for _, text := range []string{"every 2562048h", "in 2562048h", "every 36501d", "every 99999999999999999999m", "in 9223372036854775807s"} {
		if s, err := ParseSchedule(text, time.UTC, now); !errors.Is(err, ErrUsage) {
			t.Errorf("%q: accepted as %+v (err %v)", text, s, err)
		}
	}
	if _, err := ParseSchedule("every 36500d", time.UTC, now); err != nil {
		t.Errorf("the maximum interval is refused: %v", err)
	}
	// A stored interval past the maximum (written by hand or by an older
	// version) does not validate either.
	if err := (Schedule{Kind: KindInterval, Minutes: 2562048 * 60}).Validate(); err == nil {
		t.Error("stored overflowing interval validates")
	}
}

// A job whose processing panics while it is claimed becomes that job's
// error (paused, recorded, alerted); the other due jobs run.
func TestClaimPanicIsThatJobsError(t *testing.T) {
	home := t.TempDir()
	clock := newFakeClock(utc("2026-05-01T08:59:00Z"))
	agent := &fakeAgent{reply: "ok"}
	s := newTestScheduler(t, home, clock, agent)
	bad := addJob(t, s, JobSpec{Schedule: "0 9 * * *", Prompt: "bad job"})
	good := addJob(t, s, JobSpec{Schedule: "0 9 * * *", Prompt: "good job"})
	s.beforeAdvance = func(j *Job) {
		if j.ID == bad.ID {
			var jobs []*Job
			_ = jobs[len(j.Name)] // index out of range: a runtime panic, as an overflowing interval once caused
		}
	}
	clock.Set(utc("2026-05-01T09:00:10Z"))
	rep, err := s.Tick(context.Background())
	if err != nil {
		t.Fatalf("tick failed for every job: %v", err)
	}
	if len(rep.Results) != 1 || rep.Results[0].JobID != good.ID || rep.Results[0].State != StateDone {
		t.Fatalf("healthy job did not run: %+v", rep.Results)
	}
	if len(rep.Failed) != 1 || rep.Failed[0].ID != bad.ID || !strings.Contains(rep.Failed[0].Error, "panic") {
		t.Fatalf("failed jobs %+v", rep.Failed)
	}
	tx, _ := s.Store.Load()
	j, _ := tx.Get(bad.ID)
	if j.Runnable() || j.State != StatePaused || !strings.Contains(string(j.PausedReason), "panic") || j.LastStatus != "error" {
		t.Fatalf("failing job left %+v", j)
	}
	if h := statesOf(t, s.Ledger, bad.ID); len(h) != 1 || h[0] != "failed@2026-05-01T09:00:00Z" {
		t.Fatalf("history %v", h)
	}
	alerts, _ := filepath.Glob(filepath.Join(OutputDir(home, bad.ID), "*.md"))
	if len(alerts) != 1 {
		t.Fatalf("alerts %v", alerts)
	}
	if b, _ := os.ReadFile(alerts[0]); !strings.Contains(string(b), "ALERT") || !strings.Contains(string(b), "panic") {
		t.Fatalf("alert text %s", b)
	}
	// The next pass neither repeats the alert nor stops the healthy job.
	s.beforeAdvance = nil
	clock.Set(utc("2026-05-02T09:00:10Z"))
	rep, err = s.Tick(context.Background())
	if err != nil || len(rep.Results) != 1 || len(rep.Failed) != 0 {
		t.Fatalf("second tick %+v %v", rep, err)
	}
}

type panicAgent struct{}

func (panicAgent) RunAgent(context.Context, AgentJob) (AgentResult, error) {
	var p *AgentResult
	return *p, nil // nil dereference: a runtime panic
}

func TestExecutionPanicIsThatExecutionsFailure(t *testing.T) {
	home := t.TempDir()
	clock := newFakeClock(utc("2026-05-01T08:59:00Z"))
	s := newTestScheduler(t, home, clock, panicAgent{})
	j := addJob(t, s, JobSpec{Schedule: "0 9 * * *", Prompt: "agent that crashes"})
	clock.Set(utc("2026-05-01T09:00:10Z"))
	rep, err := s.Tick(context.Background())
	if err != nil || len(rep.Results) != 1 {
		t.Fatalf("tick %+v %v", rep, err)
	}
	if r := rep.Results[0]; r.State != StateFailed || !strings.Contains(r.Error, "panic") || !strings.Contains(r.Delivery, "local:") {
		t.Fatalf("result %+v", r)
	}
	if h := statesOf(t, s.Ledger, j.ID); len(h) != 1 || h[0] != "failed@2026-05-01T09:00:00Z" {
		t.Fatalf("history %v", h)
	}
}

const handGood = `{"id":"good1","name":"good","prompt":"say hi","schedule":{"kind":"interval","minutes":5},"next_run_at":"2026-05-01T09:00:00Z","timezone":"UTC","deliver":"local"}`

func TestNullNextRunAtIsComputed(t *testing.T) {
	home := t.TempDir()
	writeHandStore(t, home, `{"jobs":[
{"id":"every5","prompt":"say hi","schedule":{"kind":"interval","minutes":5},"next_run_at":null,"timezone":"UTC"},
{"id":"daily9","prompt":"say hi","schedule":{"kind":"cron","expr":"0 9 * * *"},"timezone":"UTC"}
]}`)
	clock := newFakeClock(utc("2026-05-01T08:00:00Z"))
	agent := &fakeAgent{reply: "ok"}
	s := newTestScheduler(t, home, clock, agent)
	rep, err := s.Tick(context.Background())
	if err != nil || len(rep.Failed)+len(rep.Invalid) != 0 {
		t.Fatalf("tick %+v %v", rep, err)
	}
	tx, _ := s.Store.Load()
	for id, want := range map[string]string{"every5": "2026-05-01T08:05:00Z", "daily9": "2026-05-01T09:00:00Z"} {
		j, err := tx.Get(id)
		if err != nil || string(j.NextRunAt) != want {
			t.Fatalf("%s next_run_at %q (%v), want %s", id, j.NextRunAt, err, want)
		}
	}
	clock.Set(utc("2026-05-01T09:00:05Z"))
	if _, err := s.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if agent.count("daily9@2026-05-01T09:00:00Z") != 1 || agent.count("every5@2026-05-01T09:00:00Z") != 1 {
		t.Fatalf("runs %v", agent.runs)
	}
}

func TestInvalidStoredJobsAreReportedAndDoNotStopOthers(t *testing.T) {
	home := t.TempDir()
	writeHandStore(t, home, `{"jobs":[
`+handGood+`,
{"id":"bad61","name":"b61","prompt":"say hi","schedule":{"kind":"cron","expr":"61 * * * *"},"next_run_at":"2026-05-01T09:00:00Z","timezone":"UTC"},
{"id":7,"name":"numid","prompt":"say hi","schedule":{"kind":"interval","minutes":5},"next_run_at":"2026-05-01T09:00:00Z","timezone":"UTC"},
{"id":"later","name":"numid","prompt":"say hi","schedule":{"kind":"interval","minutes":5},"next_run_at":"2026-05-01T09:00:00Z","timezone":"UTC","enabled":"yes"}
]}`)
	clock := newFakeClock(utc("2026-05-01T09:00:30Z"))
	agent := &fakeAgent{reply: "ok"}
	s := newTestScheduler(t, home, clock, agent)
	for pass := range 2 {
		rep, err := s.Tick(context.Background())
		if err != nil {
			t.Fatalf("pass %d: tick failed for every job: %v", pass, err)
		}
		if pass == 0 && (len(rep.Results) != 1 || rep.Results[0].JobID != "good1") {
			t.Fatalf("healthy job did not run: %+v", rep.Results)
		}
		got := map[string]string{}
		for _, e := range rep.Invalid {
			got[e.ID] = e.Error
		}
		if len(got) != 3 || !strings.Contains(got["bad61"], "minute field") || !strings.Contains(got["7"], "not a string") || !strings.Contains(got["later"], "enabled") {
			t.Fatalf("pass %d: invalid jobs %+v", pass, rep.Invalid)
		}
	}
	// The 61 job is neither missed nor completed: it is left as it was.
	tx, _ := s.Store.Load()
	j, err := tx.Get("bad61")
	if err != nil || !j.Runnable() || j.NextRunAt != "2026-05-01T09:00:00Z" {
		t.Fatalf("bad61 changed: %+v %v", j, err)
	}
	if h := statesOf(t, s.Ledger, "bad61"); len(h) != 1 || !strings.HasPrefix(h[0], "failed@") {
		t.Fatalf("bad61 history %v", h)
	}
	// Each gets one alert, not one per pass.
	for _, id := range []string{"bad61", "7"} {
		alerts, _ := filepath.Glob(filepath.Join(OutputDir(home, id), "*.md"))
		if len(alerts) != 1 {
			t.Fatalf("%s alerts %v", id, alerts)
		}
	}
	// Once fixed, the job is scheduled again.
	expr := "1 * * * *"
	if _, err := EditJob(context.Background(), s.Store, home, "bad61", JobEdit{Schedule: &expr}, clock.Now()); err != nil {
		t.Fatal(err)
	}
	tx, _ = s.Store.Load()
	if inv := tx.Invalid(); len(inv) != 2 {
		t.Fatalf("after the fix: %+v", inv)
	}
}
