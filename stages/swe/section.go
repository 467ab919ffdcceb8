package swe

import (
	"encoding/json"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	htmlreport "github.com/hermes-pipe/hermes-pipe/pipeline/report"
)

// This file is the readers' side of ReportFile: report.html's SWE block
// and the viewer's record page read the report and its gate's baseline
// through it.

// LoadReport reads the ReportFile of the run's folder root for a reader;
// ok is false when there is none (or it cannot be read). A file that is not
// a report is an error naming it.
func LoadReport(root string) (r *Report, ok bool, err error) {
	p := filepath.Join(root, ReportFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, false, nil
	}
	r = &Report{}
	if err := json.Unmarshal(b, r); err != nil {
		return nil, false, fmt.Errorf("%s: %w", p, err)
	}
	return r, true, nil
}

// baselinePaths are the files a baseline path p of a report may be: p when
// it is absolute, else under the run's folder root or relative to the
// working folder (the swe run took it from there), in that order.
func baselinePaths(root, p string) []string {
	if filepath.IsAbs(p) {
		return []string{p}
	}
	return []string{filepath.Join(root, p), p}
}

// LoadBaseline reads the resolved ids of the baseline r.Gate names (as
// ReadBaseline reads them for the gate), so BaselineChange can also tell
// instances fixed since then. A baseline that cannot be read leaves only
// the gate's own lists (regressions, unjudged); its error is returned for
// the caller to mention.
func (r *Report) LoadBaseline(root string) error {
	if r.Gate == nil || r.Gate.Baseline == "" {
		return nil
	}
	var err error
	for _, f := range baselinePaths(root, r.Gate.Baseline) {
		var b []byte
		if b, err = os.ReadFile(f); err != nil {
			continue
		}
		ids, err := parseBaseline(f, b)
		if err != nil {
			return err
		}
		r.baseline = map[string]bool{}
		for _, id := range ids {
			r.baseline[id] = true
		}
		return nil
	}
	return fmt.Errorf("baseline %s: %w", r.Gate.Baseline, err)
}

// BaselineRegular reports whether every file the gate's baseline may be
// (LoadBaseline) is a regular file or absent. A folder may come from
// someone else: a device, a pipe or /proc could block or never end, so a
// reader that serves others (the viewer) loads the baseline only then.
func (r *Report) BaselineRegular(root string) bool {
	if r.Gate == nil || r.Gate.Baseline == "" {
		return true
	}
	for _, f := range baselinePaths(root, r.Gate.Baseline) {
		if st, err := os.Stat(f); err == nil && !st.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// Baseline changes of an instance (BaselineChange).
const (
	ChangeRegressed       = "regressed"
	ChangeUnjudged        = "unjudged"
	ChangeFixed           = "fixed"
	ChangeStillResolved   = "still resolved"
	ChangeStillUnresolved = "still unresolved"
)

// BaselineChange says how instance id moved against the gate's baseline:
// ChangeRegressed and ChangeUnjudged as the gate judged them (its lists);
// with the baseline read (LoadBaseline) also ChangeFixed (resolved now, not
// then), ChangeStillResolved and ChangeStillUnresolved. "" without a
// baseline.
func (r *Report) BaselineChange(id string) string {
	if r.Gate == nil || r.Gate.Baseline == "" {
		return ""
	}
	switch {
	case slices.Contains(r.Gate.Regressions, id):
		return ChangeRegressed
	case slices.Contains(r.Gate.Unjudged, id):
		return ChangeUnjudged
	case r.baseline == nil:
		return ""
	}
	now := r.Instances[id] != nil && r.Instances[id].Outcome == string(OutcomeResolved)
	switch then := r.baseline[id]; {
	case now && !then:
		return ChangeFixed
	case now:
		return ChangeStillResolved
	case then:
		// resolved then and not now, but not in the gate's lists (the
		// baseline changed since the gate read it): still a regression.
		return ChangeRegressed
	}
	return ChangeStillUnresolved
}

// ShownInstance is what the viewer's record page shows of one task's line
// of the report (the "instance" of its answer).
type ShownInstance struct {
	Outcome    string      `json:"outcome"`
	Record     string      `json:"record_outcome"`
	Reason     string      `json:"reason"`
	PatchBytes int         `json:"patch_bytes"`
	AgentMS    int64       `json:"agent_ms"`
	HarnessMS  int64       `json:"harness_ms"`
	Tests      *shownTests `json:"tests_status"`
}

type shownTests struct {
	FailToPass map[string][]string `json:"FAIL_TO_PASS"`
	PassToPass map[string][]string `json:"PASS_TO_PASS"`
}

// Shown is in as the viewer's record page shows it.
func (in *InstanceReport) Shown() ShownInstance {
	s := ShownInstance{Outcome: in.Outcome, Record: in.Record, Reason: in.Reason, PatchBytes: in.PatchBytes,
		AgentMS: in.AgentMS, HarnessMS: in.HarnessMS}
	if t := in.Tests; t != nil {
		split := func(s Split) map[string][]string {
			return map[string][]string{"success": s.Success, "failure": s.Failure}
		}
		s.Tests = &shownTests{FailToPass: split(t.FailToPass), PassToPass: split(t.PassToPass)}
	}
	return s
}

// ReportSection is swe's part of report.html: the run's ReportFile (counts,
// the gate's verdict, each task against the baseline), when the folder has
// one.
type ReportSection struct{}

// Tally implements htmlreport.Section.
func (ReportSection) Tally() htmlreport.Tally { return reportTally{} }

type reportTally struct{}

func (reportTally) Record([]byte) {}

// shownRow is one task's row of the block.
type shownRow struct {
	ID string
	*InstanceReport
	Regressed bool
	Change    string
}

func (reportTally) Block(root string) (template.HTML, error) {
	r, ok, err := LoadReport(root)
	if !ok {
		return "", err
	}
	// An unreadable baseline only loses the "fixed" column; the gate's own
	// lists still show.
	_ = r.LoadBaseline(root)
	rows := make([]shownRow, 0, len(r.Instances))
	for id, in := range r.Instances {
		rows = append(rows, shownRow{ID: id, InstanceReport: in,
			Regressed: r.Gate != nil && slices.Contains(r.Gate.Regressions, id), Change: r.BaselineChange(id)})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].ID < rows[j].ID })
	var b strings.Builder
	if err := reportBlock().Execute(&b, struct {
		*Report
		Rows []shownRow
	}{r, rows}); err != nil {
		return "", fmt.Errorf("render %s block: %w", ReportFile, err)
	}
	return template.HTML(b.String()), nil
}

