package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"sort"
	"strings"
	"sync"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// Style is the CSS the report and the viewer share, inlined in both.
const Style = `
:root{--fg:#1d2330;--mute:#667085;--line:#d8dde6;--bg:#fff;--soft:#f4f6f9;--ok:#2e7d32;--bad:#c62828;--warn:#b26a00;--acc:#2f5bd3}
*{box-sizing:border-box}body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:var(--fg);background:var(--bg);margin:0 auto;padding:16px 24px;max-width:1200px}
h1{font-size:22px;margin:4px 0 12px}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
table{border-collapse:collapse;margin:6px 0}td,th{padding:3px 10px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}th{background:var(--soft);font-weight:600}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}.mute{color:var(--mute)}.ok{color:var(--ok)}.bad{color:var(--bad)}.warn{color:var(--warn)}
.cards{display:flex;flex-wrap:wrap;gap:10px}.card{background:var(--soft);border-radius:6px;padding:8px 14px;min-width:130px}.card b{display:block;font-size:20px}
.bar{display:inline-block;height:10px;background:var(--acc);border-radius:2px;vertical-align:middle}
svg text{font:11px system-ui,sans-serif;fill:var(--mute)}svg rect.b{fill:var(--acc)}
.charts{display:flex;flex-wrap:wrap;gap:18px}
table.run{margin:0 0 12px}table.run td{border:0;padding:1px 10px 1px 0}table.run td:first-child{color:var(--mute);white-space:nowrap}
code,pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
`

// page is parsed at its first use (report and view), not at the start of
// every command.
var page = sync.OnceValue(func() *template.Template {
	t := template.Must(template.Must(template.New("report").Funcs(Funcs()).Parse(pageHTML)).Parse(rewardsHTML))
	addTimings(t)
	return t
})

// rewardsHTML is the page's block of the graded records (the figures of
// stats' reward lines), given the statistics; empty when no record was
// graded.
const rewardsHTML = `{{define "rewards"}}{{with .Reward}}<h2>Rewards</h2>
<div class="cards" id="rewards">
<div class="card" id="pass-rate"><b>{{pct .PassRate}}</b>pass rate ({{.Passed}} of {{.Graded}} graded)</div>
{{range $.PassAtKList}}<div class="card pass-at-k"><b>{{pct .Value}}</b>pass@{{.K}}</div>
{{end}}<div class="card" id="grader-errors"><b>{{.Errored}}</b>grader errors (reward null)</div>
{{if .Rewarded}}<div class="card" id="reward-mean"><b>{{num .Mean}}</b>mean reward (min {{num .Min}}, max {{num .Max}})</div>{{end}}
</div>
<p class="mute" id="pass-at-k-note">{{.Prompts}} prompts have graded samples, at most {{.MaxSamples}} each; pass@k (unbiased estimator) averages the prompts with at least k. A grader error counts as not passed.</p>
<table id="pass-by-outcome"><tr><th>outcome</th><th class="n">graded</th><th class="n">passed</th><th class="n">pass rate</th></tr>
{{range $oc, $c := .ByOutcome}}<tr><td class="{{cls $oc}}">{{$oc}}</td><td class="n">{{$c.Graded}}</td><td class="n">{{$c.Passed}}</td><td class="n">{{pct $c.PassRate}}</td></tr>
{{end}}</table>
{{if .Rewarded}}<table id="reward-histogram"><tr><th>reward</th><th class="n">records</th><th></th></tr>
{{range .Histogram}}{{if .Count}}<tr><td>{{.Range}}</td><td class="n">{{.Count}}</td><td><span class="bar" style="width:{{width .Count $.Reward.Rewarded}}px"></span></td></tr>
{{end}}{{end}}</table>{{end}}
{{end}}{{end}}`

