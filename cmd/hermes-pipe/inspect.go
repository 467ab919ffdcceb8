package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/cluster"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/schemas/pyjson"
	"github.com/urfave/cli/v2"
)

// runDirs resolves the one output-folder argument of cat, stats and verify:
// a local folder or an s3:// / file:// URL (read through a local cache), of
// one run or of a run sharded across machines (one folder per shard, in
// index order).
func runDirs(c *cli.Context) ([]string, error) {
	_, dirs, err := runFolder(c)
	return dirs, err
}

// runFolder is runDirs that also returns the run's local folder: the folder
// itself, or the one holding the shard folders of a sharded run.
func runFolder(c *cli.Context) (string, []string, error) {
	if c.NArg() != 1 {
		return "", nil, usagef("%s takes exactly one output folder, got %d arguments", c.Command.Name, c.NArg())
	}
	dir, err := localRun(c, c.Args().First(), false)
	if err != nil {
		return "", nil, err
	}
	st, err := os.Stat(dir)
	if err != nil {
		return "", nil, usagef("%v", err)
	}
	if !st.IsDir() {
		return "", nil, usagef("%s is not a folder", dir)
	}
	if cluster.IsSharded(dir) {
		dirs, err := cluster.ShardDirs(dir)
		return dir, dirs, err
	}
	return dir, []string{dir}, nil
}

func catCommand() *cli.Command {
	return &cli.Command{
		Name:      "cat",
		Usage:     "print every record of an output folder, one JSON line each, in (prompt_index, sample) order",
		UsageText: "hermes-pipe cat [--final] DIR",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "final", Usage: "only records with a final outcome (leave out those waiting for a --resume retry)"},
		},
		Action: func(c *cli.Context) error {
			dirs, err := runDirs(c)
			if err != nil {
				return err
			}
			w := bufio.NewWriterSize(c.App.Writer, 1<<20)
			if err := cluster.CatAllWith(dirs, w, pipeline.CatOptions{Final: c.Bool("final")}); err != nil {
				return err
			}
			return w.Flush()
		},
	}
}

func statsCommand() *cli.Command {
	return &cli.Command{
		Name:      "stats",
		Usage:     "print run statistics recomputed from the records of an output folder",
		UsageText: "hermes-pipe stats [--json] DIR",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON instead of a table"}},
		Action: func(c *cli.Context) error {
			dirs, err := runDirs(c)
			if err != nil {
				return err
			}
			st, err := cluster.StatsAll(dirs)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			return st.WriteText(c.App.Writer)
		},
	}
}

func verifyCommand() *cli.Command {
	return &cli.Command{
		Name:      "verify",
		Usage:     "check that an output folder is whole; exit 0 only if it is",
		UsageText: "hermes-pipe verify [--json] DIR",
		Description: `Checks: no duplicate key, no torn or unparsable shard, every record
schema-valid, every ledger entry matches its shard and every shard is in the
ledger, no stray temporary file. Each problem is printed with its file and line.`,
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"}},
		Action: func(c *cli.Context) error {
			dirs, err := runDirs(c)
			if err != nil {
				return err
			}
			var rep pipeline.VerifyReport
			for _, dir := range dirs {
				r, err := pipeline.Verify(dir)
				if err != nil {
					return err
				}
				if len(dirs) > 1 { // name each problem's shard
					for i := range r.Problems {
						r.Problems[i].File = filepath.Join(filepath.Base(dir), r.Problems[i].File)
					}
				}
				rep.Shards += r.Shards
				rep.Records += r.Records
				rep.LiveKeys += r.LiveKeys
				rep.Problems = append(rep.Problems, r.Problems...)
			}
			dir := c.Args().First()
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else if err := rep.WriteText(c.App.Writer); err != nil {
				return err
			}
			if !rep.OK() {
				return &exitStatus{code: exitFatal, msg: fmt.Sprintf("%s is not whole: %d problems", dir, len(rep.Problems))}
			}
			return nil
		},
	}
}

