package compress

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReportSection: records with a compress outcome are counted with their
// ratios, and the run's metrics file is shown; a folder with neither shows
// nothing.
func TestReportSection(t *testing.T) {
	dir := t.TempDir()
	tally := ReportSection{}.Tally()
	for _, line := range []string{
		`{"compression_metrics":{"outcome":"compressed","compression_ratio":0.5}}`,
		`{"compression_metrics":{"outcome":"still_over_limit","compression_ratio":1}}`,
		`{"compression_metrics":{"compression_ratio":0.1}}`,
		`{"compression_metrics":"x"}`,
		`{"outcome":"completed"}`,
	} {
		tally.Record([]byte(line))
	}
	if s, ok := ShownOf([]byte(`{"compression_metrics":{"outcome":"compressed","compression_ratio":0.25}}`)); !ok || s != (Shown{"compressed", 0.25}) {
		t.Errorf("ShownOf: %+v %v", s, ok)
	}
	if _, ok := ShownOf([]byte(`{"compression_metrics":[]}`)); ok {
		t.Error("ShownOf of an array")
	}
	blk, err := tally.Block(dir)
	if err != nil || !strings.Contains(string(blk), "<p>2 records carry compression metrics.</p>") || !strings.Contains(string(blk), "(2 records)") || strings.Contains(string(blk), "<details") {
		t.Errorf("block without the metrics file: %v\n%s", err, blk)
	}
	os.WriteFile(filepath.Join(dir, MetricsFile), []byte(`{"b":1,"a":[2]}`), 0o644)
	blk, err = ReportSection{}.Tally().Block(dir)
	if err != nil || !strings.Contains(string(blk), "<p>0 records carry") || !strings.Contains(string(blk), "<summary>"+MetricsFile+"</summary><pre id=\"compression\">{\n  &#34;a&#34;: [\n    2\n  ],\n  &#34;b&#34;: 1\n}</pre>") {
		t.Errorf("block with the metrics file: %v\n%s", err, blk)
	}
	if blk, err := (ReportSection{}).Tally().Block(t.TempDir()); blk != "" || err != nil {
		t.Errorf("nothing of compress: %q %v", blk, err)
	}
}
