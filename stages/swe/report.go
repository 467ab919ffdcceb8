package swe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/atomicfile"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// Report files written into the output folder at the end of every run.
const (
	ReportFile = "report.json"
	JUnitFile  = "junit.xml"
	PredsFile  = "preds.json"
)

// Report categories: the three final outcomes, "error" for every
// infrastructure outcome, and "pending" for tasks without a record yet.
const (
	CatError   = "error"
	CatPending = "pending"
)

// Report is report.json. Count and id-list names follow the SWE-bench
// harness's summary report, so tools reading one read the other (and
// --baseline accepts either).
type Report struct {
	Tool          string   `json:"tool"`
	Model         string   `json:"model"`
	Total         int      `json:"total_instances"`
	Submitted     int      `json:"submitted_instances"`
	Completed     int      `json:"completed_instances"`
	Resolved      int      `json:"resolved_instances"`
	Unresolved    int      `json:"unresolved_instances"`
	EmptyPatch    int      `json:"empty_patch_instances"`
	Errors        int      `json:"error_instances"`
	Pending       int      `json:"pending_instances"`
	ResolvedRate  float64  `json:"resolved_rate"`
	ResolvedIDs   []string `json:"resolved_ids"`
	UnresolvedIDs []string `json:"unresolved_ids"`
	EmptyPatchIDs []string `json:"empty_patch_ids"`
	ErrorIDs      []string `json:"error_ids"`
	PendingIDs    []string `json:"incomplete_ids"`
	schemas.CallCount
	Usage         schemas.Usage              `json:"usage"`
	AgentMS       Durations                  `json:"agent_ms"`
	HarnessMS     Durations                  `json:"harness_ms"`
	Instances     map[string]*InstanceReport `json:"instances"`
	Gate          *GateResult                `json:"gate,omitempty"`
	SchemaVersion int                        `json:"schema_version"`

	order    []string        // instance ids in tasks-file order
	baseline map[string]bool // the gate's baseline's resolved ids, for a reader (LoadBaseline)
}

// Durations summarise one timing over the instances that have it.
type Durations struct {
	Count  int   `json:"count"`
	Total  int64 `json:"total"`
	Median int64 `json:"median"`
	P95    int64 `json:"p95"`
	Max    int64 `json:"max"`
}

// InstanceReport is one task's line in the report.
type InstanceReport struct {
	Outcome    string       `json:"outcome"`        // resolved, unresolved, empty_patch, error, pending
	Record     string       `json:"record_outcome"` // the record's own outcome (e.g. sandbox_error)
	ExitStatus string       `json:"exit_status,omitempty"`
	Reason     string       `json:"reason,omitempty"`
	GradedBy   string       `json:"graded_by,omitempty"`
	Tests      *TestResults `json:"tests_status,omitempty"`
	PatchBytes int          `json:"patch_bytes"`
	schemas.CallCount
	Usage     schemas.Usage `json:"usage"`
	AgentMS   int64         `json:"agent_ms"`
	HarnessMS int64         `json:"harness_ms"`
	Grade     *Grade        `json:"grade,omitempty"`

	model string
	patch *string
	repo  string
}

// Category maps a record outcome to its report category.
func Category(o schemas.Outcome) string {
	switch o {
	case OutcomeResolved, OutcomeUnresolved, OutcomeEmptyPatch:
		return string(o)
	case "":
		return CatPending
	}
	return CatError
}

// reportMembers are the members of an output record the report reads.
var reportMembers = []string{schemas.MemberKey, schemas.MemberID, schemas.MemberOutcome, schemas.MemberAPICalls,
	schemas.MemberUsage, schemas.MemberModel, schemas.MemberError, schemas.MemberExtra}

