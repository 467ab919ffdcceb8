package swe

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	htmlreport "github.com/hermes-pipe/hermes-pipe/pipeline/report"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// sectionReport is a report.json as a reader may find it: a regression and
// a task fixed since the baseline (which is relative to the run's folder, as
// swe keeps it).
const sectionReport = `{"model":"m","total_instances":2,"resolved_instances":1,"unresolved_instances":1,"resolved_rate":0.5,
	"instances":{"a__1":{"outcome":"resolved","record_outcome":"resolved","patch_bytes":12,"tests_status":{"FAIL_TO_PASS":{"success":["t1"],"failure":[]},"PASS_TO_PASS":{"success":["t2"],"failure":["t3"]}}},
	"b__2":{"outcome":"unresolved","record_outcome":"unresolved"}},
	"gate":{"verdict":"fail","reasons":["b__2 regressed"],"baseline":"old.json","regressions":["b__2"]}}`

type keepStage struct{}

func (keepStage) Name() string { return "keep" }
func (keepStage) Process(_ context.Context, r *schemas.Record) ([]*schemas.Record, error) {
	return []*schemas.Record{r}, nil
}

// sectionFolder writes a finished swe folder of two records with
// sectionReport and its baseline, which had b__2 resolved, not a__1.
func sectionFolder(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "out")
	o, err := pipeline.OpenOutput(dir, pipeline.OutputOptions{Kind: "swe"})
	if err != nil {
		t.Fatal(err)
	}
	recs := []*schemas.Record{{Key: "a", ID: "a__1", Outcome: OutcomeResolved, Completed: true}, {Key: "b", ID: "b__2", Outcome: OutcomeUnresolved, Completed: true}}
	_, err = pipeline.Run(context.Background(), pipeline.Options{Workers: 1}, pipeline.SliceSource(recs), []pipeline.Stage{keepStage{}}, o)
	if cerr := o.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ReportFile), []byte(sectionReport), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "old.json"), []byte(`{"resolved_ids": ["b__2"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestReportSectionShowsGateAndBaseline(t *testing.T) {
	dir := sectionFolder(t)
	if err := htmlreport.WriteFile(context.Background(), []string{dir}, htmlreport.Options{Sections: []htmlreport.Section{ReportSection{}}}, dir, htmlreport.File); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, htmlreport.File))
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	for _, s := range []string{`<b class="bad">fail</b> against baseline <code>old.json</code>`, `<code>a__1</code>`, `<td class="n">1/1</td>`, `<td class="n">1/2</td>`, `<b class="bad">regressed</b>`, `<b class="ok">fixed</b>`} {
		if !strings.Contains(html, s) {
			t.Errorf("report lacks %q", s)
		}
	}
	if strings.Count(html, "regressed</b>") != 1 {
		t.Errorf("only b__2 regressed")
	}

	// Without a report.json the section shows nothing; a damaged one fails
	// the report, naming it.
	os.Remove(filepath.Join(dir, ReportFile))
	if blk, err := (ReportSection{}).Tally().Block(dir); blk != "" || err != nil {
		t.Errorf("no report: %q, %v", blk, err)
	}
	os.WriteFile(filepath.Join(dir, ReportFile), []byte(`{"instances": 3}`), 0o644)
	if _, err := (ReportSection{}).Tally().Block(dir); err == nil || !strings.Contains(err.Error(), ReportFile) {
		t.Errorf("damaged report: %v", err)
	}
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
