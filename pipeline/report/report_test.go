package report_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/cluster"
	"github.com/hermes-pipe/hermes-pipe/pipeline/report"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

type keep struct{}

func (keep) Name() string { return "keep" }
func (keep) Process(_ context.Context, r *schemas.Record) ([]*schemas.Record, error) {
	return []*schemas.Record{r}, nil
}

// writeFolder writes recs as a finished output folder of kind through the
// runtime, as a mode would.
func writeFolder(t *testing.T, dir, kind string, recs []*schemas.Record) {
	t.Helper()
	o, err := pipeline.OpenOutput(dir, pipeline.OutputOptions{Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	_, err = pipeline.Run(context.Background(), pipeline.Options{Workers: 2}, pipeline.SliceSource(recs), []pipeline.Stage{keep{}}, o)
	if cerr := o.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

func sampleRecords() []*schemas.Record {
	price := 0.25
	var recs []*schemas.Record
	for i := range 7 {
		r := &schemas.Record{
			Key: "k" + string(rune('a'+i)), PromptIndex: i, Outcome: schemas.OutcomeCompleted, Completed: true,
			Conversations: []schemas.Turn{{From: "human", Value: "q"}, {From: "gpt", Value: "<think>\nhm\n</think>\nok"}},
			APICalls:      i + 1, Usage: schemas.Usage{PromptTokens: int64(10 * i), CompletionTokens: 5, TotalTokens: int64(10*i + 5)},
			ToolStats:  map[string]schemas.ToolStat{"terminal": {Count: 2, Success: 1, Failure: 1}},
			DurationMS: int64(100 * (i + 1)),
		}
		if i%3 == 0 {
			r.Outcome, r.Completed = schemas.OutcomeAPIError, false
			r.Error = "boom"
		}
		if i%2 == 0 {
			r.CostUSD = &price
		}
		recs = append(recs, r)
	}
	return recs
}

func TestReportFiguresAreStatsAndSelfContained(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	writeFolder(t, dir, "generate", sampleRecords())
	d, err := report.Build(context.Background(), []string{dir}, report.Options{Title: "sample"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := report.Write(&buf, d); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	if m := regexp.MustCompile(`(?i)(https?:|ftp:|//[a-z0-9.-]+\.[a-z]{2,}/|\bsrc=|\bhref=|@import|url\()`).FindString(html); m != "" {
		t.Fatalf("report refers to something outside itself: %q", m)
	}
	// The embedded figures are `stats --json`'s, byte for byte.
	want, err := cluster.StatsAll([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, _ := json.Marshal(want)
	m := regexp.MustCompile(`(?s)<script type="application/json" id="stats-json">(.*?)</script>`).FindStringSubmatch(html)
	if m == nil {
		t.Fatal("no embedded statistics")
	}
	if m[1] != string(wantJSON) {
		t.Fatalf("embedded statistics\n%s\nwant\n%s", m[1], wantJSON)
	}
	// And the visible figures are the same numbers.
	for _, s := range []string{
		`<b>7</b>records`,
		`<td class="ok">completed</td><td class="n">4</td>`,
		`<td class="bad">api_error</td><td class="n">3</td>`,
		`<td>terminal</td><td class="n">14</td><td class="n">7</td><td class="n">7</td><td class="n">50.0%</td>`,
		`$1.0000 over 4 priced records`,
		`3 records without a price not counted`,
		`turns per record <span class="mute">(7 records)</span>`,
	} {
		if !strings.Contains(html, s) {
			t.Errorf("report lacks %q", s)
		}
	}
	if want.Records != 7 || want.Outcomes[schemas.OutcomeAPIError] != 3 {
		t.Fatalf("fixture premise: %+v", want)
	}
}

func TestReportWriteFileAndSWESection(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	writeFolder(t, dir, "swe", sampleRecords())
	rep := `{"model":"m","total_instances":2,"resolved_instances":1,"unresolved_instances":1,"resolved_rate":0.5,
	"instances":{"a__1":{"outcome":"resolved","record_outcome":"resolved","patch_bytes":12,"tests_status":{"FAIL_TO_PASS":{"success":["t1"],"failure":[]},"PASS_TO_PASS":{"success":["t2"],"failure":["t3"]}}},
	"b__2":{"outcome":"unresolved","record_outcome":"unresolved"}},
	"gate":{"verdict":"fail","reasons":["b__2 regressed"],"baseline":"old.json","regressions":["b__2"]}}`
	if err := os.WriteFile(filepath.Join(dir, "report.json"), []byte(rep), 0o644); err != nil {
		t.Fatal(err)
	}
	// The baseline (relative to the run's folder, as swe keeps it) had
	// b__2 resolved, not a__1: a__1 is fixed since.
	if err := os.WriteFile(filepath.Join(dir, "old.json"), []byte(`{"resolved_ids": ["b__2"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteFile(context.Background(), []string{dir}, report.Options{}, dir, report.File); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, report.File))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, report.File)); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("%s mode %v (%v), want 0644: an HTML artefact is read by others", report.File, st.Mode().Perm(), err)
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
}

func TestHistogram(t *testing.T) {
	h := report.NewHistogram("x", "", []float64{0, 1, 2, 3, 10}, 5)
	if got := h.Counts; len(got) != 5 || got[0] != 2 || got[1] != 2 || got[4] != 1 {
		t.Fatalf("counts %v", got)
	}
	if h := report.NewHistogram("x", "", []float64{4, 4}, 5); len(h.Counts) != 1 || h.Counts[0] != 2 {
		t.Fatalf("one value: %v", h.Counts)
	}
}
