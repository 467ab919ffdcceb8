package main

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/sandbox/fake"
	"github.com/hermes-pipe/hermes-pipe/stages/cron"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// A Hermes home (jobs.json, skills folder, SOUL.md) with a skill job, a
// workdir job with AGENTS.md, a late one-shot and a missed recurring job,
// imported and run under a fake clock, as a Hermes user would.
func TestCronHermesHomeImportedAndRun(t *testing.T) {
	hermes := t.TempDir()
	home := t.TempDir()
	work := t.TempDir()
	write := func(path, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(hermes, "skills", "productivity", "inbox-digest", "SKILL.md"), "---\nname: inbox-digest\n---\nGroup mail by sender; flag anything from the bank.")
	write(filepath.Join(home, "SOUL.md"), "You are Ada, a careful operator.")
	write(filepath.Join(work, "AGENTS.md"), "Always run make check first.")
	jobs := `{"jobs": [
  {"id": "digest0001", "name": "digest", "prompt": "", "skills": ["inbox-digest"], "skill": "inbox-digest",
   "schedule": {"kind": "cron", "expr": "0 9 * * *"}, "repeat": {"times": null, "completed": 0},
   "enabled": true, "state": "scheduled", "next_run_at": "2026-05-01T09:00:00+00:00", "deliver": "local"},
  {"id": "repo000002", "name": "repo check", "prompt": "check the repo",
   "schedule": {"kind": "cron", "expr": "0 9 * * *"}, "repeat": {"times": null, "completed": 0},
   "enabled": true, "next_run_at": "2026-05-01T09:00:00+00:00", "deliver": "local", "workdir": "` + work + `"},
  {"id": "deploy0003", "name": "deploy", "prompt": "check the deploy",
   "schedule": {"kind": "once", "run_at": "2026-05-01T03:30:00+00:00"}, "repeat": {"times": 1, "completed": 0},
   "enabled": true, "next_run_at": "2026-05-01T03:30:00+00:00", "deliver": "local"},
  {"id": "backup0004", "name": "backup", "prompt": "verify last night's backup",
   "schedule": {"kind": "cron", "expr": "0 2 * * *"}, "repeat": {"times": null, "completed": 0},
   "enabled": true, "next_run_at": "2026-05-01T02:00:00+00:00", "deliver": "local"}
], "updated_at": "2026-04-30T23:00:00+00:00"}`
	src := filepath.Join(hermes, "cron", "jobs.json")
	write(src, jobs)

	scripts, err := fakellm.ParseScripts([]byte(`{"scripts": [{"steps": [{"content": "All good."}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	h := fakellm.New(fakellm.Config{Scripts: scripts, KeepRequests: true})
	srv := httptest.NewServer(h)
	defer srv.Close()

	now := time.Date(2026, 5, 1, 9, 0, 30, 0, time.UTC) // the machine was off since 01:00
	deps := cronDeps{
		Agent: &cron.RolloutRunner{Driver: fake.New(), DefaultBaseURL: srv.URL + "/v1", DefaultModel: "m"},
		Now:   func() time.Time { return now },
	}
	out, err := cronApp(t, deps, "--home", home, "import", "--tz", "UTC", "--skills-dir", filepath.Join(hermes, "skills"), src)
	if err != nil || !strings.Contains(out, "imported 4 jobs") || strings.Contains(out, "warning") {
		t.Fatalf("import: %v\n%s", err, out)
	}
	for range 2 { // the second pass finds nothing more to do
		if out, err = cronApp(t, deps, "--home", home, "tick"); err != nil {
			t.Fatalf("tick: %v\n%s", err, out)
		}
		now = now.Add(time.Minute)
	}
	requests := h.Requests()
	reqs := strings.Join(requests, "\n")
	n := len(requests)
	if n != 3 { // digest, repo check, the late one-shot once; the backup was missed
		t.Fatalf("%d model requests:\n%s", n, reqs)
	}
	for _, want := range []string{
		`[IMPORTANT: The user has invoked the \"inbox-digest\" skill`, "flag anything from the bank",
		"You are Ada, a careful operator.", `## AGENTS.md\n\nAlways run make check first.`, "check the deploy",
	} {
		if !strings.Contains(reqs, want) {
			t.Errorf("no request carries %s", want)
		}
	}
	if strings.Contains(reqs, "verify last night's backup") {
		t.Error("the missed backup ran")
	}
	// The missed backup's alert is delivered through its target (local).
	alerts, _ := filepath.Glob(filepath.Join(cron.OutputDir(home, "backup0004"), "*.md"))
	if len(alerts) != 1 {
		t.Fatalf("backup alerts %v", alerts)
	}
	if b, _ := os.ReadFile(alerts[0]); !strings.Contains(string(b), "ALERT") || !strings.Contains(string(b), "status: missed") {
		t.Fatalf("alert %s", b)
	}
	// Every agent execution's trajectory passes verify.
	dirs, _ := filepath.Glob(filepath.Join(home, "cron", "runs", "*", "*"))
	if len(dirs) != 3 {
		t.Fatalf("run folders %v", dirs)
	}
	for _, d := range dirs {
		if rep, err := pipeline.Verify(d); err != nil || !rep.OK() {
			t.Fatalf("verify %s: %+v %v", d, rep.Problems, err)
		}
	}
	// cron history --show prints an execution's trajectory record.
	exec := filepath.Base(dirs[0])
	job := filepath.Base(filepath.Dir(dirs[0]))
	out, err = cronApp(t, deps, "--home", home, "history", "--show", exec, job)
	if err != nil || !strings.Contains(out, `"key":"`+exec+`"`) || !strings.Contains(out, "All good.") {
		t.Fatalf("history --show: %v\n%s", err, out)
	}
	if _, err := cronApp(t, deps, "--home", home, "history", "--show", exec, "backup0004"); err == nil {
		t.Fatal("an execution of another job was shown")
	}
}