const pageHTML = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>hermes-pipe report{{with .Title}}: {{.}}{{end}}</title>
<style>{{css}}</style></head>
<body>
<h1>hermes-pipe report{{with .Title}}: <code>{{.}}</code>{{end}}</h1>
<p class="mute">{{with .Kind}}{{.}} output, {{end}}{{.Stats.Records}} records. Figures are those of <code>hermes-pipe stats --json</code> (embedded below as JSON).</p>
<table class="run" id="run">
<tr><td>model</td><td id="run-model">{{with .Run.Model}}<code>{{.}}</code>{{else}}<span class="mute">not recorded</span>{{end}}</td></tr>
<tr><td>date</td><td id="run-date">{{if not .Run.Created.IsZero}}{{date .Run.Created}}{{if ne (date .Run.Created) (date .Run.Updated)}} – {{date .Run.Updated}}{{end}}{{else}}<span class="mute">not recorded</span>{{end}}{{with .Run.Runs}} <span class="mute">({{.}} run{{if gt . 1}}s{{end}})</span>{{end}}{{with .Run.Version}} <span class="mute">hermes-pipe {{.}}</span>{{end}}</td></tr>
<tr><td>settings</td><td id="run-settings">{{range $i, $s := .Run.Settings}}{{if $i}} · {{end}}<code>--{{$s.Name}} {{$s.Value}}</code>{{else}}<span class="mute">defaults</span>{{end}}</td></tr>
</table>
{{with .Stats}}
<div class="cards">
<div class="card" id="spend-top"><b>{{if .Cost.PricedRecords}}{{usd .Cost.TotalUSD}}{{else}}unpriced{{end}}</b>spend{{if .Cost.UnpricedRecords}}{{if .Cost.PricedRecords}} ({{.Cost.UnpricedRecords}} records unpriced){{end}}{{end}}</div>
<div class="card" id="records"><b>{{.Records}}</b>records</div>
<div class="card"><b>{{.Completed}}</b>completed</div>
<div class="card"><b>{{.Partial}}</b>partial</div>
<div class="card"><b>{{.APICalls}}</b>API calls</div>
<div class="card"><b>{{.Usage.TotalTokens}}</b>tokens ({{.Usage.PromptTokens}} prompt, {{.Usage.CompletionTokens}} completion)</div>
{{with .Retries}}<div class="card" id="retries"><b>{{.Total}}</b>retries{{with .Causes}} ({{.}}){{end}}</div>{{end}}
</div>
<h2>Outcomes</h2>
<table id="outcomes"><tr><th>outcome</th><th class="n">records</th><th class="n">share</th><th></th></tr>
{{range outcomes .Outcomes}}<tr><td class="{{cls .Name}}">{{.Name}}</td><td class="n">{{.Count}}</td><td class="n">{{ratio .Count $.Stats.Records}}</td><td><span class="bar" style="width:{{width .Count $.Stats.Records}}px"></span></td></tr>
{{end}}</table>
{{template "rewards" .}}<h2>Tools</h2>
{{if .Tools}}<table id="tools"><tr><th>tool</th><th class="n">calls</th><th class="n">success</th><th class="n">failure</th><th class="n">success rate</th></tr>
{{range tools .Tools}}<tr><td>{{.Name}}</td><td class="n">{{.Count}}</td><td class="n">{{.Success}}</td><td class="n">{{.Failure}}</td><td class="n">{{if .Count}}{{pct .SuccessRate}}{{else}}–{{end}}</td></tr>
{{end}}</table>{{else}}<p class="mute">No tool was called.</p>{{end}}
{{with failing .ToolErrors}}<table id="tool-errors"><tr><th>tool error</th><th class="n">count</th></tr>{{range .}}<tr><td>{{.Name}}</td><td class="n">{{.Count}}</td></tr>{{end}}</table>{{end}}
<h2>Reasoning</h2>
<p id="reasoning">{{.Reasoning.TurnsWithReasoning}} of {{.Reasoning.AssistantTurns}} assistant turns carry reasoning ({{if .Reasoning.AssistantTurns}}{{pct .Reasoning.TurnCoverage}}{{else}}–{{end}}); {{.Reasoning.RowsWithReasoning}} records with, {{.Reasoning.RowsWithoutReasoning}} without.</p>
<h2>Spend</h2>
{{if .Cost.PricedRecords}}<p id="spend">{{usd .Cost.TotalUSD}} over {{.Cost.PricedRecords}} priced records, {{usd .Cost.Per1kRowsUSD}} per 1,000 rows{{if .Cost.UnpricedRecords}}; {{.Cost.UnpricedRecords}} records without a price not counted{{end}}.</p>
<table>{{range $k, $v := .Cost.ByOutcomeUSD}}<tr><td>{{$k}}</td><td class="n">{{usd $v}}</td></tr>{{end}}</table>
{{else}}<p class="mute" id="spend">Unknown: no record has a price (give --prices or --price-in/--price-out).</p>{{end}}
<h2>Durations</h2>
<p>total {{.Duration.TotalMS}} ms, mean {{.Duration.MeanMS}} ms, p50 {{.Duration.P50MS}} ms, p95 {{.Duration.P95MS}} ms, max {{.Duration.MaxMS}} ms</p>{{template "timings" .Timings}}
{{end}}
<h2>Distributions</h2>
<div class="charts">{{hist .Turns}}{{hist .Tokens}}{{hist .Durations}}</div>
{{range .Blocks}}{{.}}
{{end}}{{with .Shards}}
<h2>Shards</h2>
<table id="shards"><tr><th>shard</th><th class="n">done</th><th class="n">failed</th><th class="n">retryable</th><th class="n">expected</th><th class="n">remaining</th><th>progress</th></tr>
{{range .}}<tr><td>{{.Dir}}</td><td class="n">{{.Done}}</td><td class="n">{{.Failed}}</td><td class="n">{{.Retryable}}</td><td class="n">{{if lt .Expected 0}}?{{else}}{{.Expected}}{{end}}</td><td class="n">{{if lt .Remaining 0}}?{{else}}{{.Remaining}}{{end}}</td>
<td>{{if gt .Expected 0}}<span class="bar" style="width:{{width .Done .Expected}}px"></span> {{ratio .Done .Expected}}{{else}}{{if .Started}}started{{else}}not started{{end}}{{end}}</td></tr>
{{end}}</table>
{{end}}
<script type="application/json" id="stats-json">{{json .Stats}}</script>
</body></html>
`

func ratio(n, total int) string {
	if total == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(total))
}

func barWidth(n, total float64) int {
	if total <= 0 {
		return 0
	}
	return int(math.Round(200 * n / total))
}

func outcomeClass(o any) string {
	s := fmt.Sprint(o)
	switch s {
	case "completed", "resolved", "compressed", "ok", "skipped_under_target":
		return "ok"
	case "partial", "unresolved", "empty_patch", "still_over_limit", "max_turns":
		return "warn"
	}
	return "bad"
}

type outcomeCount struct {
	Name  schemas.Outcome
	Count int
}

func sortedOutcomes(m map[schemas.Outcome]int) []outcomeCount {
	out := make([]outcomeCount, 0, len(m))
	for k, v := range m {
		out = append(out, outcomeCount{k, v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Name < out[j].Name
	})
	return out
}

type toolRow struct {
	Name string
	pipeline.ToolStatistics
}

// toolErrorCount is one row of the report's tool error table.
type toolErrorCount struct {
	Name  string
	Count int
}

// failingTools is the tools with at least one error, by name: a tool that
// never failed gets no row.
func failingTools(m map[string]int) []toolErrorCount {
	var out []toolErrorCount
	for k, v := range m {
		if v > 0 {
			out = append(out, toolErrorCount{k, v})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func sortedTools(m map[string]pipeline.ToolStatistics) []toolRow {
	out := make([]toolRow, 0, len(m))
	for k, v := range m {
		out = append(out, toolRow{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func indentJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// histSVG draws h as an inline SVG bar chart (no namespace URL: inline SVG
// in HTML needs none).
func histSVG(h Histogram) template.HTML {
	const w, ht, pad = 360, 150, 28
	var b strings.Builder
	fmt.Fprintf(&b, `<figure style="margin:0"><figcaption>%s <span class="mute">(%d records)</span></figcaption>`, template.HTMLEscapeString(h.Name), h.N)
	if h.N == 0 {
		b.WriteString(`<p class="mute">no records</p></figure>`)
		return template.HTML(b.String())
	}
	fmt.Fprintf(&b, `<svg width="%d" height="%d" role="img" aria-label="%s">`, w, ht, template.HTMLEscapeString(h.Name))
	top := slicesMax(h.Counts)
	bw := float64(w-2*pad) / float64(len(h.Counts))
	for i, c := range h.Counts {
		bh := float64(ht-2*pad) * float64(c) / float64(top)
		lo := h.Min + (h.Max-h.Min)*float64(i)/float64(len(h.Counts))
		hi := h.Min + (h.Max-h.Min)*float64(i+1)/float64(len(h.Counts))
		fmt.Fprintf(&b, `<rect class="b" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s–%s: %d</title></rect>`,
			pad+float64(i)*bw+1, float64(ht-pad)-bh, math.Max(bw-2, 1), bh, num(lo), num(hi), c)
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999"/>`, pad, ht-pad, w-pad, ht-pad)
	fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text><text x="%d" y="%d" text-anchor="end">%s %s</text><text x="2" y="%d">%d</text>`,
		pad, ht-pad+14, num(h.Min), w-pad, ht-pad+14, num(h.Max), template.HTMLEscapeString(h.Unit), pad-4, top)
	b.WriteString(`</svg></figure>`)
	return template.HTML(b.String())
}

func slicesMax(c []int) int {
	m := 1
	for _, v := range c {
		m = max(m, v)
	}
	return m
}

func num(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return fmt.Sprintf("%d", int64(f))
	}
	return fmt.Sprintf("%.3g", f)
}
