package generate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/generate/prompts"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout"
)

// Options configures one generate run. Rollout must carry the LLM client, the
// sandbox driver and the model; the zero value of every other field is the
// default.
type Options struct {
	Prompts string
	Out     string
	Mode    pipeline.Mode
	Format  string // "jsonl" (default)
	Workers int
	Samples int

	Rollout rollout.Options

	// CheckImages, when set, is called once with every distinct image of the
	// prompts file before any LLM call; rows whose image it reports missing are
	// rejected (`image unavailable: ...`) and retried by the next --resume.
	CheckImages func(ctx context.Context, images []string) map[string]error
	// DefaultImage is the image of rows that name none (--docker-image). With
	// CheckImages set and no default, such rows are rejected at pre-flight.
	DefaultImage string

	MaxLineBytes   int
	MaxShardRows   int
	VerifyShards   bool // check every live shard's SHA-256 on open (pipeline.OutputOptions)
	CommitInterval time.Duration
	Stop           <-chan struct{}
	Progress       *pipeline.Progress
	Logger         *slog.Logger
	ToolVersion    string
	// Record is what run.json keeps of the options (flags as given).
	Record any
	// Filter, when set, keeps only the records it accepts (sharding).
	Filter func(rec *schemas.Record) bool

	// RedoChanged and Prune configure how a resume treats rows whose text
	// changed and keys no longer in the prompts file (pipeline.InputCheck,
	// always on with ModeResume).
	RedoChanged, Prune bool
}

// Result is what a generate run did.
type Result struct {
	Summary        pipeline.Summary
	MissingImages  map[string]error
	NothingToDo    bool
	PreviouslyDone int
}

// Run performs one generate run and blocks until it ends. The error is a fatal
// fault (bad prompts file, output folder refused, disk full); per-row failures
// are in the summary.
func Run(ctx context.Context, o Options) (Result, error) {
	var res Result
	if o.Prompts == "" || o.Out == "" {
		return res, errors.New("generate: prompts file and output folder are required")
	}
	stage, err := rollout.New(o.Rollout)
	if err != nil {
		return res, fmt.Errorf("generate: %w", err)
	}
	if o.CheckImages != nil {
		images, err := prompts.Images(o.Prompts)
		if err != nil {
			return res, fmt.Errorf("generate: pre-flight: %w", err)
		}
		if o.DefaultImage != "" {
			images = append(images, o.DefaultImage)
		}
		res.MissingImages = map[string]error{}
		if len(images) > 0 {
			res.MissingImages = o.CheckImages(ctx, images)
		}
		// Rows without an image of their own run in the default image.
		if o.DefaultImage == "" {
			res.MissingImages[""] = errors.New("the row names no image and no default image is set (--docker-image)")
		} else if err, bad := res.MissingImages[o.DefaultImage]; bad {
			res.MissingImages[""] = fmt.Errorf("default image %s: %w", o.DefaultImage, err)
		}
	}
	out, err := pipeline.OpenOutput(o.Out, pipeline.OutputOptions{
		Mode:           o.Mode,
		Kind:           "generate",
		Format:         o.Format,
		ToolVersion:    o.ToolVersion,
		Options:        o.Record,
		MaxShardRows:   o.MaxShardRows,
		VerifyShards:   o.VerifyShards,
		InputCheck:     pipeline.InputCheck{Enabled: o.Mode == pipeline.ModeResume, RedoChanged: o.RedoChanged, Prune: o.Prune},
		CommitInterval: o.CommitInterval,
		Logger:         o.Logger,
	})
	if err != nil {
		return res, err
	}
	res.PreviouslyDone = out.Keys()
	src, err := prompts.Open(o.Prompts, prompts.Options{
		Samples:      o.Samples,
		MaxLineBytes: o.MaxLineBytes,
		Reject:       out.AddReject,
		Unavailable:  res.MissingImages,
		Filter:       o.Filter,
	})
	if err != nil {
		_ = out.Close()
		return res, fmt.Errorf("generate: %w", err)
	}
	defer src.Close()
	sum, runErr := pipeline.Run(ctx, pipeline.Options{
		Workers:  o.Workers,
		Stop:     o.Stop,
		Progress: o.Progress,
		Logger:   o.Logger,
	}, src, []pipeline.Stage{stage}, out)
	res.Summary = sum
	closeErr := out.Close()
	if runErr != nil {
		return res, runErr
	}
	if closeErr != nil {
		return res, fmt.Errorf("generate: close output: %w", closeErr)
	}
	res.NothingToDo = sum.Processed == 0 && sum.Read > 0 && sum.Skipped == sum.Read && sum.Rejected == 0
	return res, nil
}
