package report

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/atomicfile"
	"github.com/hermes-pipe/hermes-pipe/pipeline/cluster"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
)

// File is the report's name when a mode writes it into its output folder.
const File = "report.html"

// Mode files the report shows when a folder has them.
const (
	sweReportFile      = "report.json"
	compressionMetrics = "compression_metrics.json"
)

// Data is everything the HTML report shows.
type Data struct {
	Title      string
	Kind       string
	Stats      pipeline.Statistics // cluster.StatsAll: `stats --json`
	Turns      Histogram
	Tokens     Histogram
	Durations  Histogram
	Ratios     Histogram // compress: compression_ratio of records with compression_metrics
	Compressed int       // records with compression_metrics
	// Compression is compression_metrics.json of a compress folder.
	Compression json.RawMessage
	SWE         *SWEReport
	Shards      []cluster.ShardStatus
}

// Histogram counts values into Bins equal-width bins from Min to Max.
type Histogram struct {
	Name   string
	Unit   string
	Min    float64
	Max    float64
	Counts []int
	N      int
}

// Options configure Build.
type Options struct {
	Title string
	// Root is the run's folder when it is sharded (dirs are its shard
	// folders); its per-shard progress is then shown.
	Root string
}

// Build computes the report of the folders dirs of one run (one folder, or
// the shards of a sharded run): the totals by cluster.StatsAll, then one
// pass over the records for the histograms. Memory is the statistics plus
// 24 bytes per record for the histograms.
func Build(ctx context.Context, dirs []string, opts Options) (*Data, error) {
	if len(dirs) == 0 {
		return nil, errors.New("report: no folder")
	}
	st, err := cluster.StatsAll(dirs)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	d := &Data{Title: opts.Title, Stats: st}
	var turns, tokens, durs, ratios []float64
	for _, dir := range dirs {
		man, _, err := outdir.ReadManifest(dir)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		d.Kind = man.Kind
		err = pipeline.EachRecord(dir, func(_ pipeline.RecordRef, line []byte) error {
			s := Summarize(line, &man)
			turns = append(turns, float64(s.Turns))
			tokens = append(tokens, float64(s.Tokens))
			durs = append(durs, float64(s.DurationMS))
			if s.CompressOutcome != "" {
				d.Compressed++
				ratios = append(ratios, s.Ratio)
			}
			return ctx.Err()
		})
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
	}
	d.Turns = NewHistogram("turns per record", "", turns, 20)
	d.Tokens = NewHistogram("tokens per record", "tokens", tokens, 20)
	d.Durations = NewHistogram("duration per record", "ms", durs, 20)
	if len(ratios) > 0 {
		d.Ratios = NewHistogram("compression ratio (compressed / original tokens)", "", ratios, 20)
	}
	top := dirs[0]
	if opts.Root != "" {
		top = opts.Root
	}
	if b, err := os.ReadFile(filepath.Join(top, compressionMetrics)); err == nil && json.Valid(b) {
		d.Compression = b
	}
	if b, err := os.ReadFile(filepath.Join(top, sweReportFile)); err == nil {
		var r SWEReport
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("report: %s: %w", filepath.Join(top, sweReportFile), err)
		}
		// An unreadable baseline only loses the "fixed" column; the gate's
		// own lists still show.
		_ = r.LoadBaseline(top)
		d.SWE = &r
	}
	if opts.Root != "" {
		sts, err := cluster.Status(ctx, opts.Root, cluster.StatusOptions{})
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		d.Shards = sts
	}
	return d, nil
}

// NewHistogram bins values into n equal-width bins between their minimum and
// maximum.
func NewHistogram(name, unit string, values []float64, n int) Histogram {
	h := Histogram{Name: name, Unit: unit, N: len(values)}
	if len(values) == 0 {
		return h
	}
	h.Min, h.Max = slices.Min(values), slices.Max(values)
	if h.Min == h.Max {
		h.Counts = []int{len(values)}
		return h
	}
	h.Counts = make([]int, n)
	w := (h.Max - h.Min) / float64(n)
	for _, v := range values {
		i := int((v - h.Min) / w)
		if i >= n {
			i = n - 1
		}
		h.Counts[i]++
	}
	return h
}

// SWEReport is the part of swe's report.json the report shows.
type SWEReport struct {
	Model        string                  `json:"model"`
	Total        int                     `json:"total_instances"`
	Resolved     int                     `json:"resolved_instances"`
	Unresolved   int                     `json:"unresolved_instances"`
	EmptyPatch   int                     `json:"empty_patch_instances"`
	Errors       int                     `json:"error_instances"`
	Pending      int                     `json:"pending_instances"`
	ResolvedRate float64                 `json:"resolved_rate"`
	Instances    map[string]*SWEInstance `json:"instances"`
	Gate         *struct {
		Verdict     string   `json:"verdict"`
		Reasons     []string `json:"reasons"`
		Baseline    string   `json:"baseline"`
		Regressions []string `json:"regressions"`
		Unjudged    []string `json:"unjudged"`
	} `json:"gate"`
	baseline map[string]bool // the baseline's resolved ids (LoadBaseline)
}

