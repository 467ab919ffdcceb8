package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
	"github.com/hermes-pipe/hermes-pipe/stages/grade"
	"github.com/hermes-pipe/hermes-pipe/stages/regrade"
	"github.com/hermes-pipe/hermes-pipe/stages/swe"
	"github.com/urfave/cli/v2"
)

func regradeCommand() *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "verify", Usage: "shell `CMD` that grades every record instead of its row's own verify (the cmd grader: run in the restored workspace; exit 0 = pass; a last stdout line {\"reward\": N} gives the reward)"},
		&cli.StringFlag{Name: "prompts", Usage: "the prompts `FILE` the records were made from (rows' verify, answer, image); default: the one run.json names"},
		&cli.StringFlag{Name: "keep-workspace-max", Value: "1G", Usage: "largest workspace tar restored (an archive whose tar is larger is refused)"},
		&cli.IntFlag{Name: "workers", Value: 4, Usage: "records graded at once"},
	}
	flags = append(flags, graderFlags()...) // generate's, bound by the same graderOf
	flags = append(flags, inCategory("Sandbox", sandboxFlags()...)...)
	return &cli.Command{
		Name:      "regrade",
		Usage:     "grade the records of a generate output folder again, without the model",
		UsageText: "hermes-pipe regrade OUT [--verify CMD | --grader NAME | --grader-exec PATH] [--grader-timeout D] [sandbox options]",
		Description: `Grades every record of OUT again and appends the new grades to
OUT/grades.jsonl (one fsynced line per record: key, reward, grade); cat, stats,
export and report then show each record with its latest grade. The records'
shards are not rewritten, and no model is called.

The cmd grader (a row's verify command, or --verify for every record) needs
the record's workspace, kept by generate --keep-workspace: it is restored into
a fresh sandbox session (the same --sandbox flags as generate; confined local
by default) and the command runs there. A record without a kept workspace (the
run did not keep them, or it was over --keep-workspace-max) keeps its grade
and is reported. The answer graders (exact, contains, regex, number) compare
the record's final message with its row's answer, read from the prompts file
run.json names (or --prompts). A grader that fails or times out gives
reward null with its error, never 0.

Exit 3 when an archive could not be restored (damaged, refused).`,
		Flags:  flags,
		Action: runRegrade,
	}
}

func runRegrade(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("regrade takes one output folder, got %d arguments", c.NArg())
	}
	out := c.Args().First()
	g, err := graderOf(c)
	if err != nil {
		return err
	}
	if c.String("verify") != "" {
		if g.Kind != "" && g.Kind != grade.Cmd || g.Exec != "" {
			return usagef("--verify is the cmd grader's command; --grader %s does not run it", cmp.Or(g.Kind, grade.Exec))
		}
		g.Kind = grade.Cmd
	}
	kind := g.Kind
	if c.Int("workers") < 1 {
		return usagef("--workers must be at least 1, got %d", c.Int("workers"))
	}
	maxTar, err := confine.ParseBytes(c.String("keep-workspace-max"))
	if err != nil || maxTar <= 0 {
		return usagef("--keep-workspace-max: %q is not a size above 0", c.String("keep-workspace-max"))
	}
	promptsFile, samples, maxLine, err := regrade.Manifest(out)
	if err != nil {
		return usagef("%v", err)
	}
	if promptsFile, err = regradeRows(c, out, promptsFile, g.Exec != ""); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := regrade.Options{Out: out, Grader: g, Verify: c.String("verify"), Prompts: promptsFile, Samples: samples,
		MaxLineBytes: maxLine, Workers: c.Int("workers"), MaxTar: maxTar, DefaultImage: c.String("docker-image"),
		Progress: c.App.ErrWriter}
	if kind == "" || kind == grade.Cmd {
		opts.RunID = newRunID()
		d, err := openSandbox(c.String("sandbox"), sandboxConfig(c, opts.RunID))
		if err != nil {
			return err
		}
		defer releaseSandbox(d)
		if err := preflightDriver(ctx, d); err != nil {
			return err
		}
		opts.Driver = d
	}
	sum, err := regrade.Run(ctx, opts)
	fmt.Fprintf(c.App.ErrWriter, "%s: %d records, %d regraded (%d passed, %d failed, %d grader errors), %d without a kept workspace, %d workspaces not restored, %d with nothing to grade, %d with an outcome that is not graded\n",
		out, sum.Records, sum.Graded, sum.Passed, sum.Failed, sum.GraderError, sum.NoWorkspace, sum.Damaged, sum.Nothing, sum.NotGraded)
	switch {
	case err != nil:
		return err
	case ctx.Err() != nil:
		return &exitStatus{code: exitInterrupted, msg: "interrupted: the grades written so far are kept; run regrade again to grade the rest"}
	case sum.Damaged > 0:
		return &exitStatus{code: exitRowsFailed, msg: fmt.Sprintf("%d kept workspaces could not be restored (see above); their records keep their grades", sum.Damaged)}
	}
	return nil
}

