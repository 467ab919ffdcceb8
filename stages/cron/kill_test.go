package cron

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary act as a `cron tick` child process for the
// kill -9 test.
func TestMain(m *testing.M) {
	if home := os.Getenv("HERMES_CRON_TEST_CHILD_HOME"); home != "" {
		os.Exit(childTick(home, os.Getenv("HERMES_CRON_TEST_CHILD_NOW")))
	}
	os.Exit(m.Run())
}

func childTick(home, now string) int {
	at, err := time.Parse(time.RFC3339, now)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := NewScheduler(context.Background(), home)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	s.Now = func() time.Time { return at }
	if _, err := s.Tick(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func TestKill9DuringJobEndsUnknownAndIsNotRerun(t *testing.T) {
	home := t.TempDir()
	clock := newFakeClock(utc("2026-05-01T10:00:00Z"))
	started := filepath.Join(home, "started.txt")
	// The script is found on the host by its unique sleep argument (its
	// own $$ is a pid of its sandbox's namespace).
	token := uniqueSleep()
	writeScript(t, home, "long.sh", "#!/bin/sh\necho $$ >> "+started+"\nexec sleep "+token+"\n")
	s := newTestScheduler(t, home, clock, nil)
	j := addJob(t, s, JobSpec{Schedule: "every 10m", Script: "long.sh", NoAgent: true, Workdir: home})

	occurrence := utc("2026-05-01T10:10:00Z")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "HERMES_CRON_TEST_CHILD_HOME="+home, "HERMES_CRON_TEST_CHILD_NOW="+occurrence.Format(time.RFC3339))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var scriptPID string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if p := sleepers(token); len(p) > 0 {
			scriptPID = fmt.Sprint(p[0])
			break
		}
	}
	if scriptPID == "" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("child never started the script")
	}
	id := ExecutionID(j.ID, occurrence, TriggerSched)
	if e, err := s.Ledger.Get(context.Background(), id); err != nil || e.State != StateRunning {
		t.Fatalf("before kill: %+v %v", e, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	t.Cleanup(func() {
		var pid int
		fmt.Sscan(scriptPID, &pid)
		if pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	// A new tick at the same instant (and a minute later) marks it unknown and does not run it again.
	for _, now := range []time.Time{occurrence, occurrence.Add(time.Minute)} {
		clock.Set(now)
		rep, err := s.Tick(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Claims) != 0 {
			t.Fatalf("tick at %s re-claimed %+v", now, rep.Claims)
		}
	}
	e, err := s.Ledger.Get(context.Background(), id)
	if err != nil || e.State != StateUnknown {
		t.Fatalf("after kill: %+v %v", e, err)
	}
	if h := statesOf(t, s.Ledger, j.ID); len(h) != 1 {
		t.Fatalf("history %v", h)
	}
	b, _ := os.ReadFile(started)
	if n := len(strings.Fields(string(b))); n != 1 {
		t.Fatalf("script started %d times", n)
	}
	// The script died with the scheduler that ran it (parent-death signal).
	alive := func() bool {
		st, err := os.ReadFile("/proc/" + scriptPID + "/stat")
		return err == nil && !strings.Contains(string(st), ") Z")
	}
	for deadline := time.Now().Add(30 * time.Second); alive() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if alive() {
		t.Errorf("script %s outlived its killed scheduler", scriptPID)
	}
}
