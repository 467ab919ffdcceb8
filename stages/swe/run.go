package swe

import (
	"context"
	"errors"
	"fmt"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	htmlreport "github.com/hermes-pipe/hermes-pipe/pipeline/report"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/preflight"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout"
)

// ErrInput marks a problem with the run's inputs (tasks file, baseline,
// minimum rate) found before any work; the CLI maps it to a usage error.
var ErrInput = errors.New("bad input")

// Options configure one SWE run. Rollout must carry the LLM client, the
// sandbox driver and the model; the zero value of every other field is the
// default.
type Options struct {
	pipeline.RunConfig

	// Tasks is where the tasks come from: a file or one task, and the image
	// of tasks that name none.
	Tasks TaskSource

	// Rollout is the agent loop. Its toolsets (fixed, or a distribution
	// sampled per task) always hold terminal, through which the agent
	// submits: none given means terminal alone (see NewStage). MCP servers
	// (Rollout.MCP) and the offline toolsets come in by naming them.
	Rollout rollout.Options
	Grade   GradeOptions // Driver defaults to Rollout.Driver

	// CheckImages, when set, settles every task image before the first LLM
	// call (the docker driver's CheckImages). Tasks whose image is missing
	// end as sandbox_error without a model call and are retried by --resume,
	// as in every mode that runs images.
	CheckImages func(ctx context.Context, images []string) map[string]error

	MinResolved float64 // gate: minimum resolved rate in [0, 1]
	Baseline    string  // gate: a previous report.json; "" = none

	// Report are the sections of report.html, in the page's order; none
	// means swe's own (ReportSection).
	Report []htmlreport.Section
}

// Result is what a SWE run did.
type Result struct {
	Summary       pipeline.Summary
	Report        *Report // over the whole output folder; nil when it could not be built
	MissingImages map[string]error
}

// Run performs one SWE run and blocks until it ends: it reads the tasks and
// the baseline (an ErrInput error before any work when either is bad),
// settles the images, runs every task not yet final in the output folder
// through pre-flight and the SWE stage on the pipeline runtime, then
// rebuilds report.json, junit.xml and preds.json from every record of the
// folder and judges the gate (Result.Report.Gate). A returned error is a
// fatal fault of the run; per-task failures are in the report.
func Run(ctx context.Context, o Options) (Result, error) {
	var res Result
	if o.Out == "" {
		return res, fmt.Errorf("swe: %w: an output folder is required", ErrInput)
	}
	if o.MinResolved < 0 || o.MinResolved > 1 {
		return res, fmt.Errorf("swe: %w: the minimum resolved rate must be within 0..1, got %g", ErrInput, o.MinResolved)
	}
	tasks, err := LoadTasks(o.Tasks)
	if err != nil {
		return res, fmt.Errorf("swe: %w: %w", ErrInput, err)
	}
	if o.Filter != nil {
		kept := tasks[:0:0]
		for _, t := range tasks {
			if o.Filter(Record(t, o.Grade.Clone)) {
				kept = append(kept, t)
			}
		}
		tasks = kept
	}
	var baseline []string
	if o.Baseline != "" {
		if baseline, err = ReadBaseline(o.Baseline); err != nil {
			return res, fmt.Errorf("swe: %w: %w", ErrInput, err)
		}
	}
	stage, err := NewStage(StageOptions{Rollout: o.Rollout, Grade: o.Grade, Tasks: tasks})
	if err != nil {
		return res, err
	}
	stages := []pipeline.Stage{}
	var pf *preflight.Stage
	if o.CheckImages != nil {
		images := make([]string, 0, len(tasks))
		for _, t := range tasks {
			images = append(images, t.Image)
		}
		if pf, err = preflight.New(preflight.Options{Checker: preflight.CheckerFunc(o.CheckImages)}, images); err != nil {
			return res, fmt.Errorf("swe: %w", err)
		}
		stages = append(stages, pf)
	}
	stages = append(stages, stage)

	recs := make([]*schemas.Record, len(tasks))
	for i, t := range tasks {
		recs[i] = Record(t, o.Grade.Clone)
	}
	mr, runErr := pipeline.RunMode(ctx, o.RunConfig, pipeline.ModeSpec{
		Kind:      "swe",
		Outcomes:  Outcomes,
		Artifacts: []string{PredsFile, JUnitFile, ReportFile, htmlreport.File},
		Open: func(context.Context, *pipeline.Output) (pipeline.Source, []pipeline.Stage, error) {
			return pipeline.SliceSource(recs), stages, nil
		},
	})
	res.Summary = mr.Summary
	if pf != nil {
		res.MissingImages = pf.Missing()
	}
	if !mr.Opened {
		return res, runErr // nothing was run: the folder keeps its report
	}

	// The report covers the whole folder, also after a fatal error or an
	// interrupt, so CI keeps its artefacts.
	rep, repErr := BuildReport(o.Out, tasks, o.Rollout.Model)
	if repErr == nil {
		rep.Gate = rep.Judge(o.MinResolved, o.Baseline, baseline)
		repErr = rep.WriteFiles(o.Out)
		res.Report = rep
	}
	if repErr == nil {
		// report.html is built from report.json and the records, so it
		// follows them.
		sections := o.Report
		if len(sections) == 0 {
			sections = []htmlreport.Section{ReportSection{}}
		}
		repErr = htmlreport.WriteFile(context.WithoutCancel(ctx), []string{o.Out}, htmlreport.Options{Title: o.Out, Sections: sections}, o.Out, htmlreport.File)
	}
	return res, errors.Join(runErr, repErr)
}