// regradeRows is the prompts file regrade reads rows from: --prompts, else
// the one run.json names (recorded as given: relative to where generate
// ran). Without one, only --verify and the exec grader can grade, and a
// missing file is then no error.
func regradeRows(c *cli.Context, out, recorded string, exec bool) (string, error) {
	if f := c.String("prompts"); f != "" {
		if err := checkInputFile("prompts", f); err != nil {
			return "", err
		}
		return f, nil
	}
	if recorded == "" {
		return "", nil
	}
	if _, err := os.Stat(recorded); err != nil {
		if c.String("verify") != "" || exec {
			return "", nil
		}
		return "", usagef("the prompts file %s that %s names: %v; give --prompts", recorded, filepath.Join(out, outdir.ManifestFile), err)
	}
	return recorded, nil
}

// sweRegradeCommand is `hermes-pipe swe regrade OUT`: the stored patches of
// a swe folder graded again, without the model.
func sweRegradeCommand() *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "tasks", Usage: "the tasks file the run was made from; default: the one run.json names"},
		&cli.StringFlag{Name: "default-image", Value: swe.DefaultImage, Usage: "image of tasks that name none (as the run's)"},
		&cli.DurationFlag{Name: "test-timeout", Value: swe.DefaultTestTimeout, Usage: "bound of one task's test command; passing it is no verdict (reward null)"},
		&cli.IntFlag{Name: "workers", Value: 4, Usage: "patches graded at once (each in a fresh session)"},
	}
	for _, f := range sandboxFlags() {
		if f.Names()[0] == "sandbox" {
			f = &cli.StringFlag{Name: "sandbox", Usage: "where the tests run: docker, local or ssh; default: the run's (run.json)"}
		}
		flags = append(flags, f)
	}
	return &cli.Command{
		Name:      "regrade",
		Usage:     "run the tests again on the patches a swe run stored, without the model",
		UsageText: "hermes-pipe swe regrade OUT [--tasks FILE] [--test-timeout D] [sandbox options]",
		Description: `Grades every stored patch of the swe output folder OUT again (extra.model_patch):
apply it in a fresh session of the task's image (or a private clone of its cwd
with --sandbox local/ssh), reset the test files, apply the test patch and run
the task's tests, as swe grades. Each verdict is appended to OUT/grades.jsonl:
reward 1 for resolved, 0 for unresolved or an empty patch, null with the reason
for an environment failure; cat, stats and export show it as the record's
reward and grade. report.json is not rebuilt. No model is called.`,
		Flags:  flags,
		Action: runSWERegrade,
	}
}

func runSWERegrade(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("swe regrade takes one output folder, got %d arguments", c.NArg())
	}
	out := c.Args().First()
	if c.Int("workers") < 1 {
		return usagef("--workers must be at least 1, got %d", c.Int("workers"))
	}
	man, ok, err := outdir.ReadManifest(out)
	switch {
	case err != nil:
		return usagef("%s: %v", out, err)
	case !ok:
		return usagef("%s: not an output folder (no %s)", out, outdir.ManifestFile)
	}
	var rec struct {
		Tasks   string `json:"tasks"`
		Sandbox string `json:"sandbox"`
	}
	_ = json.Unmarshal(man.Options, &rec)
	src := swe.TaskSource{File: cmp.Or(c.String("tasks"), rec.Tasks), DefaultImage: c.String("default-image"),
		Sandbox: cmp.Or(c.String("sandbox"), rec.Sandbox, "docker")}
	if src.File == "" {
		return usagef("%s names no tasks file (a --task run): give --tasks", filepath.Join(out, outdir.ManifestFile))
	}
	src.NeedImage = src.Sandbox == "docker"
	cwds, err := cwdRule(c)
	if err != nil {
		return err
	}
	if cwds != nil {
		src.CheckCwd = cwds.Check
	}
	tasks, err := swe.LoadTasks(src)
	if err != nil {
		return usagef("--tasks: %v", err)
	}
	byID := make(map[string]swe.Task, len(tasks))
	for _, t := range tasks {
		byID[t.InstanceID] = t
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	runID := newRunID()
	d, err := openSandbox(src.Sandbox, sandboxConfig(c, runID))
	if err != nil {
		return err
	}
	defer releaseSandbox(d)
	if err := preflightDriver(ctx, d); err != nil {
		return err
	}
	sum, err := regrade.RunSWE(ctx, regrade.SWEOptions{Out: out, Tasks: byID, Workers: c.Int("workers"), Progress: c.App.ErrWriter,
		Grade: swe.GradeOptions{Driver: d, RunID: runID, TestTimeout: c.Duration("test-timeout"), Clone: src.Sandbox != "docker"}})
	fmt.Fprintf(c.App.ErrWriter, "%s: %d records, %d regraded (%d resolved, %d not, %d environment errors), %d without a stored patch\n",
		out, sum.Records, sum.Graded, sum.Passed, sum.Failed, sum.GraderError, sum.Nothing)
	switch {
	case err != nil:
		return err
	case ctx.Err() != nil:
		return &exitStatus{code: exitInterrupted, msg: "interrupted: the grades written so far are kept; run swe regrade again to grade the rest"}
	}
	return nil
}
