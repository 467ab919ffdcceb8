package cron

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A triggered job runs once at the next tick as its own occurrence, keyed
// by the instant of the trigger; the schedule and the repeat count do not
// move, and a second tick runs nothing.
func TestTriggerRunsOnceAtTheNextTick(t *testing.T) {
	home := t.TempDir()
	clock := newFakeClock(utc("2026-05-01T08:00:00Z"))
	agent := &fakeAgent{reply: "report"}
	s := newTestScheduler(t, home, clock, agent)
	j := addJob(t, s, JobSpec{Schedule: "0 9 * * *", Prompt: "daily report"})

	got, pending, err := TriggerJob(context.Background(), s.Store, j.ID, clock.Now())
	if err != nil || pending || got.TriggeredAt != "2026-05-01T08:00:00Z" {
		t.Fatalf("trigger: %+v pending %v err %v", got, pending, err)
	}
	if _, pending, err = TriggerJob(context.Background(), s.Store, j.ID, clock.Now()); err != nil || !pending {
		t.Fatalf("second trigger: pending %v err %v", pending, err)
	}
	clock.Set(utc("2026-05-01T08:00:20Z"))
	rep, err := s.Tick(context.Background())
	if err != nil || len(rep.Results) != 1 || rep.Results[0].State != StateDone {
		t.Fatalf("tick: %+v %v", rep, err)
	}
	if c := rep.Claims[0]; c.Trigger != TriggerNext || c.ExecutionID != ExecutionID(j.ID, utc("2026-05-01T08:00:00Z"), TriggerNext) {
		t.Fatalf("claim %+v", c)
	}
	if n := agent.count(j.ID + "@2026-05-01T08:00:00Z"); n != 1 {
		t.Fatalf("agent ran %d times for the trigger", n)
	}
	if rep, err = s.Tick(context.Background()); err != nil || len(rep.Claims) != 0 {
		t.Fatalf("second tick: %+v %v", rep, err)
	}
	tx, _ := s.Store.Load()
	after, _ := tx.Get(j.ID)
	if after.TriggeredAt != "" || after.NextRunAt != "2026-05-01T09:00:00Z" || after.Repeat.Completed != 0 || after.LastStatus != "ok" {
		t.Fatalf("job after the triggered run: %+v", after)
	}
	h, err := s.Ledger.History(context.Background(), j.ID, 0)
	if err != nil || len(h) != 1 || h[0].Trigger != TriggerNext || h[0].State != StateDone {
		t.Fatalf("history %+v %v", h, err)
	}
	// The schedule goes on as before.
	clock.Set(utc("2026-05-01T09:00:10Z"))
	if rep, err = s.Tick(context.Background()); err != nil || len(rep.Results) != 1 || rep.Claims[0].Trigger != TriggerSched {
		t.Fatalf("scheduled tick: %+v %v", rep, err)
	}
	if agent.total() != 2 {
		t.Fatalf("agent ran %d times, want 2", agent.total())
	}
}

// A pass that recorded the triggered occurrence in the ledger and died
// before jobs.json was written leaves the trigger pending: the next pass
// finds the row, clears the trigger and does not run it again (the row of
// the dead process is marked unknown, as any other).
func TestTriggerIsNotRunTwiceAfterACrashMidPass(t *testing.T) {
	home := t.TempDir()
	clock := newFakeClock(utc("2026-05-01T08:00:00Z"))
	agent := &fakeAgent{reply: "x"}
	s := newTestScheduler(t, home, clock, agent)
	j := addJob(t, s, JobSpec{Schedule: "0 9 * * *", Prompt: "p"})
	if _, _, err := TriggerJob(context.Background(), s.Store, j.ID, clock.Now()); err != nil {
		t.Fatal(err)
	}
	// The crashed pass: its ledger transaction committed under an owner
	// whose process is gone; its store write never happened.
	dead, err := OpenLedger(context.Background(), filepath.Join(home, "cron", "executions.db"))
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	dead.owner = host + "/2147483646/1"
	err = dead.Batch(context.Background(), func(b *LedgerTx) error {
		_, _, err := b.Insert(context.Background(), j.ID, clock.Now(), TriggerNext, StateClaimed, "", clock.Now())
		return err
	})
	dead.Close()
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(30e9)
	rep, err := s.Tick(context.Background())
	if err != nil || len(rep.Claims) != 0 || len(rep.Recovered) != 1 {
		t.Fatalf("tick after the crash: %+v %v", rep, err)
	}
	if agent.total() != 0 {
		t.Fatalf("the triggered run ran again after the crash")
	}
	tx, _ := s.Store.Load()
	if after, _ := tx.Get(j.ID); after.TriggeredAt != "" {
		t.Fatalf("trigger still pending: %s", after.TriggeredAt)
	}
	if got := statesOf(t, s.Ledger, j.ID); len(got) != 1 || got[0] != "unknown@2026-05-01T08:00:00Z" {
		t.Fatalf("history %v", got)
	}
}

// A paused job cannot be triggered; a job paused after its trigger has it
// recorded skipped, and alerted, instead of run.
func TestTriggerOfAPausedJob(t *testing.T) {
	home := t.TempDir()
	clock := newFakeClock(utc("2026-05-01T08:00:00Z"))
	agent := &fakeAgent{reply: "x"}
	s := newTestScheduler(t, home, clock, agent)
	j := addJob(t, s, JobSpec{Schedule: "0 9 * * *", Prompt: "p"})
	if _, _, err := TriggerJob(context.Background(), s.Store, j.ID, clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := PauseJob(context.Background(), s.Store, home, j.ID, clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := TriggerJob(context.Background(), s.Store, j.ID, clock.Now()); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "paused") {
		t.Fatalf("trigger of a paused job: %v", err)
	}
	if _, _, err := TriggerJob(context.Background(), s.Store, "nosuchjob", clock.Now()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("trigger of an unknown job: %v", err)
	}
	rep, err := s.Tick(context.Background())
	if err != nil || len(rep.Claims) != 0 || rep.Skipped != 1 || agent.total() != 0 {
		t.Fatalf("tick: %+v %v (agent ran %d)", rep, err, agent.total())
	}
	h, _ := s.Ledger.History(context.Background(), j.ID, 0)
	if len(h) != 1 || h[0].State != StateSkipped || !strings.Contains(h[0].Error, "paused") || !strings.Contains(h[0].Delivery, "local") {
		t.Fatalf("history %+v", h)
	}
	tx, _ := s.Store.Load()
	if after, _ := tx.Get(j.ID); after.TriggeredAt != "" {
		t.Fatalf("trigger still pending after its outcome was recorded")
	}
}
