package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/swe"
	"github.com/urfave/cli/v2"
)

// sweCommand is `hermes-pipe swe`: a SWE-bench-style evaluation whose exit
// code a CI job can gate on.
func sweCommand() *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "tasks", Usage: "JSONL tasks: SWE-bench instances {instance_id, repo, base_commit, problem_statement, image, test_patch, FAIL_TO_PASS, PASS_TO_PASS, test_cmd, cwd?, env?} or {task, image?, test_cmd?, id?, env?}"},
		&cli.StringFlag{Name: "task", Usage: "run one task given here, in Hermes' simple form ({\"task\": TEXT}), instead of --tasks"},
		&cli.StringFlag{Name: "default-image", Value: swe.DefaultImage, Usage: "image of tasks that name none (Hermes' default); \"\" = none, which only --sandbox local or ssh accepts"},
		&cli.StringFlag{Name: "out", Usage: "output folder: trajectories (data/, failed/), ledger, report.json, junit.xml, preds.json", Required: true},
		&cli.IntFlag{Name: "max-turns", Value: 30, Usage: "assistant turns per task"},
		&cli.DurationFlag{Name: "timeout", Value: 30 * time.Minute, Usage: "agent time limit per task; when it passes during a command the patch so far is graded, during a model call the task is an error retried by --resume; 0 = none"},
		&cli.DurationFlag{Name: "test-timeout", Value: swe.DefaultTestTimeout, Usage: "bound of one task's test command; passing it is a harness error (retried by --resume)"},
		&cli.StringFlag{Name: "baseline", Usage: "a previous report.json (this tool's or the SWE-bench harness's): the gate fails when an instance resolved there is not resolved now"},
		&cli.StringFlag{Name: "min-resolved", Value: "0", Usage: "gate: minimum resolved rate, as a fraction (0.42) or a percentage (42%)"},
		&cli.StringFlag{Name: "system-prompt", Usage: "file whose text replaces the default system prompt (which explains the MINI_SWE_AGENT_FINAL_OUTPUT sentinel)"},
		&cli.IntFlag{Name: "max-tokens", Usage: "max_tokens per completion; 0 = not sent"},
		&cli.IntFlag{Name: "summary-rows", Value: 20, Usage: "instances listed in the summary table on stdout"},
	}
	flags = append(flags, toolFlags("terminal; terminal is added to every task's toolsets, the agent submits through it")...)
	flags = append(flags, samplingFlags(true)...)
	flags = append(flags, logprobsFlags()...)
	flags = append(flags, llmFlags()...)
	flags = append(flags, rolloutCapFlags()...)
	flags = append(flags, allowChangeFlag())
	for _, f := range runFlags() {
		switch f.Names()[0] {
		case "format", "shard-rows":
			continue // SWE output is JSONL with the default shard size
		case "workers":
			f = &cli.IntFlag{Name: "workers", Value: 4, Usage: "tasks run at once (each holds up to two containers)"}
		}
		flags = append(flags, f)
	}
	for _, f := range sandboxFlags() {
		if f.Names()[0] == "sandbox" {
			f = &cli.StringFlag{Name: "sandbox", Value: "docker", Usage: "where the agent and the tests run: docker (each session a fresh container of the task's image), or local / ssh (each session a private git clone of the task's cwd)"}
		}
		flags = append(flags, f)
	}
	return &cli.Command{
		Name:      "swe",
		Usage:     "evaluate an agent on SWE-bench-style tasks and gate CI on the resolved rate",
		UsageText: "hermes-pipe swe (--tasks FILE | --task TEXT) --out DIR --base-url URL --model NAME [--workers N] [--resume] [--baseline REPORT] [--min-resolved RATE]",
		Description: `Runs the agent on every task in the task's image with the terminal tool. The
agent submits by running a command whose output begins with the line
MINI_SWE_AGENT_FINAL_OUTPUT and exits 0 (the sentinel shown by cat or grep,
or by a failing command, does not count); it also stops when it replies
without a tool call or at --max-turns / --timeout.

The patch (git diff against the base commit, new files included) is graded in
a fresh container of the same image: apply it, reset the test files and apply
the task's test_patch, run test_cmd with --test-timeout, and read per-test
results (pytest "PASSED name" / "name PASSED", "PASS name" / "FAIL name",
"--- PASS: name", "ok name" / "not ok name"). Outcomes: resolved (every
FAIL_TO_PASS and PASS_TO_PASS test passes), unresolved, empty_patch, or error
(image missing, container or harness failure, test timeout, model endpoint
down). Errors never count as model failures and --resume runs them again;
tasks whose image is missing cost no token.

A task without an image runs in --default-image (python:3.11-slim, as Hermes);
with --sandbox local or ssh images are not used. A task's "env" names its
backend as in Hermes' mini_swe_runner ("local", "docker"; "ssh"): without
--sandbox the tasks choose the run's sandbox, with it a task asking for
another is refused (exit 2). Its "environment" object (or, as before, an
object-valued "env") sets variables in its agent and grading sessions. A simple task without
test_cmd is judged by its submission (its patch must not be empty; in an image
without git, the submission alone). The text after the sentinel line of the
submitting command is kept as extra.final_result.

--toolsets (or --distribution, --distribution-file) give the agent more tools
besides terminal: file, todo, skills (--skills-dir), execute_code, and the
MCP servers of --mcp-config as mcp-<server>. Every server is started and its
tools listed before the first model call; a server that fails exits 2 with
its stderr. Servers of scope rollout (the default for stdio) are started per
task and stopped with it; with --sandbox local ${workdir} is the task's
repository folder, the one the agent's commands work in.

Writes trajectories like generate, plus report.json, junit.xml (one testcase
per task) and preds.json (the SWE-bench harness's predictions format), rebuilt
from the whole folder after every run, and prints a summary table.

Exit codes: 0 the gate passed (resolved rate >= --min-resolved and no
--baseline instance regressed); 4 the gate failed; 1 the gate cannot be judged
(errors or unfinished tasks could change the verdict: --resume) or the run
failed; 2 usage; 130 interrupted.`,
		Flags:       flags,
		Action:      runSWE,
		Subcommands: []*cli.Command{sweRegradeCommand()},
	}
}

