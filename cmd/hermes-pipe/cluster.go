package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/cluster"
	"github.com/hermes-pipe/hermes-pipe/pipeline/objstore"
	"github.com/hermes-pipe/hermes-pipe/stages/generate/prompts"
	"github.com/urfave/cli/v2"
)

// shardFlags choose the shard of a run split across machines; generate,
// compress and swe take them.
func shardFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "shard", Usage: "run shard I of N (0-based, e.g. 3/8) into OUT/shard-I-of-N; without it the index comes from JOB_COMPLETION_INDEX (Kubernetes Indexed Job) or SLURM_ARRAY_TASK_ID (Slurm array)"},
		&cli.IntFlag{Name: "shard-count", EnvVars: []string{"HERMES_PIPE_SHARD_COUNT"}, Usage: "N, the number of shards, when the index comes from the environment (SLURM_ARRAY_TASK_COUNT is read when set)"},
		&cli.StringFlag{Name: "spool", Usage: "local folder for work in progress when --out is an s3:// or file:// URL (default: a folder under the temp dir named after --out and the shard)"},
		&cli.DurationFlag{Name: "upload-interval", Value: 30 * time.Second, Usage: "how often committed work is uploaded when --out is a URL (and once at the end)"},
	}
}

// shardOutput binds --out and the shard flags (shardFlags) and calls
// cluster.OpenOutput: the shard's filter, the local folder to write and, for
// an s3:// or file:// --out, the spool and its uploads.
func shardOutput(c *cli.Context) (*cluster.Output, error) {
	return cluster.OpenOutput(cmdContext(c), cluster.OutputOptions{
		Out:            c.String("out"),
		Shard:          c.String("shard"),
		ShardCount:     c.Int("shard-count"),
		Spool:          c.String("spool"),
		UploadInterval: c.Duration("upload-interval"),
		Overwrite:      c.Bool("overwrite"),
		Notice:         c.App.ErrWriter,
		Logger:         warnLogger(c),
	})
}

func mergeCommand() *cli.Command {
	return &cli.Command{
		Name:      "merge",
		Usage:     "check that the shards of a sharded run add up to the whole run and record it",
		UsageText: "hermes-pipe merge OUT [--prompts FILE] [--no-input] [--allow-retryable] [--json]",
		Description: `OUT holds one output folder per shard (OUT/shard-I-of-N). merge checks that
every index 0..N-1 ran and passes verify, that every key sits in the shard that
owns it (so no key is in two shards), that no row waits for a retry, and that the
union of the keys equals the input's (the --prompts file, by default the one the
shards recorded in run.json). Then it writes OUT/merged.json (shards and counts)
and the merged OUT/statistics.json. No record is copied.

Exit 0 when the run is complete; 1 with the list of problems otherwise (re-run
the indices it names with --resume, then merge again).`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "prompts", Usage: "generate input to check the union of keys against (default: the one recorded in run.json)"},
			&cli.BoolFlag{Name: "no-input", Usage: "do not check the keys against the input"},
			&cli.BoolFlag{Name: "allow-retryable", Usage: "accept rows that still carry a retryable outcome (api_error, timeout, …)"},
			&cli.BoolFlag{Name: "json", Usage: "print merged.json instead of a summary"},
			&cli.StringFlag{Name: "cache", Usage: "local read cache when OUT is an s3:// or file:// URL (default: under the temp dir)"},
		},
		Action: runMerge,
	}
}

