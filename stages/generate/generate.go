package generate

import (
	"context"
	"errors"
	"fmt"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/stages/generate/prompts"
	"github.com/hermes-pipe/hermes-pipe/stages/preflight"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout"
)

// Options configures one generate run. Rollout must carry the LLM client, the
// sandbox driver and the model; the zero value of every other field is the
// default.
type Options struct {
	pipeline.RunConfig

	Prompts string
	Samples int

	Rollout rollout.Options

	// CheckImages, when set, is called once with every distinct image of the
	// prompts file before any LLM call (the docker driver's CheckImages);
	// rows whose image it reports missing end sandbox_error with the error
	// "image unavailable: ..." and no model call, and the next --resume
	// retries them. Every mode that runs images settles them this way.
	CheckImages func(ctx context.Context, images []string) map[string]error
	// DefaultImage is the image of rows that name none (--docker-image). With
	// CheckImages set and no default, such rows are rejected when read
	// (rejects.jsonl, field "image": prompts.Options.NeedImage).
	DefaultImage string

	MaxLineBytes int
	// RedoChanged and Prune configure how a resume treats rows whose text
	// changed and keys no longer in the prompts file (pipeline.InputCheck,
	// always on with ModeResume).
	RedoChanged, Prune bool
	// CheckCwd, when set, rejects rows whose cwd it refuses (see
	// prompts.Options.CheckCwd); the local and ssh sandboxes use
	// sandbox.CwdRule.Check.
	CheckCwd func(dir string) error
}

// Result is what a generate run did.
type Result struct {
	Summary        pipeline.Summary
	MissingImages  map[string]error
	NothingToDo    bool
	PreviouslyDone int
}

// Run performs one generate run and blocks until it ends: the prompts are
// streamed through pre-flight (when CheckImages is set) and the rollout stage
// on the pipeline runtime (pipeline.RunMode). The error is a fatal fault (bad
// prompts file, output folder refused, disk full); per-row failures are in
// the summary.
func Run(ctx context.Context, o Options) (Result, error) {
	var res Result
	if o.Prompts == "" || o.Out == "" {
		return res, errors.New("generate: prompts file and output folder are required")
	}
	stage, err := rollout.New(o.Rollout)
	if err != nil {
		return res, fmt.Errorf("generate: %w", err)
	}
	var pf *preflight.Stage
	if o.CheckImages != nil {
		images, err := prompts.Images(o.Prompts, prompts.Options{MaxLineBytes: o.MaxLineBytes})
		if err != nil {
			return res, fmt.Errorf("generate: pre-flight: %w", err)
		}
		if o.DefaultImage != "" {
			// Settled up front with the rest: rows without an image run in it.
			images = append(images, o.DefaultImage)
		}
		pf, err = preflight.New(preflight.Options{
			Checker:      preflight.CheckerFunc(o.CheckImages),
			DefaultImage: o.DefaultImage,
			RequireImage: true,
		}, images)
		if err != nil {
			return res, fmt.Errorf("generate: %w", err)
		}
	}
	mr, err := pipeline.RunMode(ctx, o.RunConfig, pipeline.ModeSpec{
		Kind:       "generate",
		InputCheck: pipeline.InputCheck{Enabled: o.Mode == pipeline.ModeResume, RedoChanged: o.RedoChanged, Prune: o.Prune},
		Open: func(ctx context.Context, out *pipeline.Output) (pipeline.Source, []pipeline.Stage, error) {
			src, err := prompts.Open(o.Prompts, prompts.Options{
				Samples:      o.Samples,
				MaxLineBytes: o.MaxLineBytes,
				Reject:       out.AddReject,
				Filter:       o.Filter,
				CheckCwd:     o.CheckCwd,
				NeedImage:    o.CheckImages != nil && o.DefaultImage == "",
			})
			if err != nil {
				return nil, nil, err
			}
			if pf == nil {
				return src, []pipeline.Stage{stage}, nil
			}
			return src, []pipeline.Stage{pf, stage}, nil
		},
	})
	res.Summary, res.NothingToDo, res.PreviouslyDone = mr.Summary, mr.NothingToDo, mr.PreviouslyDone
	if pf != nil {
		res.MissingImages = pf.Missing()
	}
	return res, err
}