var reportBlock = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("swe").Funcs(htmlreport.Funcs()).Parse(`
<h2>SWE</h2>
<div class="cards"><div class="card"><b>{{pct .ResolvedRate}}</b>resolved</div><div class="card"><b>{{.Resolved}}</b>resolved</div><div class="card"><b>{{.Unresolved}}</b>unresolved</div><div class="card"><b>{{.EmptyPatch}}</b>empty patch</div><div class="card"><b>{{.Errors}}</b>errors</div><div class="card"><b>{{.Pending}}</b>pending</div></div>
{{with .Gate}}<p id="gate">Gate: <b class="{{if eq .Verdict "pass"}}ok{{else if eq .Verdict "fail"}}bad{{else}}warn{{end}}">{{.Verdict}}</b>{{with .Baseline}} against baseline <code>{{.}}</code>{{end}}{{range .Reasons}}<br>{{.}}{{end}}</p>{{end}}
<table id="swe"><tr><th>instance</th><th>outcome</th><th>record</th><th class="n">FAIL_TO_PASS</th><th class="n">PASS_TO_PASS</th><th class="n">patch bytes</th><th class="n">agent ms</th><th class="n">harness ms</th><th>vs baseline</th></tr>
{{range .Rows}}<tr><td><code>{{.ID}}</code></td><td class="{{cls .Outcome}}">{{.Outcome}}</td><td>{{.Record}}</td>
<td class="n">{{with .Tests}}{{len .FailToPass.Success}}/{{len .FailToPass.Success | add (len .FailToPass.Failure)}}{{end}}</td>
<td class="n">{{with .Tests}}{{len .PassToPass.Success}}/{{len .PassToPass.Success | add (len .PassToPass.Failure)}}{{end}}</td>
<td class="n">{{.PatchBytes}}</td><td class="n">{{.AgentMS}}</td><td class="n">{{.HarnessMS}}</td><td>{{if .Regressed}}<b class="bad">regressed</b>{{else if eq .Change "fixed"}}<b class="ok">fixed</b>{{else if eq .Change "unjudged"}}<b class="warn">unjudged</b>{{else}}<span class="mute">{{.Change}}</span>{{end}}</td></tr>
{{end}}</table>
`))
})
