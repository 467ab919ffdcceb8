package swe

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sectionReport is a report.json as a reader may find it: a regression and
// a task fixed since the baseline (which is relative to the run's folder, as
// swe keeps it).
const sectionReport = `{"model":"m","total_instances":2,"resolved_instances":1,"unresolved_instances":1,"resolved_rate":0.5,
	"instances":{"a__1":{"outcome":"resolved","record_outcome":"resolved","patch_bytes":12,"tests_status":{"FAIL_TO_PASS":{"success":["t1"],"failure":[]},"PASS_TO_PASS":{"success":["t2"],"failure":["t3"]}}},
	"b__2":{"outcome":"unresolved","record_outcome":"unresolved"}},
	"gate":{"verdict":"fail","reasons":["b__2 regressed"],"baseline":"old.json","regressions":["b__2"]}}`

// sectionFolder writes a swe folder's sectionReport and its baseline,
// which had b__2 resolved, not a__1.
func sectionFolder(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ReportFile), []byte(sectionReport), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "old.json"), []byte(`{"resolved_ids": ["b__2"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestViewerReadsTheReport: the viewer's record page gets each task's line
// in its own form, and the change against the baseline the report shows.
func TestViewerReadsTheReport(t *testing.T) {
	dir := sectionFolder(t)
	r, ok, err := LoadReport(dir)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	if !r.BaselineRegular(dir) {
		t.Fatal("old.json is a regular file")
	}
	if err := r.LoadBaseline(dir); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"a__1": ChangeFixed, "b__2": ChangeRegressed, "c__3": ChangeStillUnresolved} {
		if got := r.BaselineChange(id); got != want {
			t.Errorf("%s: %q, want %q", id, got, want)
		}
	}
	b, _ := json.Marshal(r.Instances["a__1"].Shown())
	want := `{"outcome":"resolved","record_outcome":"resolved","reason":"","patch_bytes":12,"agent_ms":0,"harness_ms":0,"tests_status":{"FAIL_TO_PASS":{"failure":[],"success":["t1"]},"PASS_TO_PASS":{"failure":["t3"],"success":["t2"]}}}`
	if string(b) != want {
		t.Errorf("shown\n%s\nwant\n%s", b, want)
	}
	if b, _ := json.Marshal(r.Instances["b__2"].Shown()); !strings.HasSuffix(string(b), `"tests_status":null}`) {
		t.Errorf("no tests: %s", b)
	}
	if _, ok, err := LoadReport(t.TempDir()); ok || err != nil {
		t.Errorf("no report: %v %v", ok, err)
	}
}

// TestBaselineOnlyRegularFiles: the gate's baseline path that report.json
// records is read by the viewer only when it names a regular file (or
// nothing).
func TestBaselineOnlyRegularFiles(t *testing.T) {
	d := t.TempDir()
	os.WriteFile(filepath.Join(d, "base.json"), []byte(`{"resolved_ids":[]}`), 0o644)
	for p, want := range map[string]bool{"": true, "base.json": true, filepath.Join(d, "base.json"): true, "gone.json": true, "/dev/zero": false, d: false} {
		r := &Report{Gate: &GateResult{Baseline: p}}
		if got := r.BaselineRegular(d); got != want {
			t.Errorf("%q: %v, want %v", p, got, want)
		}
	}
}