// parseRate reads --min-resolved: a fraction in [0, 1] or a percentage.
func parseRate(s string) (float64, error) {
	s = strings.TrimSpace(s)
	pct := strings.HasSuffix(s, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if pct {
		v /= 100
	}
	if v < 0 || v > 1 {
		return 0, fmt.Errorf("%q is not within 0..1 (or 0%%..100%%)", s)
	}
	return v, nil
}

func runSWE(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("swe takes no arguments, got %q", c.Args().First())
	}
	if _, err := checkRunFlags(c); err != nil {
		return err
	}
	if c.Int("max-turns") < 1 {
		return usagef("--max-turns must be at least 1, got %d", c.Int("max-turns"))
	}
	if c.Duration("timeout") < 0 || c.Duration("test-timeout") < 0 {
		return usagef("--timeout and --test-timeout must not be negative")
	}
	minRate, err := parseRate(c.String("min-resolved"))
	if err != nil {
		return usagef("--min-resolved: %v", err)
	}
	src := swe.TaskSource{Text: c.String("task"), DefaultImage: c.String("default-image")}
	switch {
	case c.IsSet("task") && c.IsSet("tasks"):
		return usagef("give --tasks or --task, not both")
	case c.IsSet("task"):
		if strings.TrimSpace(src.Text) == "" {
			return usagef("--task is empty")
		}
	case !c.IsSet("tasks"):
		return usagef("give --tasks FILE or --task TEXT")
	default:
		tasksFile, err := localInput(c, "tasks", c.String("tasks"))
		if err != nil {
			return err
		}
		if _, err := os.Stat(tasksFile); err != nil {
			return usagef("--tasks: %v", err)
		}
		src.File = tasksFile
	}
	if err := tasksSandbox(c, src); err != nil {
		return err
	}
	src.Sandbox = c.String("sandbox")
	src.NeedImage = src.Sandbox == "docker"
	// local and ssh clone each task's cwd from a folder of a host: it must
	// be under a --cwd-root (docker: a path inside the task's image).
	cwds, err := cwdRule(c)
	if err != nil {
		return err
	}
	if cwds != nil {
		src.CheckCwd = cwds.Check
	}
	if _, err := swe.LoadTasks(src); err != nil { // bad tasks cost nothing, not even a connection
		var te *swe.TaskError
		if cwds != nil && errors.As(err, &te) && te.Field == "cwd" {
			return usagef("--tasks: %v\n%s", err, cwdHint)
		}
		return usagef("--tasks: %v", err)
	}
	if b := c.String("baseline"); b != "" {
		if _, err := swe.ReadBaseline(b); err != nil {
			return usagef("--baseline: %v", err)
		}
	}
	systemPrompt, err := readSystemPrompt(c, swe.SystemPrompt)
	if err != nil {
		return err
	}
	tools, err := bindTools(c, []string{"terminal"})
	if err != nil {
		return err
	}
	// The MCP pre-flight: a server that cannot start costs no token and
	// leaves no output folder.
	if err := tools.start(c); err != nil {
		return err
	}
	defer tools.close()
	r, err := startRun(c, "swe", "", sandboxNow)
	if err != nil {
		return err
	}
	defer r.close()
	if err := protectRunDir(cwds, r.out.Dir); err != nil {
		return err
	}
	ro := r.rolloutOptions(c, systemPrompt)
	tools.apply(&ro)
	res, err := swe.Run(r.ctx, swe.Options{
		RunConfig: r.cfg,
		Tasks:     src,
		Rollout:   ro,
		Grade: swe.GradeOptions{
			TestTimeout: c.Duration("test-timeout"),
			// Only docker starts each session fresh from the image; with
			// the other drivers agent and grader each work on a private
			// clone of the task's cwd, which stays untouched.
			Clone: src.Sandbox != "docker",
		},
		CheckImages: imageChecker(r.driver),
		MinResolved: minRate,
		Baseline:    c.String("baseline"),
		Report:      reportSections(),
	})
	err = r.finish(c, err)
	if errors.Is(err, swe.ErrInput) || errors.Is(err, pipeline.ErrRefused) {
		return err
	}
	return reportSWE(c, res, err, r.retries)
}