func repairCommand() *cli.Command {
	return &cli.Command{
		Name:      "repair",
		Usage:     "rebuild the missing or empty ledger of an output folder from its shards (or drop ledger lines naming a path outside it)",
		UsageText: "hermes-pipe repair DIR",
		Description: `Each valid shard in data/ and failed/ becomes one ledger line, in shard-number
order, written atomically; nothing is deleted. A shard that is not valid is left
out and listed (exit 1). Inputs that were filtered out have no shard: --resume
runs them again. A ledger that still has lines is refused; run verify to see
what is wrong with it. The one exception: ledger lines naming a shard path
outside the folder (a folder from someone else) are rewritten without it,
their records marked lost so --resume redoes them; that path is never read.`,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("repair takes exactly one output folder, got %d arguments", c.NArg())
			}
			dir := c.Args().First()
			rep, err := pipeline.Repair(dir)
			if err != nil {
				return err
			}
			if len(rep.Dropped) > 0 {
				for _, p := range rep.Dropped {
					fmt.Fprintln(c.App.Writer, p.String())
				}
				fmt.Fprintf(c.App.Writer, "rewrote %d lines of %s that named a shard outside the folder\n", len(rep.Dropped), filepath.Join(dir, pipeline.LedgerFile))
				return nil
			}
			for _, p := range rep.Skipped {
				fmt.Fprintf(c.App.Writer, "%s: left out: %s\n", p.File, p.Msg)
			}
			fmt.Fprintf(c.App.Writer, "rebuilt %s from %d shards, %d records\n", filepath.Join(dir, pipeline.LedgerFile), rep.Shards, rep.Records)
			if len(rep.Skipped) > 0 {
				return &exitStatus{code: exitFatal, msg: fmt.Sprintf("%d shards of %s are not valid and were left out of the ledger", len(rep.Skipped), dir)}
			}
			return nil
		},
	}
}

func sharegptCommand() *cli.Command {
	return &cli.Command{
		Name:      "sharegpt",
		Usage:     "convert OpenAI-format transcripts to Hermes ShareGPT lines",
		UsageText: "hermes-pipe sharegpt [FILE]   (standard input when FILE is absent or -)",
		Description: `Each input line is {"messages": [...], "tools": [...]} in OpenAI chat format.
Each output line is {"conversations": [{"from", "value"}, ...]} exactly as Hermes
writes trajectories. Hermes' multimodal tool results ({"_multimodal": true,
"content": [...], "text_summary": ...}) become their text summary, and content
given as a list of parts is written as the list Hermes writes (image parts as
its [screenshot] text part); --flatten-content joins such lists into one
string instead. Read beyond Hermes: "reasoning_content", the "developer" role,
assistant content as parts (Hermes cannot convert those) and a tool's
"parameters" given as a string of JSON (as Parquet files hold schemas); a
message's optional fields may be null. A bad line is reported with its line
number and field on standard error and skipped; the exit code is then 3.

The input's own system messages are dropped, as Hermes drops them: the system
turn is always Hermes' function-calling prompt listing the line's tools, as in
generate's trajectories (its --system-prompt is sent, not recorded). There is
no flag to keep them: text of a system message that must reach training has to
be moved into the first user message before conversion.`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "flatten-content", Usage: "write content given as a list of parts as one string (text parts joined with a newline, images as [screenshot]) for trainers that need string values"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return usagef("sharegpt takes at most one file")
			}
			name := "-"
			var in io.Reader = c.App.Reader
			if in == nil {
				in = os.Stdin
			}
			if c.NArg() == 1 && c.Args().First() != "-" {
				name = c.Args().First()
				f, err := os.Open(name)
				if err != nil {
					return usagef("%v", err)
				}
				defer f.Close()
				if st, err := f.Stat(); err == nil && st.IsDir() {
					return usagef("sharegpt: %s is a folder, not a JSONL file of {\"messages\", \"tools\"} lines (an output folder's records are ShareGPT already: hermes-pipe cat %s)", name, name)
				}
				in = f
			}
			opts := schemas.ConvertOptions{FlattenContent: c.Bool("flatten-content")}
			return convertShareGPT(name, in, c.App.Writer, c.App.ErrWriter, opts)
		},
	}
}

// convertShareGPT streams lines from in to out; bad lines are reported on
// errw and make the result exit 3.
func convertShareGPT(name string, in io.Reader, out, errw io.Writer, opts schemas.ConvertOptions) error {
	r := bufio.NewReaderSize(in, 1<<20)
	w := bufio.NewWriterSize(out, 1<<20)
	bad, lineNo := 0, 0
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			lineNo++
			if t := strings.TrimSpace(string(line)); t != "" {
				turns, cerr := schemas.ConvertOpenAILineWith([]byte(t), opts)
				if cerr != nil {
					bad++
					fmt.Fprintf(errw, "%s:%d: %v\n", name, lineNo, cerr)
				} else {
					w.Write(conversationsLine(turns))
					w.WriteByte('\n')
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if bad > 0 {
		return &exitStatus{code: exitRowsFailed, msg: fmt.Sprintf("%d of %d lines of %s could not be converted", bad, lineNo, name)}
	}
	return nil
}

// conversationsLine renders {"conversations": [...]} as Python's json.dumps
// with ensure_ascii=False would, so lines match Hermes' trajectory files.
func conversationsLine(turns []schemas.Turn) []byte {
	b := make([]byte, 0, 256)
	b = append(b, `{"conversations": [`...)
	for i := range turns {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, `{"from": `...)
		b = pyjson.AppendString(b, turns[i].From)
		b = append(b, `, "value": `...)
		b = schemas.AppendTurnValue(b, &turns[i])
		b = append(b, '}')
	}
	return append(b, "]}"...)
}
