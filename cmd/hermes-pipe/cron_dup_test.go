package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/stages/cron"
)

// Two jobs of a hand-edited jobs.json with the same id: neither runs, tick
// and list name both with their positions (exit 1; list leaves them out of
// its table, as every job it cannot schedule), the other jobs run, and
// removing one of them makes the other schedulable again.
func TestCronDuplicateIDsReportedNotRun(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "cron"), 0o700); err != nil {
		t.Fatal(err)
	}
	store := `{"jobs":[
{"id":"dup1","name":"first","prompt":"first copy","schedule":{"kind":"interval","minutes":5},"next_run_at":"2026-05-01T09:00:00Z","timezone":"UTC"},
{"id":"good1","name":"good","prompt":"say hi","schedule":{"kind":"interval","minutes":5},"next_run_at":"2026-05-01T09:00:00Z","timezone":"UTC"},
{"id":"dup1","name":"second","prompt":"second copy","schedule":{"kind":"interval","minutes":5},"next_run_at":"2026-05-01T09:00:00Z","timezone":"UTC"}
]}`
	if err := os.WriteFile(filepath.Join(home, "cron", "jobs.json"), []byte(store), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := &echoAgent{}
	deps := cronDeps{Agent: agent, Now: func() time.Time { return time.Date(2026, 5, 1, 9, 0, 30, 0, time.UTC) }}
	const why = `job dup1: id "dup1" is given to jobs #1, #3 of the file`
	out, err := cronApp(t, deps, "--home", home, "tick")
	if err == nil || exitCode(err) != exitFatal || strings.Count(err.Error(), why) != 2 {
		t.Fatalf("tick: %v\n%s", err, out)
	}
	if len(agent.prompts) != 1 || !strings.HasSuffix(agent.prompts[0], "say hi") {
		t.Fatalf("want only the healthy job run, ran %q", agent.prompts)
	}
	out, err = cronApp(t, deps, "--home", home, "list")
	if err == nil || exitCode(err) != exitFatal || strings.Count(err.Error(), why) != 2 || strings.Contains(out, "dup1") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if _, err := cronApp(t, deps, "--home", home, "rm", "dup1"); err != nil {
		t.Fatal(err)
	}
	out, err = cronApp(t, deps, "--home", home, "list")
	if err != nil || strings.Count(out, "dup1") != 1 || strings.Contains(out, "invalid") {
		t.Fatalf("after removing one copy: %v\n%s", err, out)
	}
}

// cron next refuses what cron add refuses, with the same message (exit 2).
func TestCronNextRefusesWhatAddRefuses(t *testing.T) {
	home := t.TempDir()
	deps := cronDeps{Now: func() time.Time { return time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC) }}
	for _, sched := range []string{"0 0 31 2 *", "2026-04-01T09:00:00Z"} {
		_, addErr := cronApp(t, deps, "--home", home, "add", "--tz", "UTC", sched, "x")
		out, nextErr := cronApp(t, deps, "--home", home, "next", "--tz", "UTC", sched)
		if !errors.Is(addErr, cron.ErrUsage) || !errors.Is(nextErr, cron.ErrUsage) || exitCode(nextErr) != exitUsage || out != "" {
			t.Fatalf("%s: add %v; next %v %q", sched, addErr, nextErr, out)
		}
		if !strings.HasSuffix(addErr.Error(), nextErr.Error()) {
			t.Fatalf("%s: add says %q, next says %q", sched, addErr, nextErr)
		}
	}
	out, err := cronApp(t, deps, "--home", home, "next", "--tz", "UTC", "--count", "2", "0 0 29 2 *")
	if err != nil || out != "2028-02-29T00:00:00Z\n2032-02-29T00:00:00Z\n" {
		t.Fatalf("a rare schedule: %v %q", err, out)
	}
}
