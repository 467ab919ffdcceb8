package cron

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDaemonWakesOnChangeSleepsUntilDueAndDrainsOnStop checks the daemon's
// life: asleep with no jobs, woken by a new job, firing at its instant (not
// before), and on shutdown letting the running job finish.
func TestDaemonWakesOnChangeSleepsUntilDueAndDrainsOnStop(t *testing.T) {
	home := t.TempDir()
	clock := newFakeClock(utc("2026-05-01T10:00:00Z"))
	agent := &fakeAgent{reply: "done", delay: 200 * time.Millisecond}
	d := newTestScheduler(t, home, clock, agent)
	var passes atomic.Int32
	var mu sync.Mutex
	var claimedAt []time.Time
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- d.RunDaemon(ctx, DaemonOptions{
			After: clock.After, ChangeCheck: 10 * time.Millisecond, ShutdownGrace: time.Minute,
			OnPass: func(r ClaimReport, err error) {
				passes.Add(1)
				mu.Lock()
				for _, c := range r.Claims {
					claimedAt = append(claimedAt, c.ClaimedAt)
				}
				mu.Unlock()
			},
		})
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitFor("first pass", func() bool { return passes.Load() >= 1 })
	time.Sleep(50 * time.Millisecond)
	if n := passes.Load(); n != 1 {
		t.Fatalf("daemon polled without a reason: %d passes", n)
	}
	other := newTestScheduler(t, home, clock, nil)
	j := addJob(t, other, JobSpec{Schedule: "every 10m", Prompt: "x"})
	waitFor("wake on change", func() bool { return passes.Load() >= 2 })
	clock.Advance(9 * time.Minute)
	time.Sleep(50 * time.Millisecond)
	if agent.total() != 0 {
		t.Fatal("fired early")
	}
	clock.Advance(time.Minute)
	waitFor("run start", func() bool { return agent.total() == 1 })
	cancel() // SIGTERM: the running job must finish, not be cut off
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("daemon did not stop")
	}
	h := statesOf(t, other.Ledger, j.ID)
	if len(h) != 1 || h[0] != "completed@2026-05-01T10:10:00Z" {
		t.Fatalf("history %v", h)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(claimedAt) != 1 || !claimedAt[0].Equal(utc("2026-05-01T10:10:00Z")) {
		t.Fatalf("claimed at %v", claimedAt)
	}
}
