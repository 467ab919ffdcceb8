package compress

import (
	"encoding/json"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"strings"

	"github.com/tidwall/gjson"

	htmlreport "github.com/hermes-pipe/hermes-pipe/pipeline/report"
)

// MetricsMember is the record member holding a row's RowMetrics.
const MetricsMember = "compression_metrics"

// Shown is what report and view show of a record's MetricsMember: compress's
// own outcome ("" when the object has none) and the compression ratio.
type Shown struct {
	Outcome string
	Ratio   float64
}

// ShownOf reads Shown from a record line; ok is false when the line has no
// MetricsMember object.
func ShownOf(line []byte) (s Shown, ok bool) {
	cm := gjson.GetBytes(line, MetricsMember)
	if !cm.IsObject() {
		return s, false
	}
	m := cm.Map()
	return Shown{Outcome: m["outcome"].String(), Ratio: m["compression_ratio"].Float()}, true
}

// ReportSection is compress's part of report.html: the records that carry
// a compress outcome, their ratios, and the run's MetricsFile. It shows in
// any folder that has either.
type ReportSection struct{}

// Tally implements htmlreport.Section.
func (ReportSection) Tally() htmlreport.Tally { return &reportTally{} }

type reportTally struct {
	ratios []float64 // of the records with a compress outcome
}

func (t *reportTally) Record(line []byte) {
	if s, _ := ShownOf(line); s.Outcome != "" {
		t.ratios = append(t.ratios, s.Ratio)
	}
}

func (t *reportTally) Block(root string) (template.HTML, error) {
	v := struct {
		Compressed  int
		Ratios      htmlreport.Histogram
		File        string
		Compression json.RawMessage
	}{Compressed: len(t.ratios), File: MetricsFile}
	if len(t.ratios) > 0 {
		v.Ratios = htmlreport.NewHistogram("compression ratio (compressed / original tokens)", "", t.ratios, 20)
	}
	if b, err := os.ReadFile(filepath.Join(root, MetricsFile)); err == nil && json.Valid(b) {
		v.Compression = b
	}
	if v.Compressed == 0 && len(v.Compression) == 0 {
		return "", nil
	}
	var b strings.Builder
	if err := reportBlock.Execute(&b, v); err != nil {
		return "", fmt.Errorf("render %s block: %w", MetricsMember, err)
	}
	return template.HTML(b.String()), nil
}

var reportBlock = template.Must(template.New("compress").Funcs(htmlreport.Funcs()).Parse(`
<h2>Compression</h2>
<p>{{.Compressed}} records carry compression metrics.</p>
{{if .Ratios.N}}<div class="charts">{{hist .Ratios}}</div>{{end}}
{{with .Compression}}<details open><summary>{{$.File}}</summary><pre id="compression">{{indent .}}</pre></details>{{end}}
`))
