package cron

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func importJobsJSON(jobs ...string) string {
	return `{"jobs": [` + strings.Join(jobs, ",") + `]}`
}

func scriptJob(id, script string) string {
	return `{"id": "` + id + `", "name": "` + id + `", "prompt": "", "script": "` + script + `", "no_agent": true,
	 "schedule": {"kind": "cron", "expr": "0 9 * * *"}, "repeat": {"times": null, "completed": 0},
	 "enabled": true, "state": "scheduled", "next_run_at": null, "deliver": "local"}`
}

// Importing a Hermes home takes its scripts from <hermes home>/scripts (a
// relative name, an absolute path inside it, a sub-folder); a job whose
// script is nowhere is left out and reported, the others imported.
func TestImportHermesHomeCopiesScripts(t *testing.T) {
	hermes, home := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(hermes, "scripts", "check.sh"), "#!/bin/sh\necho ok\n")
	writeFile(t, filepath.Join(hermes, "scripts", "tools", "disk.sh"), "#!/bin/sh\ndf -h\n")
	writeFile(t, filepath.Join(hermes, "cron", "jobs.json"), importJobsJSON(
		scriptJob("check00001", "check.sh"),
		scriptJob("disk000002", filepath.Join(hermes, "scripts", "tools", "disk.sh")),
		scriptJob("gone000003", "gone.sh"),
	))
	// The Hermes home itself is given: its cron/jobs.json is read.
	rep, err := ImportHermesWith(context.Background(), NewStore(home), home, hermes, ImportOptions{TZ: "UTC", Now: utc("2026-05-01T10:00:00Z")})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rep.Imported)
	if !slices.Equal(rep.Imported, []string{"check00001", "disk000002"}) || len(rep.Rejected) != 0 {
		t.Fatalf("report %+v", rep)
	}
	if why := rep.NotTaken["gone000003"]; !strings.Contains(why, "gone.sh") || !strings.Contains(why, filepath.Join(hermes, "scripts")) || !strings.Contains(why, ScriptsDir(home)) {
		t.Fatalf("not taken %+v", rep.NotTaken)
	}
	if !slices.Equal(rep.Scripts, []string{"check.sh", filepath.Join("tools", "disk.sh")}) || rep.ScriptsDir != filepath.Join(hermes, "scripts") {
		t.Fatalf("scripts %v from %s", rep.Scripts, rep.ScriptsDir)
	}
	tx, err := NewStore(home).Load()
	if err != nil {
		t.Fatal(err)
	}
	j, err := tx.Get("disk000002")
	if err != nil || j.Script != NullString(filepath.Join("tools", "disk.sh")) {
		t.Fatalf("job %+v %v", j, err)
	}
	p, err := ResolveScript(home, string(j.Script))
	if b, _ := os.ReadFile(p); err != nil || string(b) != "#!/bin/sh\ndf -h\n" {
		t.Fatalf("installed script %s: %q %v", p, b, err)
	}
}

// --scripts-dir names the folder for a jobs file anywhere; without it and
// without the script in <home>/cron/scripts the job is not taken (today's
// failure of the whole import); a refused import copies nothing.
func TestImportScriptsDir(t *testing.T) {
	scripts, home := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(scripts, "check.sh"), "#!/bin/sh\necho ok\n")
	src := filepath.Join(t.TempDir(), "jobs.json")
	agent := `{"id": "agent00001", "name": "a", "prompt": "hello", "schedule": {"kind": "cron", "expr": "0 9 * * *"},
	 "repeat": {"times": null, "completed": 0}, "enabled": true, "next_run_at": null, "deliver": "local"}`
	writeFile(t, src, importJobsJSON(scriptJob("check00001", "check.sh"), agent))
	now := utc("2026-05-01T10:00:00Z")

	rep, err := ImportHermesWith(context.Background(), NewStore(home), home, src, ImportOptions{TZ: "UTC", Now: now})
	if err != nil || !slices.Equal(rep.Imported, []string{"agent00001"}) || !strings.Contains(rep.NotTaken["check00001"], "--scripts-dir") {
		t.Fatalf("without a scripts folder: %+v %v", rep, err)
	}

	// A bad job refuses the import: the script copied for the good one is
	// taken back.
	home2 := t.TempDir()
	bad := `{"id": "bad0000001", "name": "b", "prompt": "x", "schedule": {"kind": "cron", "expr": "not a schedule"}, "enabled": true, "deliver": "local"}`
	writeFile(t, src, importJobsJSON(scriptJob("check00001", "check.sh"), bad))
	if _, err := ImportHermesWith(context.Background(), NewStore(home2), home2, src, ImportOptions{TZ: "UTC", Now: now, ScriptsDir: scripts}); !errors.Is(err, ErrUsage) {
		t.Fatalf("bad job: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ScriptsDir(home2), "check.sh")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused import left its script copied: %v", err)
	}

	writeFile(t, src, importJobsJSON(scriptJob("check00001", "check.sh")))
	rep, err = ImportHermesWith(context.Background(), NewStore(home2), home2, src, ImportOptions{TZ: "UTC", Now: now, ScriptsDir: scripts})
	if err != nil || !slices.Equal(rep.Imported, []string{"check00001"}) || !slices.Equal(rep.Scripts, []string{"check.sh"}) {
		t.Fatalf("with --scripts-dir: %+v %v", rep, err)
	}
	if _, err := ImportHermesWith(context.Background(), NewStore(home2), home2, src, ImportOptions{ScriptsDir: filepath.Join(scripts, "none")}); !errors.Is(err, ErrUsage) {
		t.Fatalf("a scripts folder that is not there: %v", err)
	}
}
