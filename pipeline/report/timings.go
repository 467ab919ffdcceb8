package report

import (
	"html/template"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
)

// timingsHTML is the report's block on where the records' wall time went
// (Statistics.Timings): each part's share of the wall time and its
// percentiles per record; not a byte when no record carries timings (the
// fixtures' golden reports hold).
const timingsHTML = `{{with .}}{{if .Records}}
<h2>Where the time went</h2>
<p id="timings-wall">Over {{.Records}} records, {{ms .WallMS}} of wall time (waiting for a worker, then the record's duration).</p>
<table id="timings"><tr><th>part</th><th class="n">share</th><th></th><th class="n">total</th><th class="n">p50</th><th class="n">p90</th><th class="n">p99</th><th class="n">max</th></tr>
{{range .Parts}}{{if or .TotalMS .MaxMS}}<tr><td>{{.Name}}</td><td class="n">{{pct .Share}}</td><td><span class="bar" style="width:{{share .Share}}px"></span></td><td class="n">{{ms .TotalMS}}</td><td class="n">{{ms .P50MS}}</td><td class="n">{{ms .P90MS}}</td><td class="n">{{ms .P99MS}}</td><td class="n">{{ms .MaxMS}}</td></tr>
{{end}}{{end}}</table>{{end}}{{end}}`

// addTimings adds the timings block to the report's page template.
func addTimings(page *template.Template) {
	template.Must(page.New("timings").Funcs(template.FuncMap{
		"ms":    pipeline.FormatMS,
		"share": func(f float64) int { return barWidth(f, 1) },
	}).Parse(timingsHTML))
}
