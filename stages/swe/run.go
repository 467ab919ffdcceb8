package swe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
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
	Tasks string // tasks file (JSONL or a JSON array)
	Out   string // output folder
	Mode  pipeline.Mode

	Workers int
	Rollout rollout.Options // the agent loop; its Toolsets are forced to terminal
	Grade   GradeOptions    // Driver defaults to Rollout.Driver

	// CheckImages, when set, settles every task image before the first LLM
	// call (the docker driver's CheckImages). Tasks whose image is missing
	// end as sandbox_error without a model call and are retried by --resume.
	CheckImages func(ctx context.Context, images []string) map[string]error

	MinResolved float64 // gate: minimum resolved rate in [0, 1]
	Baseline    string  // gate: a previous report.json; "" = none

	CommitInterval time.Duration
	VerifyShards   bool // check every live shard's SHA-256 on open (pipeline.OutputOptions)
	Stop           <-chan struct{}
	Progress       *pipeline.Progress
	Logger         *slog.Logger
	ToolVersion    string
	Record         any // what run.json keeps of the options
	// Filter, when set, keeps only the tasks whose record it accepts (a
	// shard of a run split across machines); the reports cover those tasks.
	Filter func(rec *schemas.Record) bool
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
	if o.Tasks == "" || o.Out == "" {
		return res, fmt.Errorf("swe: %w: a tasks file and an output folder are required", ErrInput)
	}
	if o.MinResolved < 0 || o.MinResolved > 1 {
		return res, fmt.Errorf("swe: %w: the minimum resolved rate must be within 0..1, got %g", ErrInput, o.MinResolved)
	}
	tasks, err := ReadTasks(o.Tasks)
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
	o.Rollout.Toolsets = []string{"terminal"}
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

	out, err := pipeline.OpenOutput(o.Out, pipeline.OutputOptions{
		Mode:           o.Mode,
		Kind:           "swe",
		ToolVersion:    o.ToolVersion,
		Options:        o.Record,
		Outcomes:       Outcomes,
		Artifacts:      []string{PredsFile, JUnitFile, ReportFile},
		CommitInterval: o.CommitInterval,
		VerifyShards:   o.VerifyShards,
		Logger:         o.Logger,
	})
	if err != nil {
		return res, err
	}
	recs := make([]*schemas.Record, len(tasks))
	for i, t := range tasks {
		recs[i] = Record(t, o.Grade.Clone)
	}
	sum, runErr := pipeline.Run(ctx, pipeline.Options{
		Workers:  o.Workers,
		Stop:     o.Stop,
		Progress: o.Progress,
		Logger:   o.Logger,
	}, pipeline.SliceSource(recs), stages, out)
	res.Summary = sum
	if pf != nil {
		res.MissingImages = pf.Missing()
	}
	closeErr := out.Close()

	// The report covers the whole folder, also after a fatal error or an
	// interrupt, so CI keeps its artefacts.
	rep, repErr := BuildReport(o.Out, tasks, o.Rollout.Model)
	if repErr == nil {
		rep.Gate = rep.Judge(o.MinResolved, o.Baseline, baseline)
		repErr = rep.WriteFiles(o.Out)
		res.Report = rep
	}
	if closeErr != nil {
		closeErr = fmt.Errorf("swe: close output: %w", closeErr)
	}
	return res, errors.Join(runErr, closeErr, repErr)
}
