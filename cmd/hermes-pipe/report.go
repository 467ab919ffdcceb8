package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hermes-pipe/hermes-pipe/pipeline/report"
	"github.com/hermes-pipe/hermes-pipe/stages/compress"
	"github.com/hermes-pipe/hermes-pipe/stages/swe"
	"github.com/urfave/cli/v2"
)

// reportSections are the modes' parts of report.html, in the page's order:
// `report` and swe's run show every mode's, each where the folder has
// something of it.
func reportSections() []report.Section {
	return []report.Section{compress.ReportSection{}, swe.ReportSection{}}
}

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "write a self-contained HTML report of an output folder (outcomes, tools, histograms, spend, compression, SWE, shards)",
		UsageText: "hermes-pipe report [-o report.html] DIR",
		Description: `One HTML file with inline CSS and SVG and no external URL, so it opens from
a CI artefact or an e-mail with the network unplugged. Its totals are those of
"hermes-pipe stats --json", which it also embeds as JSON (script#stats-json).
The file is written outside the output folder unless -o says otherwise; swe
writes one as report.html next to report.json on every run.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: report.File, Usage: "the HTML file to write"},
		},
		Action: func(c *cli.Context) error {
			root, dirs, err := runFolder(c)
			if err != nil {
				return err
			}
			opts := report.Options{Title: c.Args().First(), Sections: reportSections()}
			if len(dirs) > 1 || dirs[0] != root {
				opts.Root = root
			}
			out, err := filepath.Abs(c.String("output"))
			if err != nil {
				return usagef("-o: %v", err)
			}
			if st, err := os.Stat(out); err == nil && st.IsDir() {
				return usagef("-o %s is a folder", out)
			}
			if err := report.WriteFile(cmdContext(c), dirs, opts, filepath.Dir(out), filepath.Base(out)); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "wrote %s\n", out)
			return nil
		},
	}
}
