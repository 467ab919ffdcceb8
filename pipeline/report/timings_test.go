package report_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline/report"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// TestReportTimings: the report shows where the records' wall time went,
// each part that took time with its share and percentiles, and nothing of
// the kind when no record carries timings.
func TestReportTimings(t *testing.T) {
	render := func(recs []*schemas.Record) string {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "out")
		writeFolder(t, dir, "generate", recs)
		d, err := report.Build(context.Background(), []string{dir}, report.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := report.Write(&buf, d); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	if html := render(sampleRecords()); strings.Contains(html, `id="timings"`) {
		t.Fatal("a run without timings shows a timings table")
	}
	recs := sampleRecords()
	for i, r := range recs {
		n := int64(i + 1)
		// duration 100·n: model 60·n, tool 30·n, sandbox start 10·n; queue 5.
		r.Timings = &schemas.Timings{ModelMS: 60 * n, ToolMS: 30 * n, SandboxStartMS: 10 * n, QueueMS: 5}
	}
	html := render(recs)
	// Σ duration 2800 + queue 35 = 2835 ms; model 1680 ms = 59.3 %, p50
	// (rank 3 of 0..6) 240 ms, p90 and p99 (rank 5) 360 ms, max 420 ms.
	for _, s := range []string{
		`Over 7 records, 2.8s of wall time`,
		`<tr><td>model</td><td class="n">59.3%</td>`,
		`<td class="n">1.7s</td><td class="n">240ms</td><td class="n">360ms</td><td class="n">360ms</td><td class="n">420ms</td></tr>`,
		`<tr><td>sandbox_start</td>`,
		`<tr><td>queue</td><td class="n">1.2%</td>`,
	} {
		if !strings.Contains(html, s) {
			t.Errorf("report lacks %q", s)
		}
	}
	if strings.Contains(html, `<td>grader</td>`) || strings.Contains(html, `<td>sandbox_close</td>`) {
		t.Error("a part that took no time is listed")
	}
}
