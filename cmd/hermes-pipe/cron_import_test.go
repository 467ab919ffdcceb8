package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/stages/cron"
)

// cron import of a Hermes home whose no_agent job names a script that is
// not there: the other jobs (one whose script is in Hermes' scripts
// folder, an agent job) are imported, the job left out is named with its
// script (exit 1), where one missing script once failed the whole import.
func TestCronImportMissingScriptImportsTheRest(t *testing.T) {
	hermes, home := t.TempDir(), t.TempDir()
	write := func(path, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	job := func(id, extra string) string {
		return `{"id": "` + id + `", "name": "` + id + `", ` + extra + `, "schedule": {"kind": "cron", "expr": "0 9 * * *"},
		 "repeat": {"times": null, "completed": 0}, "enabled": true, "next_run_at": null, "deliver": "local"}`
	}
	write(filepath.Join(hermes, "scripts", "ok.sh"), "#!/bin/sh\necho ok\n")
	src := filepath.Join(hermes, "cron", "jobs.json")
	write(src, `{"jobs": [`+strings.Join([]string{
		job("agent00001", `"prompt": "hello"`),
		job("script0002", `"prompt": "", "script": "ok.sh", "no_agent": true`),
		job("gone000003", `"prompt": "", "script": "gone.sh", "no_agent": true`),
	}, ",")+`]}`)
	deps := cronDeps{Now: func() time.Time { return time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC) }}
	out, err := cronApp(t, deps, "--home", home, "import", "--tz", "UTC", src)
	if err == nil || exitCode(err) != exitFatal || !strings.Contains(out, "imported 2 jobs") || !strings.Contains(out, "copied 1 scripts") ||
		!strings.Contains(err.Error(), "gone000003: script gone.sh is neither in "+filepath.Join(hermes, "scripts")) {
		t.Fatalf("import: %v (exit %d)\n%s", err, exitCode(err), out)
	}
	if _, err := cron.ResolveScript(home, "ok.sh"); err != nil {
		t.Fatal(err)
	}
	// --scripts-dir names another folder; the job left out imports then.
	other := t.TempDir()
	write(filepath.Join(other, "gone.sh"), "#!/bin/sh\necho back\n")
	write(src, `{"jobs": [`+job("gone000003", `"prompt": "", "script": "gone.sh", "no_agent": true`)+`]}`)
	if out, err := cronApp(t, deps, "--home", home, "import", "--scripts-dir", other, src); err != nil || !strings.Contains(out, "imported 1 jobs") {
		t.Fatalf("import --scripts-dir: %v\n%s", err, out)
	}
}
