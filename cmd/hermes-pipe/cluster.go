package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/cluster"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/urfave/cli/v2"
)

// shardFlags choose the shard of a run split across machines; generate,
// compress and swe take them.
func shardFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "shard", Usage: "run shard I of N (0-based, e.g. 3/8) into OUT/shard-I-of-N; without it the index comes from JOB_COMPLETION_INDEX (Kubernetes Indexed Job) or SLURM_ARRAY_TASK_ID (Slurm array)"},
		&cli.IntFlag{Name: "shard-count", EnvVars: []string{"HERMES_PIPE_SHARD_COUNT"}, Usage: "N, the number of shards, when the index comes from the environment (SLURM_ARRAY_TASK_COUNT is read when set)"},
	}
}

// shardFilter reads the shard flags and environment. When the run is sharded
// it prepares OUT/shard-I-of-N (refusing another N than the shards already in
// OUT), prints which shard this process is, and returns the filter that keeps
// the records the shard owns and the folder to write; otherwise it returns a
// nil filter and --out unchanged. Errors are usage errors (exit 2).
func shardFilter(c *cli.Context) (func(*schemas.Record) bool, string, error) {
	out := c.String("out")
	sp, from, ok, err := cluster.Resolve(c.String("shard"), c.Int("shard-count"), os.Getenv)
	if err != nil {
		return nil, "", usagef("%v", err)
	}
	if !ok {
		return nil, out, nil
	}
	dir, err := cluster.Prepare(out, sp)
	if err != nil {
		return nil, "", usagef("%v", err)
	}
	fmt.Fprintf(c.App.ErrWriter, "shard %s (from %s): rows whose key hashes to %d of %d, written to %s\n", sp, from, sp.Index, sp.Count, dir)
	return func(rec *schemas.Record) bool { return sp.Owns(rec.Key) }, dir, nil
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
		},
		Action: runMerge,
	}
}

func runMerge(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("merge takes one argument, the sharded output folder")
	}
	out := c.Args().First()
	if !cluster.IsSharded(out) {
		return usagef("merge %s: no shard-I-of-N folder: not a sharded run", out)
	}
	m, err := cluster.Merge(c.Context, out, cluster.MergeOptions{
		Prompts:        c.String("prompts"),
		NoInput:        c.Bool("no-input"),
		AllowRetryable: c.Bool("allow-retryable"),
	})
	if err != nil {
		var inc *cluster.IncompleteError
		if errors.As(err, &inc) {
			return &exitStatus{code: exitFatal, msg: inc.Error()}
		}
		return err
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(m)
	}
	checked := "input not checked"
	if m.Input != nil {
		checked = fmt.Sprintf("all %d input keys of %s present", m.Input.Keys, m.Input.Prompts)
	}
	fmt.Fprintf(c.App.Writer, "%s: %d shards complete, %d records (%d ok, %d failed), %s; wrote %s and statistics.json\n",
		out, m.ShardCount, m.Records, m.OK, m.Failed, checked, cluster.MergedFile)
	return nil
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show per-shard progress of a sharded run (done, failed, remaining, rate)",
		UsageText: "hermes-pipe status OUT [--prompts FILE] [--window 5m] [--json]",
		Description: `Reads each shard's ledger (not its records) and, to count what remains, the
prompts file the shards recorded (or --prompts). Safe while the shards run.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "prompts", Usage: "generate input to count remaining rows against (default: the one recorded in run.json)"},
			&cli.DurationFlag{Name: "window", Value: 5 * time.Minute, Usage: "rate over the records committed within this window"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: runStatus,
	}
}

func runStatus(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("status takes one argument, the sharded output folder")
	}
	out := c.Args().First()
	if !cluster.IsSharded(out) {
		return usagef("status %s: no shard-I-of-N folder: not a sharded run", out)
	}
	if c.Duration("window") <= 0 {
		return usagef("--window must be positive")
	}
	sts, err := cluster.Status(c.Context, out, cluster.StatusOptions{Prompts: c.String("prompts"), Window: c.Duration("window")})
	if err != nil {
		return err
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(sts)
	}
	return cluster.WriteStatus(c.App.Writer, sts, time.Now())
}