// BuildReport reads every live record of the output folder dir (all runs
// and resumes of it) and builds the report over tasks: a task without a
// record is pending; records of keys not among tasks are ignored. model
// names the run's model when records carry none. It streams the records
// once; memory is one record at a time plus the report.
func BuildReport(dir string, tasks []Task, model string) (*Report, error) {
	r := &Report{Tool: "hermes-pipe swe", Model: model, Instances: map[string]*InstanceReport{}, SchemaVersion: 1}
	byKey := make(map[string]Task, len(tasks))
	for _, t := range tasks {
		byKey[t.Key] = t
		r.Instances[t.InstanceID] = &InstanceReport{Outcome: CatPending, repo: t.Repo}
		r.order = append(r.order, t.InstanceID)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(pipeline.Cat(dir, pw)) }()
	rd := bufio.NewReaderSize(pr, 1<<20)
	for {
		line, err := rd.ReadBytes('\n')
		if len(line) == 0 && errors.Is(err, io.EOF) {
			break
		}
		var v schemas.Record
		if err == nil || errors.Is(err, io.EOF) {
			err = schemas.DecodeMembers(line, &v, reportMembers...)
		}
		if err != nil {
			pr.CloseWithError(err)
			return nil, fmt.Errorf("swe report: read records: %w", err)
		}
		t, ok := byKey[v.Key]
		if !ok {
			continue
		}
		in := r.Instances[t.InstanceID]
		in.Outcome, in.Record = Category(v.Outcome), string(v.Outcome)
		in.Reason, in.APICalls, in.Usage, in.model = v.Error, int64(v.APICalls), v.Usage, v.Model
		var ex extra
		for k, dst := range map[string]any{"exit_status": &ex.ExitStatus, "model_patch": &ex.Patch, "grade": &ex.Grade, "agent_ms": &ex.AgentMS, "harness_ms": &ex.HarnessMS} {
			if raw, ok := v.Extra[k]; ok {
				_ = json.Unmarshal(raw, dst)
			}
		}
		in.ExitStatus, in.patch, in.Grade, in.AgentMS, in.HarnessMS = ex.ExitStatus, ex.Patch, ex.Grade, ex.AgentMS, ex.HarnessMS
		if ex.Patch != nil {
			in.PatchBytes = len(*ex.Patch)
		}
		if ex.Grade != nil {
			in.GradedBy, in.Tests = ex.Grade.GradedBy, ex.Grade.Tests
		}
	}
	var agent, harness []int64
	for _, id := range r.order {
		in := r.Instances[id]
		if in.model != "" && r.Model == "" {
			r.Model = in.model
		}
		switch in.Outcome {
		case string(OutcomeResolved):
			r.ResolvedIDs = append(r.ResolvedIDs, id)
		case string(OutcomeUnresolved):
			r.UnresolvedIDs = append(r.UnresolvedIDs, id)
		case string(OutcomeEmptyPatch):
			r.EmptyPatchIDs = append(r.EmptyPatchIDs, id)
		case CatError:
			r.ErrorIDs = append(r.ErrorIDs, id)
		default:
			r.PendingIDs = append(r.PendingIDs, id)
		}
		if in.Outcome != CatPending {
			r.APICalls += in.APICalls
			r.Usage.Add(in.Usage)
		}
		if in.patch != nil {
			r.Submitted++
			agent = append(agent, in.AgentMS)
		}
		if in.Grade != nil {
			harness = append(harness, in.HarnessMS)
		}
	}
	for _, l := range []*[]string{&r.ResolvedIDs, &r.UnresolvedIDs, &r.EmptyPatchIDs, &r.ErrorIDs, &r.PendingIDs} {
		if *l == nil {
			*l = []string{}
		}
		sort.Strings(*l)
	}
	r.Total = len(tasks)
	r.Resolved, r.Unresolved, r.EmptyPatch = len(r.ResolvedIDs), len(r.UnresolvedIDs), len(r.EmptyPatchIDs)
	r.Errors, r.Pending = len(r.ErrorIDs), len(r.PendingIDs)
	r.Completed = r.Resolved + r.Unresolved + r.EmptyPatch
	if r.Total > 0 {
		r.ResolvedRate = float64(r.Resolved) / float64(r.Total)
	}
	r.AgentMS, r.HarnessMS = summarise(agent), summarise(harness)
	return r, nil
}

func summarise(v []int64) Durations {
	d := Durations{Count: len(v)}
	if len(v) == 0 {
		return d
	}
	slices.Sort(v)
	for _, x := range v {
		d.Total += x
	}
	d.Median = v[(len(v)-1)/2]
	if len(v)%2 == 0 {
		d.Median = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	d.P95 = v[min(len(v)-1, (len(v)*95+99)/100-1)]
	d.Max = v[len(v)-1]
	return d
}

// Pred is one entry of preds.json, the SWE-bench harness's predictions
// schema.
type Pred struct {
	InstanceID string `json:"instance_id"`
	Model      string `json:"model_name_or_path"`
	Patch      string `json:"model_patch"`
}

// Preds returns the predictions of every task whose agent finished (its
// patch was taken, empty or not), sorted by instance id.
func (r *Report) Preds() []Pred {
	out := []Pred{}
	for _, id := range slices.Sorted(maps.Keys(r.Instances)) {
		in := r.Instances[id]
		if in.patch == nil {
			continue
		}
		model := in.model
		if model == "" {
			model = r.Model
		}
		out = append(out, Pred{InstanceID: id, Model: model, Patch: *in.patch})
	}
	return out
}

// WriteFiles writes report.json, junit.xml and preds.json into dir, each
// atomically (temp file, fsync, rename, fsync of the folder), so a reader
// never sees a half-written file and a crash leaves the previous version.
func (r *Report) WriteFiles(dir string) error {
	rep, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("swe report: encode %s: %w", ReportFile, err)
	}
	preds, err := json.MarshalIndent(r.Preds(), "", "  ")
	if err != nil {
		return fmt.Errorf("swe report: encode %s: %w", PredsFile, err)
	}
	junit, err := r.JUnit()
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{PredsFile, preds}, {JUnitFile, junit}, {ReportFile, rep}} {
		if err := atomicfile.Write(dir, f.name, append(f.data, '\n')); err != nil {
			return fmt.Errorf("swe report: %w", err)
		}
	}
	return nil
}

// JUnit types, as read by Jenkins, GitLab, GitHub test reporters.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

func secs(ms int64) string { return fmt.Sprintf("%.3f", float64(ms)/1000) }

