package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hermes-pipe/hermes-pipe/pipeline/cluster"
	"github.com/hermes-pipe/hermes-pipe/pipeline/export"
)

func exportCommand() *cli.Command {
	return &cli.Command{
		Name:      "export",
		Usage:     "write output folders as a training set in the Hugging Face dataset layout (Parquet or JSONL, card, manifest)",
		UsageText: "hermes-pipe export SRC... --to DIR [--format messages|sharegpt] [--file-format parquet|jsonl] [--where EXPR]... [--best-of N] [--split train=0.95,validation=0.05 --seed S]",
		Description: `Reads one or more output folders (generate, compress, swe, cron runs; a local
folder, a sharded run's folder, or an s3:// / file:// URL) and writes
DIR/data/<split>-<i>-of-<n>.<ext>, DIR/README.md (a dataset card with the
configs, features and counts) and DIR/export.json (sources, options, counts in
and out of each step). Rows: sources in the order given, each in cat's order.

--format messages (default): one row per record with messages (role user,
assistant or tool; Hermes' system turn is made from the tools column, so there
is no system message, except a compressed record's first one, holding the
notice compress added to its system turn), tools (the OpenAI tool schemas
offered), key, id, prompt_index, sample, outcome, model, reward (the record's;
null when ungraded or its grader failed) and source (the run id). An assistant's think text is reasoning_content. Tool-call
arguments are JSON text (the OpenAI form); --arguments object writes them as
JSON objects (the Hugging Face chat-template form, --file-format jsonl only).
A record that cannot be converted exactly is left out and counted
(not_convertible in export.json). --format sharegpt: the record's
conversations exactly, plus tools and the same columns. --logprobs adds the
column logprobs: for each assistant reply generate --logprobs kept, its
message index (its turn in conversations with --format sharegpt), tokens,
logprobs and token_ids (one per completion token); an entry naming no
assistant turn is left out and counted (logprobs_dropped in export.json).

Selection, in this order, each counted: --where FIELD OP VALUE (repeatable,
all must hold; OP one of = != < <= > >=; fields: ` + strings.Join(export.WhereFields(), ", ") + `;
a null cost or reward matches nothing), --require-reasoning,
--drop-unknown-tools, --dedupe exact (one row per distinct conversation, key
order and spacing of tool-call JSON ignored), --best-of N (at most N samples
per prompt: higher reward, then completed, then fewer tokens, then key), then
--split by prompt (its id, else its text), so no prompt is in two splits.

Every shard is checked against its ledger first (size and SHA-256): a cut or
changed shard is an error and nothing is written. The export is written beside
DIR and renamed into place; an existing non-empty DIR needs --overwrite. The
same inputs and options give byte-identical files.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "to", Usage: "the export folder (required)"},
			&cli.BoolFlag{Name: "overwrite", Usage: "replace an existing non-empty --to"},
			&cli.StringFlag{Name: "format", Value: export.FormatMessages, Usage: "messages (OpenAI chat messages + tools) or sharegpt (the records' conversations exactly + tools)"},
			&cli.StringFlag{Name: "file-format", Value: export.FileParquet, Usage: "parquet (typed columns) or jsonl"},
			&cli.StringFlag{Name: "arguments", Value: export.ArgumentsString, Usage: "tool-call arguments as string (JSON text, the OpenAI form) or object (the Hugging Face form; jsonl only)"},
			&cli.StringSliceFlag{Name: "where", Usage: "keep rows where FIELD OP VALUE holds (repeatable; all must hold)"},
			&cli.BoolFlag{Name: "require-reasoning", Usage: "leave out rows without reasoning"},
			&cli.BoolFlag{Name: "drop-unknown-tools", Usage: "leave out rows calling a tool their system turn does not offer"},
			&cli.StringFlag{Name: "dedupe", Usage: "exact: one row per distinct conversation"},
			&cli.IntFlag{Name: "best-of", Usage: "keep at most N samples per prompt, the best first"},
			&cli.StringFlag{Name: "split", Value: "train=1", Usage: "splits by prompt, NAME=FRACTION,... (fractions add up to 1)"},
			&cli.Int64Flag{Name: "seed", Usage: "seed of the split draw"},
			&cli.IntFlag{Name: "shard-rows", Value: export.DefaultShardRows, Usage: "at most this many rows per data file"},
			&cli.BoolFlag{Name: "logprobs", Usage: "add the logprobs column: the token logprobs of each assistant reply (generate --logprobs), {message (turn with --format sharegpt), tokens, logprobs, token_ids} per reply"},
			&cli.StringFlag{Name: "progress", Value: "auto", Usage: "progress on standard error: auto (log lines) or none"},
			&cli.StringFlag{Name: "cache", Usage: "local read cache for s3:// or file:// sources (default: under the temp dir)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return usagef("export takes at least one output folder")
			}
			if !c.IsSet("to") {
				return usagef("export needs --to DIR")
			}
			opts := export.Options{
				To: c.String("to"), Overwrite: c.Bool("overwrite"), Format: c.String("format"),
				FileFormat: c.String("file-format"), Arguments: c.String("arguments"), Where: c.StringSlice("where"),
				RequireReasoning: c.Bool("require-reasoning"), DropUnknownTools: c.Bool("drop-unknown-tools"),
				Dedupe: c.String("dedupe"), BestOf: c.Int("best-of"), Split: c.String("split"), Seed: c.Int64("seed"),
				ShardRows: c.Int("shard-rows"), Logprobs: c.Bool("logprobs"),
			}
			if c.IsSet("best-of") && opts.BestOf < 1 {
				return usagef("--best-of %d: must be at least 1", opts.BestOf)
			}
			switch c.String("progress") {
			case "auto", "plain":
				opts.Progress = exportProgress(c.App.ErrWriter)
			case "none":
			default:
				return usagef("--progress: %q is not one of auto, none", c.String("progress"))
			}
			for _, src := range c.Args().Slice() {
				s, err := exportSource(c, src)
				if err != nil {
					return err
				}
				opts.Sources = append(opts.Sources, s)
			}
			if os.Getenv("GOMEMLIMIT") == "" {
				// The export's live memory is flat (about 180 MB for
				// 1,000,000 rows, most of it the ledger index each pass
				// reads a folder with); a soft limit keeps the collector
				// from letting the heap double over it, so the process
				// stays under 300 MB. The previous limit is restored
				// after (tests run many commands in one process).
				defer debug.SetMemoryLimit(debug.SetMemoryLimit(exportMemoryLimit))
			}
			man, err := export.Run(cmdContext(c), opts)
			if errors.Is(err, export.ErrUsage) {
				return usagef("%v", err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.ErrWriter, "export: %d rows to %s", man.Rows, opts.To)
			for _, st := range man.Steps {
				if st.In != st.Out {
					fmt.Fprintf(c.App.ErrWriter, "; %s: %d of %d", st.Name, st.Out, st.In)
				}
			}
			if man.NotConvertible.Count > 0 {
				fmt.Fprintf(c.App.ErrWriter, "; %d not convertible (first: %s)", man.NotConvertible.Count, strings.Join(man.NotConvertible.Keys, ", "))
			}
			fmt.Fprintln(c.App.ErrWriter)
			return nil
		},
	}
}

// exportMemoryLimit is the export command's soft memory limit (GOMEMLIMIT
// overrides it).
const exportMemoryLimit = 240 << 20

// exportSource is one SRC: a local folder (or the cache of a URL), and a
// sharded run's shard folders.
func exportSource(c *cli.Context, src string) (export.Source, error) {
	dir, err := localRun(c, src, false)
	if err != nil {
		return export.Source{}, err
	}
	st, err := os.Stat(dir)
	if err != nil {
		return export.Source{}, usagef("%v", err)
	}
	if !st.IsDir() {
		return export.Source{}, usagef("%s is not a folder", src)
	}
	if cluster.IsSharded(dir) {
		dirs, err := cluster.ShardDirs(dir)
		if err != nil {
			return export.Source{}, err
		}
		return export.Source{Path: src, Dirs: dirs}, nil
	}
	return export.Source{Path: src, Dirs: []string{dir}}, nil
}

// exportProgress prints a line per pass at most every two seconds, and
// the end of each pass.
func exportProgress(w io.Writer) func(pass int, done, total int64) {
	var mu sync.Mutex
	var last time.Time
	return func(pass int, done, total int64) {
		mu.Lock()
		defer mu.Unlock()
		end := total > 0 && done == total
		if !end && time.Since(last) < 2*time.Second {
			return
		}
		last = time.Now()
		what := [...]string{1: "checked and selected", 2: "read for writing"}[pass]
		if total > 0 {
			fmt.Fprintf(w, "export: pass %d: %d/%d records %s\n", pass, done, total, what)
			return
		}
		fmt.Fprintf(w, "export: pass %d: %d records %s\n", pass, done, what)
	}
}