// tasksSandbox lets the tasks choose the run's sandbox, as Hermes'
// mini_swe_runner's "env" does, when --sandbox is not given: the backend
// every task naming one names. Tasks naming two are a usage error (one run
// has one sandbox); with --sandbox given, LoadTasks refuses a task asking
// for another (TaskSource.Sandbox).
func tasksSandbox(c *cli.Context, src swe.TaskSource) error {
	if c.IsSet("sandbox") {
		return nil
	}
	tasks, err := swe.LoadTasks(src)
	if err != nil {
		return usagef("--tasks: %v", err)
	}
	b, err := swe.TasksBackend(tasks)
	if err != nil {
		return usagef("--tasks: %s: %v", src.File, err)
	}
	if b == "" {
		return nil
	}
	return c.Set("sandbox", b)
}

// cwdHint follows a tasks file refused for its cwds with --sandbox local
// or ssh: SWE-bench tasks name a folder of their image.
const cwdHint = `With --sandbox local or ssh a task's cwd is a git checkout on that host at the task's base commit, not a folder of its image (/testbed); for the sample suite, scripts/swe-repos.sh DIR writes the checkouts and DIR/tasks.jsonl naming them (then --tasks DIR/tasks.jsonl --cwd-root DIR).`

// reportSWE prints the summary table (stdout), the run's closing summary
// (stderr: this run's tasks by category, then printRunSummary's block, as
// generate and compress print it) and maps the run to the CI exit code.
func reportSWE(c *cli.Context, res swe.Result, runErr error, retries *llm.RetryCounts) error {
	out := c.String("out")
	w := c.App.ErrWriter
	for img, why := range res.MissingImages {
		fmt.Fprintf(w, "pre-flight: image %s unavailable: %v (its tasks are errors; --resume retries them)\n", img, why)
	}
	if res.Report != nil {
		if err := res.Report.WriteSummary(c.App.Writer, c.Int("summary-rows")); err != nil {
			return fmt.Errorf("print summary: %w", err)
		}
		fmt.Fprintf(c.App.Writer, "report: %s/%s  junit: %s/%s  preds: %s/%s\n", out, swe.ReportFile, out, swe.JUnitFile, out, swe.PredsFile)
	}
	s := res.Summary
	fmt.Fprintf(w, "%s: %d run (%s), %d already done, in %s\n", out, s.Written, sweCounts(s.Tally), s.Skipped, s.Duration.Round(time.Millisecond))
	printRunSummary(w, out, s, retries)
	switch {
	case res.Summary.BudgetReached:
		return budgetStop(res.Summary, out, "tasks")
	case res.Summary.Interrupted:
		return &exitStatus{code: exitInterrupted, msg: fmt.Sprintf("interrupted: finished tasks are committed; run again with --resume to finish %s", out)}
	case runErr != nil:
		return runErr
	case res.Report == nil || res.Report.Gate == nil:
		return &exitStatus{code: exitFatal, msg: "no report: the gate cannot be judged"}
	}
	g := res.Report.Gate
	switch g.Verdict {
	case swe.GatePass:
		return nil
	case swe.GateFail:
		return &exitStatus{code: exitGate, msg: "gate failed: " + strings.Join(g.Reasons, "; ")}
	default:
		return &exitStatus{code: exitFatal, msg: "gate cannot be judged: " + strings.Join(g.Reasons, "; ")}
	}
}

// sweCounts is this run's tasks by report category (resolved, unresolved,
// empty_patch, error), the four always named.
func sweCounts(t pipeline.Tally) string {
	n := map[string]int{}
	for o, k := range t.Outcomes {
		n[swe.Category(o)] += k
	}
	var parts []string
	for _, cat := range []string{string(swe.OutcomeResolved), string(swe.OutcomeUnresolved), string(swe.OutcomeEmptyPatch), swe.CatError} {
		parts = append(parts, fmt.Sprintf("%d %s", n[cat], cat))
	}
	return strings.Join(parts, ", ")
}