// SWEInstance is one task's line of report.json.
type SWEInstance struct {
	ID         string `json:"-"`
	Outcome    string `json:"outcome"`
	Record     string `json:"record_outcome"`
	Reason     string `json:"reason"`
	PatchBytes int    `json:"patch_bytes"`
	AgentMS    int64  `json:"agent_ms"`
	HarnessMS  int64  `json:"harness_ms"`
	Tests      *struct {
		FailToPass map[string][]string `json:"FAIL_TO_PASS"`
		PassToPass map[string][]string `json:"PASS_TO_PASS"`
	} `json:"tests_status"`
	Regressed bool `json:"-"`
	// Change is how the instance moved against the gate's baseline (see
	// BaselineChange); "" without a baseline.
	Change string `json:"-"`
}

// LoadBaseline reads the resolved ids of the gate's baseline file, so
// BaselineChange can also tell instances fixed since then. The path is
// taken as the swe run gave it: absolute, else relative to root (the run's
// folder) or to the working folder. A baseline that cannot be read leaves
// only the gate's own lists (regressions, unjudged); its error is returned
// for the caller to mention.
func (r *SWEReport) LoadBaseline(root string) error {
	if r.Gate == nil || r.Gate.Baseline == "" {
		return nil
	}
	p := r.Gate.Baseline
	try := []string{p}
	if !filepath.IsAbs(p) {
		try = []string{filepath.Join(root, p), p}
	}
	var err error
	for _, f := range try {
		var b []byte
		if b, err = os.ReadFile(f); err != nil {
			continue
		}
		var doc struct {
			Resolved []string `json:"resolved_ids"`
		}
		if err = json.Unmarshal(b, &doc); err != nil {
			return fmt.Errorf("baseline %s: %w", f, err)
		}
		r.baseline = map[string]bool{}
		for _, id := range doc.Resolved {
			r.baseline[id] = true
		}
		return nil
	}
	return fmt.Errorf("baseline %s: %w", p, err)
}

// BaselineChange says how instance id moved against the gate's baseline:
// "regressed" (resolved then, unresolved or empty patch now) and "unjudged"
// (resolved then, an error or pending now) as the gate judged them; with
// the baseline read (LoadBaseline) also "fixed" (resolved now, not then),
// "still resolved" and "still unresolved". "" without a baseline.
func (r *SWEReport) BaselineChange(id string) string {
	if r.Gate == nil || r.Gate.Baseline == "" {
		return ""
	}
	switch {
	case slices.Contains(r.Gate.Regressions, id):
		return "regressed"
	case slices.Contains(r.Gate.Unjudged, id):
		return "unjudged"
	case r.baseline == nil:
		return ""
	}
	now := r.Instances[id] != nil && r.Instances[id].Outcome == "resolved"
	switch then := r.baseline[id]; {
	case now && !then:
		return "fixed"
	case now:
		return "still resolved"
	case then:
		// resolved then and not now, but not in the gate's lists (an
		// older report.json): still a regression.
		return "regressed"
	}
	return "still unresolved"
}

// SortedInstances lists the instances by id, marking regressions.
func (r *SWEReport) SortedInstances() []*SWEInstance {
	out := make([]*SWEInstance, 0, len(r.Instances))
	for id, in := range r.Instances {
		in.ID = id
		in.Regressed = r.Gate != nil && slices.Contains(r.Gate.Regressions, id)
		in.Change = r.BaselineChange(id)
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Write renders d as one self-contained HTML document.
func Write(w io.Writer, d *Data) error {
	bw := bufio.NewWriter(w)
	if err := page.Execute(bw, d); err != nil {
		return fmt.Errorf("report: render: %w", err)
	}
	return bw.Flush()
}

// WriteFile builds the report of dirs and writes it atomically to
// dir/name, with mode 0644: an HTML artefact is meant to be read by others
// (a CI job's uploader, a web server).
func WriteFile(ctx context.Context, dirs []string, opts Options, dir, name string) error {
	d, err := Build(ctx, dirs, opts)
	if err != nil {
		return err
	}
	var buf bytesBuffer
	if err := Write(&buf, d); err != nil {
		return err
	}
	if err := atomicfile.WriteMode(dir, name, buf.b, 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

type bytesBuffer struct{ b []byte }

func (b *bytesBuffer) Write(p []byte) (int, error) { b.b = append(b.b, p...); return len(p), nil }
