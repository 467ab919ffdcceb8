package report

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/atomicfile"
	"github.com/hermes-pipe/hermes-pipe/pipeline/cluster"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// File is the report's name when a mode writes it into its output folder.
const File = "report.html"

// Data is everything the HTML report shows.
type Data struct {
	Title string
	Kind  string
	// Run is what the header says of the run, from the first folder's
	// run.json.
	Run       RunInfo
	Stats     pipeline.Statistics // cluster.StatsAll: `stats --json`
	Turns     Histogram
	Tokens    Histogram
	Durations Histogram
	// Blocks are the sections' blocks (Options.Sections), in their order.
	Blocks []template.HTML
	Shards []cluster.ShardStatus
}

// RunInfo is the run's model, dates and main settings, as run.json
// recorded them.
type RunInfo struct {
	Model            string
	Created, Updated time.Time // the first run's start, the latest run's end
	Runs             int
	Version          string    // hermes-pipe's version that wrote the folder last
	Settings         []Setting // the options the run was given, by name; the model and places (out, spool) left out
}

// Setting is one recorded option of a run.
type Setting struct{ Name, Value string }

// notSettings are recorded options the header does not list as settings:
// the model (shown on its own) and where the run wrote and how it showed
// progress, which say nothing of the data.
var notSettings = map[string]bool{"model": true, "out": true, "spool": true, "progress": true, "run_id": true, "addr-file": true}

// runInfo reads the header's facts from run.json.
func runInfo(man *outdir.Manifest) RunInfo {
	ri := RunInfo{Created: man.CreatedAt, Updated: man.UpdatedAt, Runs: man.Runs, Version: man.ToolVersion}
	var opts map[string]json.RawMessage
	if json.Unmarshal(man.Options, &opts) != nil {
		return ri
	}
	if m, ok := opts["model"]; ok {
		ri.Model = schemas.JSONText(string(m))
	}
	names := slices.Sorted(maps.Keys(opts))
	for _, name := range names {
		if notSettings[name] {
			continue
		}
		ri.Settings = append(ri.Settings, Setting{Name: name, Value: schemas.JSONText(string(opts[name]))})
	}
	return ri
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
	// Sections are the modes' parts of the report, in the page's order;
	// each gives a block (maybe empty) after the distributions.
	Sections []Section
}

// Build computes the report of the folders dirs of one run (one folder, or
// the shards of a sharded run): the totals by cluster.StatsAll, then one
// pass over the records for the histograms, given to the sections too; then
// each section's block. Memory is the statistics plus 24 bytes per record
// for the histograms, plus what the sections keep.
func Build(ctx context.Context, dirs []string, opts Options) (*Data, error) {
	if len(dirs) == 0 {
		return nil, errors.New("report: no folder")
	}
	st, err := cluster.StatsAll(dirs)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	d := &Data{Title: opts.Title, Stats: st}
	tallies := make([]Tally, len(opts.Sections))
	for i, sec := range opts.Sections {
		tallies[i] = sec.Tally()
	}
	var turns, tokens, durs []float64
	for i, dir := range dirs {
		man, _, err := outdir.ReadManifest(dir)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		d.Kind = man.Kind
		if i == 0 {
			d.Run = runInfo(&man)
		}
		err = pipeline.EachRecord(dir, func(_ pipeline.RecordRef, line []byte) error {
			s := Summarize(line, &man)
			turns = append(turns, float64(s.Turns))
			tokens = append(tokens, float64(s.Tokens))
			durs = append(durs, float64(s.DurationMS))
			for _, t := range tallies {
				t.Record(line)
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
	top := dirs[0]
	if opts.Root != "" {
		top = opts.Root
	}
	for _, t := range tallies {
		b, err := t.Block(top)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		d.Blocks = append(d.Blocks, b)
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

// Write renders d as one self-contained HTML document.
func Write(w io.Writer, d *Data) error {
	bw := bufio.NewWriter(w)
	if err := page().Execute(bw, d); err != nil {
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
