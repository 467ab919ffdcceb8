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

// TestCronScriptIsolationFlag: --script-isolation none runs script jobs
// unconfined (in the home folder, as before confinement) with a warning; an
// unknown mode is a usage error.
func TestCronScriptIsolationFlag(t *testing.T) {
	home := t.TempDir()
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	deps := cronDeps{Now: func() time.Time { return now }}
	os.MkdirAll(cron.ScriptsDir(home), 0o700)
	os.WriteFile(filepath.Join(cron.ScriptsDir(home), "where.sh"), []byte("#!/bin/sh\npwd\n"), 0o700)
	out, err := cronApp(t, deps, "--home", home, "add", "--json", "--tz", "UTC", "--no-agent", "--script", "where.sh", "@daily")
	var added struct{ Job cron.Job }
	if err != nil || json.Unmarshal([]byte(out), &added) != nil {
		t.Fatalf("add: %v\n%s", err, out)
	}
	id := added.Job.ID
	if _, err := cronApp(t, deps, "--home", home, "--script-isolation", "maybe", "run", id); !errors.Is(err, cron.ErrUsage) || !strings.Contains(err.Error(), "--script-isolation") {
		t.Fatalf("unknown mode: %v", err)
	}
	out, err = cronApp(t, deps, "--home", home, "--script-isolation", "none", "run", id)
	if err != nil || !strings.Contains(out, "warning: --script-isolation none") || !strings.Contains(out, "completed") {
		t.Fatalf("none: %v\n%s", err, out)
	}
	out, err = cronApp(t, deps, "--home", home, "history", "--json", id)
	if err != nil || !strings.Contains(out, home+`\n`) {
		t.Fatalf("the unconfined script did not run in the home folder: %v\n%s", err, out)
	}
}