func runMerge(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("merge takes one argument, the sharded output folder")
	}
	out, err := localRun(c, c.Args().First(), false)
	if err != nil {
		return err
	}
	if !cluster.IsSharded(out) {
		return usagef("merge %s: no shard-I-of-N folder: not a sharded run", c.Args().First())
	}
	promptsFile, err := localInput(c, "prompts", c.String("prompts"))
	if err != nil {
		return err
	}
	m, err := cluster.Merge(c.Context, out, cluster.MergeOptions{
		Prompts:        promptsFile,
		NoInput:        c.Bool("no-input"),
		AllowRetryable: c.Bool("allow-retryable"),
		InputKeys:      prompts.EachKey,
		Name:           c.Args().First(), // the URL, not the local cache, for a store
	})
	if err != nil {
		var inc *cluster.IncompleteError
		if errors.As(err, &inc) {
			return &exitStatus{code: exitFatal, msg: inc.Error()}
		}
		return err
	}
	if url := c.Args().First(); objstore.IsURL(url) {
		if err := cluster.UploadMerged(c.Context, url, out); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, m)
	}
	checked := "input not checked"
	if m.Input != nil {
		checked = fmt.Sprintf("all %d input keys of %s present", m.Input.Keys, m.Input.Prompts)
	}
	fmt.Fprintf(c.App.Writer, "%s: %d shards complete, %d records (%d ok, %d failed), %s; wrote %s and statistics.json\n",
		c.Args().First(), m.ShardCount, m.Records, m.OK, m.Failed, checked, cluster.MergedFile)
	return nil
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show the progress of a run, per shard when sharded (done, failed, remaining, rate)",
		UsageText: "hermes-pipe status OUT [--prompts FILE] [--window 5m] [--json]",
		Description: `Reads each shard's ledger (not its records) and, to count what remains, the
prompts file the shards recorded (or --prompts). Safe while the shards run.
An output folder that was not sharded is shown as its one shard, ".".`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "prompts", Usage: "generate input to count remaining rows against (default: the one recorded in run.json)"},
			&cli.DurationFlag{Name: "window", Value: 5 * time.Minute, Usage: "rate over the records committed within this window"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
			&cli.StringFlag{Name: "cache", Usage: "local read cache when OUT is an s3:// or file:// URL (default: under the temp dir)"},
		},
		Action: runStatus,
	}
}

func runStatus(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("status takes one argument, the output folder")
	}
	out, err := localRun(c, c.Args().First(), true)
	if err != nil {
		return err
	}
	if c.Duration("window") <= 0 {
		return usagef("--window must be positive")
	}
	promptsFile, err := localInput(c, "prompts", c.String("prompts"))
	if err != nil {
		return err
	}
	opts := cluster.StatusOptions{Prompts: promptsFile, Window: c.Duration("window"), InputKeys: prompts.EachKey}
	if url := c.Args().First(); objstore.IsURL(url) {
		if opts.Commits, err = cluster.StoreCommits(c.Context, url); err != nil {
			return err
		}
	}
	sts, err := cluster.Status(c.Context, out, opts)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, sts)
	}
	return cluster.WriteStatus(c.App.Writer, sts, time.Now())
}

// localRun binds --cache and calls cluster.LocalRun: out itself, or a read
// cache brought up to date from the store.
func localRun(c *cli.Context, out string, ledgerOnly bool) (string, error) {
	cache := ""
	if c.IsSet("cache") {
		cache = c.String("cache")
	}
	return cluster.LocalRun(cmdContext(c), out, cache, ledgerOnly)
}

// localInput is cluster.LocalInput for the value of one flag; its errors name
// the flag.
func localInput(c *cli.Context, flag, p string) (string, error) {
	l, err := cluster.LocalInput(cmdContext(c), p)
	if err != nil {
		return "", usagef("--%s: %v", flag, err)
	}
	return l, nil
}

// cmdContext is the command's context, or Background outside a running app.
func cmdContext(c *cli.Context) context.Context {
	if c.Context != nil {
		return c.Context
	}
	return context.Background()
}

// localInputs is localInput for each value of a repeatable flag.
func localInputs(c *cli.Context, flag string, ps []string) ([]string, error) {
	out := make([]string, len(ps))
	for i, p := range ps {
		l, err := localInput(c, flag, p)
		if err != nil {
			return nil, err
		}
		out[i] = l
	}
	return out, nil
}
