package cron

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSimulatedWeekTwoDaemonsAndTickLoop drives a shared fake clock over a
// week that contains a DST change. Two daemons and a loop of ticks, each with
// its own store and ledger handles, compete for every occurrence; the ledger
// and the runners' own counts must show each fired exactly once.
func TestSimulatedWeekTwoDaemonsAndTickLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("simulated week")
	}
	home := t.TempDir()
	start := utc("2026-03-05T05:00:00Z") // Mar 5 00:00 EST; spring forward on Mar 8
	end := start.Add(7 * 24 * time.Hour)
	clock := newFakeClock(start)
	agent := &fakeAgent{reply: "ok"}
	runsFile := filepath.Join(home, "script-runs.txt")
	writeScript(t, home, "six.sh", "#!/bin/sh\necho \"$HERMES_PIPE_EXECUTION_ID\" >> "+runsFile+"\necho ran\n")

	setup := newTestScheduler(t, home, clock, agent)
	specs := []JobSpec{
		{Name: "gap daily", Schedule: "30 2 * * *", Timezone: "America/New_York", Prompt: "daily in the gap"},
		{Name: "hourly", Schedule: "@hourly", Timezone: "America/New_York", Prompt: "hourly"},
		{Name: "45m", Schedule: "every 45m", Prompt: "interval"},
		{Name: "office", Schedule: "*/20 9-17 * * 1-5", Timezone: "Europe/London", Prompt: "office hours"},
		{Name: "script", Schedule: "0 */6 * * *", Timezone: "America/New_York", Script: "six.sh", NoAgent: true, Workdir: home},
		{Name: "one-shot in gap", Schedule: "2026-03-08T02:30", Timezone: "America/New_York", Prompt: "once"},
	}
	var jobs []*Job
	for _, sp := range specs {
		sp.Overlap = OverlapAllow
		jobs = append(jobs, addJob(t, setup, sp))
	}

	// Expected occurrences, from the schedule alone.
	want := map[string]bool{}
	for _, j := range jobs {
		at, ok := j.NextRun()
		for ok && !at.After(end) {
			want[ExecutionID(j.ID, at, TriggerSched)] = true
			if j.Schedule.Kind == KindOnce {
				break
			}
			at, ok = j.Schedule.Next(at, j.Location())
		}
	}
	if !want[ExecutionID(jobs[5].ID, utc("2026-03-08T07:00:00Z"), TriggerSched)] {
		t.Fatal("one-shot in the gap should fire at 03:00 EDT")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var claimsBy [3]atomic.Int64
	var daemons sync.WaitGroup
	for i := range 2 {
		d := newTestScheduler(t, home, clock, agent)
		daemons.Go(func() {
			_ = d.RunDaemon(ctx, DaemonOptions{
				After: clock.After, ChangeCheck: 20 * time.Millisecond, BusyRetry: time.Minute,
				OnPass: func(r ClaimReport, err error) {
					if err != nil {
						t.Errorf("daemon %d: %v", i, err)
					}
					claimsBy[i].Add(int64(len(r.Claims)))
				},
			})
		})
	}
	ticker := newTestScheduler(t, home, clock, agent)
	for now := start; !now.After(end); now = now.Add(5 * time.Minute) {
		clock.Set(now)
		for {
			rep, err := ticker.Tick(ctx)
			if err != nil {
				t.Fatal(err)
			}
			claimsBy[2].Add(int64(len(rep.Claims)))
			if !rep.Busy {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	// Let the daemons finish what they claimed, then stop them.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		all, err := ticker.Ledger.All(ctx)
		if err != nil {
			t.Fatal(err)
		}
		active := 0
		for _, e := range all {
			if e.State == StateClaimed || e.State == StateRunning {
				active++
			}
		}
		if active == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	daemons.Wait()

	all, err := ticker.Ledger.All(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, e := range all {
		if e.State != StateDone {
			t.Errorf("execution %s ended %s: %s", e.ID, e.State, e.Error)
		}
		if !want[e.ID] {
			t.Errorf("unexpected execution %s", e.ID)
		}
		got[e.ID] = true
	}
	for id := range want {
		if !got[id] {
			t.Errorf("occurrence %s never fired", id)
		}
	}
	for key, n := range agent.runs {
		if n != 1 {
			t.Errorf("agent ran %s %d times", key, n)
		}
	}
	b, _ := os.ReadFile(runsFile)
	lines := strings.Fields(string(b))
	seen := map[string]bool{}
	for _, l := range lines {
		if seen[l] {
			t.Errorf("script ran %s twice", l)
		}
		seen[l] = true
	}
	if len(lines) != 28 {
		t.Errorf("script ran %d times, want 28", len(lines))
	}
	total := claimsBy[0].Load() + claimsBy[1].Load() + claimsBy[2].Load()
	if int(total) != len(want) {
		t.Errorf("claims %d, occurrences %d", total, len(want))
	}
	t.Logf("%d occurrences; claimed by daemon 1: %d, daemon 2: %d, tick loop: %d",
		len(want), claimsBy[0].Load(), claimsBy[1].Load(), claimsBy[2].Load())
}
