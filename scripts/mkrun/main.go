// Command mkrun writes a finished generate output folder for a prompts file
// without calling a model: every (row, sample) gets a small completed record.
// The resume benchmark uses it to build a 1,000,000-row run in seconds.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/generate/prompts"
)

type doneStage struct{}

func (doneStage) Name() string { return "done" }

func (doneStage) Process(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
	rec.Outcome = schemas.OutcomeCompleted
	rec.Completed = true
	rec.Conversations = []schemas.Turn{{From: "human", Value: rec.Input.Prompt}, {From: "gpt", Value: "<think>\n</think>\ndone"}}
	rec.APICalls = 1
	return []*schemas.Record{rec}, nil
}

func main() {
	in := flag.String("prompts", "", "prompts file")
	out := flag.String("out", "", "output folder to create")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "mkrun:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	o, err := pipeline.OpenOutput(out, pipeline.OutputOptions{Kind: "generate", MaxShardRows: 100000})
	if err != nil {
		return err
	}
	src, err := prompts.Open(in, prompts.Options{Reject: o.AddReject})
	if err != nil {
		return err
	}
	defer src.Close()
	sum, err := pipeline.Run(context.Background(), pipeline.Options{Workers: 4}, src, []pipeline.Stage{doneStage{}}, o)
	if cerr := o.Close(); err == nil {
		err = cerr
	}
	fmt.Printf("mkrun: %d records written to %s\n", sum.Written, out)
	return err
}