// JUnit renders junit.xml: one testcase per task; <failure> for unresolved
// and empty_patch, <error> for infrastructure errors and tasks not run yet.
func (r *Report) JUnit() ([]byte, error) {
	s := junitSuite{Name: "swe", Properties: []junitProperty{
		{"model", r.Model}, {"resolved_rate", fmt.Sprintf("%.4f", r.ResolvedRate)},
	}}
	var total int64
	for _, id := range r.order {
		in := r.Instances[id]
		ms := in.AgentMS + in.HarnessMS
		total += ms
		class := "swe"
		if in.repo != "" {
			class = "swe." + strings.ReplaceAll(in.repo, "/", ".")
		}
		c := junitCase{Name: id, Classname: class, Time: secs(ms)}
		detail := in.Reason
		if in.ExitStatus != "" {
			detail = strings.TrimSpace(detail + "\nexit status: " + in.ExitStatus)
		}
		switch in.Outcome {
		case string(OutcomeResolved):
		case string(OutcomeUnresolved), string(OutcomeEmptyPatch):
			c.Failure = &junitProblem{Message: in.Outcome + ": " + firstLine(in.Reason), Type: in.Outcome, Text: detail}
			s.Failures++
		case CatPending:
			c.Error = &junitProblem{Message: "not run yet (interrupted run; --resume finishes it)", Type: CatPending}
			s.Errors++
		default:
			c.Error = &junitProblem{Message: in.Record + ": " + firstLine(in.Reason), Type: in.Record, Text: detail}
			s.Errors++
		}
		if in.Grade != nil && in.Grade.LogTail != "" {
			c.SystemOut = in.Grade.LogTail
		}
		s.Cases = append(s.Cases, c)
	}
	s.Tests, s.Time = len(s.Cases), secs(total)
	doc := junitSuites{Name: "hermes-pipe swe", Tests: s.Tests, Failures: s.Failures, Errors: s.Errors, Time: s.Time, Suites: []junitSuite{s}}
	var b bytes.Buffer
	b.WriteString(xml.Header)
	enc := xml.NewEncoder(&b)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("swe report: encode %s: %w", JUnitFile, err)
	}
	return b.Bytes(), nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	if len(l) > 200 {
		l = l[:200] + "…"
	}
	return l
}

// WriteSummary prints the one-screen summary: counts, rate, gate verdict
// and up to maxRows instances (failures first).
func (r *Report) WriteSummary(w io.Writer, maxRows int) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "SWE evaluation  model: %s  instances: %d\n\n", r.Model, r.Total)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "outcome\tcount\n")
	for _, row := range []struct {
		name string
		n    int
	}{{"resolved", r.Resolved}, {"unresolved", r.Unresolved}, {"empty_patch", r.EmptyPatch}, {"error", r.Errors}, {"pending", r.Pending}} {
		if row.n > 0 || row.name != "pending" {
			fmt.Fprintf(tw, "%s\t%d\n", row.name, row.n)
		}
	}
	tw.Flush()
	fmt.Fprintf(&b, "\nresolved rate: %.1f%% (%d/%d)   tokens: %d   harness per task: median %s, p95 %s\n",
		100*r.ResolvedRate, r.Resolved, r.Total, r.Usage.TotalTokens, secs(r.HarnessMS.Median)+"s", secs(r.HarnessMS.P95)+"s")
	ids := slices.Clone(r.order)
	rank := map[string]int{CatError: 0, CatPending: 1, string(OutcomeUnresolved): 2, string(OutcomeEmptyPatch): 3, string(OutcomeResolved): 4}
	slices.SortStableFunc(ids, func(a, c string) int { return rank[r.Instances[a].Outcome] - rank[r.Instances[c].Outcome] })
	if maxRows > 0 && len(ids) > 0 {
		b.WriteString("\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "instance\toutcome\texit\ttests F2P/P2P\treason\n")
		for i, id := range ids {
			if i == maxRows {
				fmt.Fprintf(tw, "… %d more in %s\t\t\t\t\n", len(ids)-maxRows, ReportFile)
				break
			}
			in := r.Instances[id]
			tests := "-"
			if in.Tests != nil {
				tests = fmt.Sprintf("%d/%d  %d/%d", len(in.Tests.FailToPass.Success), len(in.Tests.FailToPass.Success)+len(in.Tests.FailToPass.Failure),
					len(in.Tests.PassToPass.Success), len(in.Tests.PassToPass.Success)+len(in.Tests.PassToPass.Failure))
			}
			reason := firstLine(in.Reason)
			if len(reason) > 60 {
				reason = reason[:57] + "..."
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", id, in.Outcome, cmpOr(in.ExitStatus, "-"), tests, reason)
		}
		tw.Flush()
	}
	if g := r.Gate; g != nil {
		fmt.Fprintf(&b, "\ngate: %s", strings.ToUpper(g.Verdict))
		if len(g.Reasons) > 0 {
			fmt.Fprintf(&b, " — %s", strings.Join(g.Reasons, "; "))
		}
		b.WriteString("\n")
	}
	_, err := w.Write(b.Bytes())
	return err
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
