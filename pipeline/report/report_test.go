package report_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/cluster"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
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
			ToolStats:       map[string]schemas.ToolStat{"terminal": {Count: 2, Success: 1, Failure: 1}, "patch": {}},
			ToolErrorCounts: map[string]int{"terminal": 1, "patch": 0},
			DurationMS:      int64(100 * (i + 1)),
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
		`<td>patch</td><td class="n">0</td><td class="n">0</td><td class="n">0</td><td class="n">–</td>`, // never called: no rate
		`<table id="tool-errors"><tr><th>tool error</th><th class="n">count</th></tr><tr><td>terminal</td><td class="n">7</td></tr></table>`,
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
	if strings.Contains(html, `id="rewards"`) || strings.Contains(html, "pass@") {
		t.Error("an ungraded run's report shows rewards")
	}
}

// TestReportRewards: the report of graded records shows stats' reward
// figures: pass rate, pass@k, grader errors, pass rate per outcome and the
// reward histogram.
func TestReportRewards(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	recs := sampleRecords()
	for i, r := range recs {
		passed := i%2 == 0
		v := map[bool]float64{true: 1, false: 0.25}[passed]
		r.PromptIndex, r.Sample = i/4, i%4 // prompt 0: 4 samples, prompt 1: 3
		r.Reward, r.Grade = &v, &schemas.Grade{Grader: "cmd", Passed: &passed, Value: &v}
		if i == 5 {
			r.Reward, r.Grade = nil, &schemas.Grade{Grader: "cmd", Error: "verify timed out"}
		}
	}
	writeFolder(t, dir, "generate", recs)
	d, err := report.Build(context.Background(), []string{dir}, report.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := report.Write(&buf, d); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	st := d.Stats
	if st.Reward == nil || st.Reward.Graded != 7 || st.Reward.Passed != 4 || st.Reward.Errored != 1 {
		t.Fatalf("statistics: %+v", st.Reward)
	}
	// Even records pass (reward 1), 1 and 3 fail (0.25), 5's grader fails.
	// api_error (records 0, 3, 6): 0 and 6 passed; completed (1, 2, 4, 5):
	// 2 and 4 passed. Prompt 0 (records 0-3) passes 2 of 4, prompt 1 (4-6)
	// 2 of 3.
	for _, s := range []string{
		`<div class="card" id="pass-rate"><b>57.1%</b>pass rate (4 of 7 graded)</div>`,
		`<b>58.3%</b>pass@1</div>`,
		`<b>100.0%</b>pass@4</div>`,
		`2 prompts have graded samples, at most 4 each`,
		`<div class="card" id="grader-errors"><b>1</b>grader errors (reward null)</div>`,
		`<b>0.75</b>mean reward (min 0.25, max 1)`,
		`<td class="ok">completed</td><td class="n">4</td><td class="n">2</td><td class="n">50.0%</td>`,
		`<td class="bad">api_error</td><td class="n">3</td><td class="n">2</td><td class="n">66.7%</td>`,
		`<tr><td>0.2–0.3</td><td class="n">2</td>`,
		`<tr><td>0.9–1</td><td class="n">4</td>`,
	} {
		if !strings.Contains(html, s) {
			t.Errorf("report lacks %q", s)
		}
	}
	if math.Abs(st.PassAtK["1"]-(2.0/4+2.0/3)/2) > 1e-12 || st.PassAtK["4"] != 1 {
		t.Errorf("pass@k %v", st.PassAtK)
	}
}

// lines is a Section that counts the records it is given and shows the
// content of its file in the run's folder, as a mode's section would.
type lines struct{ file string }

func (l lines) Tally() report.Tally { return &linesTally{file: l.file} }

type linesTally struct {
	file string
	n    int
}

func (t *linesTally) Record([]byte) { t.n++ }

func (t *linesTally) Block(root string) (template.HTML, error) {
	b, err := os.ReadFile(filepath.Join(root, t.file))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil || !json.Valid(b) {
		return "", fmt.Errorf("%s: not JSON", t.file)
	}
	return template.HTML(fmt.Sprintf("\n<h2 id=%q>%d records</h2>\n", t.file, t.n)), nil
}

// TestReportSections: each section sees every record and adds its block
// after the distributions, in the given order, one line each (an empty one
// for a section with nothing to show); a section's error fails the report.
func TestReportSections(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	writeFolder(t, dir, "generate", sampleRecords())
	if err := os.WriteFile(filepath.Join(dir, "b.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := report.Options{Sections: []report.Section{lines{"a.json"}, lines{"b.json"}, lines{"c.json"}}}
	if err := report.WriteFile(context.Background(), []string{dir}, opts, dir, report.File); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, report.File))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, report.File)); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("%s mode %v (%v), want 0644: an HTML artefact is read by others", report.File, st.Mode().Perm(), err)
	}
	want := "</div>\n\n\n<h2 id=\"b.json\">7 records</h2>\n\n\n\n<script"
	if html := string(b); !strings.Contains(html, want) {
		t.Errorf("report lacks the blocks in order %q:\n%s", want, html[strings.Index(html, "<h2>Distributions"):])
	}
	if err := os.WriteFile(filepath.Join(dir, "a.json"), []byte(`{`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := report.Build(context.Background(), []string{dir}, opts); err == nil || !strings.Contains(err.Error(), "a.json: not JSON") {
		t.Errorf("a section's error: %v", err)
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

// TestReportHeaderShowsRunAndSpend: the header names the model, the run's
// dates and the options it was given (not where it wrote), and the spend
// and retries come before the first section.
func TestReportHeaderShowsRunAndSpend(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	o, err := pipeline.OpenOutput(dir, pipeline.OutputOptions{Kind: "generate",
		Options: map[string]any{"model": "m-1", "samples": 2, "temperature": 0.7, "out": dir, "progress": "none"},
		Retries: func() outdir.Retries { return outdir.Retries{RateLimited: 4, Timeout: 1} }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err = pipeline.Run(context.Background(), pipeline.Options{Workers: 2}, pipeline.SliceSource(sampleRecords()), []pipeline.Stage{keep{}}, o); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := report.Build(context.Background(), []string{dir}, report.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := report.Write(&buf, d); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	first := strings.Index(html, "<h2>")
	if first < 0 {
		t.Fatal("no section")
	}
	head := html[:first]
	date := d.Run.Created.UTC().Format("2006-01-02")
	for _, want := range []string{
		`<td id="run-model"><code>m-1</code></td>`,
		`<td id="run-date">` + date,
		`<code>--samples 2</code> · <code>--temperature 0.7</code>`,
		`<div class="card" id="spend-top"><b>$1.0000</b>spend (3 records unpriced)</div>`,
		`<div class="card" id="retries"><b>5</b>retries (4 429 rate-limited, 1 timeout)</div>`,
	} {
		if !strings.Contains(head, want) {
			t.Errorf("header lacks %q:\n%s", want, head)
		}
	}
	if strings.Contains(head, "--out") || strings.Contains(head, "--progress") || strings.Contains(head, "--model") {
		t.Errorf("header lists where the run wrote or the model as a setting:\n%s", head)
	}
}
