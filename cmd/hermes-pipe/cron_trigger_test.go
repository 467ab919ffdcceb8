package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/stages/cron"
)

// cron trigger marks a script job (--no-agent: no model) to run at the next
// tick and returns at once; list and show say so; the tick runs it exactly
// once and a second tick does not.
func TestCronCLITriggerRunsOnceAtTheNextTick(t *testing.T) {
	home := t.TempDir()
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	deps := cronDeps{Now: func() time.Time { return now }}
	os.MkdirAll(cron.ScriptsDir(home), 0o700)
	os.WriteFile(filepath.Join(cron.ScriptsDir(home), "ping.sh"), []byte("#!/bin/sh\necho pong\n"), 0o700)
	out, err := cronApp(t, deps, "--home", home, "add", "--json", "--tz", "UTC", "--no-agent", "--script", "ping.sh", "@daily")
	if err != nil {
		t.Fatal(err)
	}
	var added struct{ Job cron.Job }
	if err := json.Unmarshal([]byte(out), &added); err != nil {
		t.Fatal(err)
	}
	id := added.Job.ID

	if out, err := cronApp(t, deps, "--home", home, "trigger", id); err != nil || out != "triggered job "+id+"; it runs at the next tick\n" {
		t.Fatalf("trigger: %v %q", err, out)
	}
	if out, err := cronApp(t, deps, "--home", home, "trigger", id); err != nil || !strings.Contains(out, "already triggered at 2026-05-01T10:00:00Z") {
		t.Fatalf("second trigger: %v %q", err, out)
	}
	if out, err := cronApp(t, deps, "--home", home, "list"); err != nil || !strings.Contains(out, "next tick (triggered)") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if out, err := cronApp(t, deps, "--home", home, "show", id); err != nil || !strings.Contains(out, "trigger:  pending since 2026-05-01T10:00:00Z") {
		t.Fatalf("show: %v\n%s", err, out)
	}

	now = now.Add(20 * time.Second)
	out, err = cronApp(t, deps, "--home", home, "tick", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep cron.TickReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Results) != 1 || rep.Results[0].State != cron.StateDone || rep.Results[0].Output != "pong\n" {
		t.Fatalf("tick: %v %s", err, out)
	}
	out, err = cronApp(t, deps, "--home", home, "tick")
	if err != nil || !strings.Contains(out, "nothing due") {
		t.Fatalf("second tick: %v %s", err, out)
	}
	out, err = cronApp(t, deps, "--home", home, "history", "--json", id)
	if err != nil {
		t.Fatal(err)
	}
	var hist []cron.Execution
	if err := json.Unmarshal([]byte(out), &hist); err != nil || len(hist) != 1 || hist[0].Trigger != cron.TriggerNext || hist[0].State != cron.StateDone {
		t.Fatalf("history: %v %s", err, out)
	}
	out, err = cronApp(t, deps, "--home", home, "show", id)
	if err != nil || strings.Contains(out, "trigger:") || !strings.Contains(out, "next:     2026-05-02T00:00:00Z") {
		t.Fatalf("show after the run: %v\n%s", err, out)
	}

	if _, err := cronApp(t, deps, "--home", home, "pause", id); err != nil {
		t.Fatal(err)
	}
	if _, err := cronApp(t, deps, "--home", home, "trigger", id); !errors.Is(err, cron.ErrUsage) || !strings.Contains(err.Error(), "resume it") {
		t.Fatalf("trigger of a paused job: %v", err)
	}
	if out, _ := cronApp(t, deps, "trigger", "--help"); !strings.Contains(out, "never runs it twice") {
		t.Fatalf("help:\n%s", out)
	}
}
