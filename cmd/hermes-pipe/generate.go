package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/stages/generate"
	"github.com/hermes-pipe/hermes-pipe/stages/generate/prompts"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout"
	"github.com/urfave/cli/v2"
)

// llmFlags are shared by every command that calls a model.
func llmFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "base-url", Usage: "OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1", Required: true},
		&cli.StringFlag{Name: "model", Usage: "model name sent with every request", Required: true},
		&cli.StringFlag{Name: "api-key-env", Value: "OPENAI_API_KEY", Usage: "environment variable holding the API key (may be unset for local servers)"},
		&cli.DurationFlag{Name: "request-timeout", Value: 10 * time.Minute, Usage: "timeout of one HTTP attempt; a hung request is retried"},
		&cli.IntFlag{Name: "max-retries", Value: 6, Usage: "retries of a call after 429, 5xx, timeouts and connection errors (jittered exponential backoff, Retry-After honoured); 0 = none"},
		&cli.BoolFlag{Name: "stream", Usage: "use server-sent-event streaming for completions"},
		&cli.IntFlag{Name: "max-concurrent-requests", Usage: "upper bound of the shared rate controller (AIMD: halves on 429, grows back on success); 0 = --workers"},
		&cli.StringFlag{Name: "prices", Usage: "price table: LiteLLM's model_prices_and_context_window.json or {\"MODEL\": {\"input\": USD/1M, \"output\": USD/1M, \"cached_input\": ..., \"batch_discount\": 0.5}}; records get cost_usd"},
		&cli.Float64Flag{Name: "price-in", Value: -1, Usage: "USD per million prompt tokens of --model (overrides --prices)"},
		&cli.Float64Flag{Name: "price-out", Value: -1, Usage: "USD per million completion tokens of --model (overrides --prices)"},
	}
}

// runFlags are shared by every command that writes an output folder.
func runFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.IntFlag{Name: "workers", Value: 8, Usage: "records processed at once"},
		&cli.BoolFlag{Name: "resume", Usage: "continue the run in --out: skip finished rows, retry api_error/timeout/sandbox_error rows"},
		&cli.BoolFlag{Name: "overwrite", Usage: "delete the previous run in --out and start afresh"},
		&cli.BoolFlag{Name: "verify-shards", Usage: "with --resume, check the SHA-256 of every shard holding live records, not only its size; records of a damaged shard are redone"},
		&cli.StringFlag{Name: "format", Value: "jsonl", Usage: "shard format: jsonl or parquet"},
		&cli.IntFlag{Name: "shard-rows", Value: 1000, Usage: "records per output shard at most (the small shards of data/ are merged up to it at the end of a run)"},
		&cli.DurationFlag{Name: "commit-interval", Value: 2 * time.Second, Usage: "commit a shard at least this often (bounds the work lost to a crash)"},
		&cli.StringFlag{Name: "progress", Value: "auto", Usage: "progress display: auto (a bar on a terminal, log lines otherwise), bar, plain or none"},
		&cli.DurationFlag{Name: "grace", Value: 2 * time.Minute, Usage: "after the first Ctrl-C/SIGTERM, or once --max-cost is reached, how long rollouts in flight may finish before they are cancelled"},
		&cli.Float64Flag{Name: "max-cost", Usage: "spending cap in USD of every run in --out together (each --resume counts what the folder's spend journal says was spent, calls a kill left in flight at their projected cost): a model call goes out only when its projected cost fits under the cap; at the first that cannot, no row starts, rows in flight stop before their next model call (budget_paused, retried by --resume), and the command exits 5; overshoot at most one call per worker, kill -9 included; 0 = none; needs a price (--prices or --price-in/--price-out)"},
	}, shardFlags()...)
}

// sandboxFlags choose and configure the sandbox driver.
func sandboxFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "sandbox", Value: "local", Usage: "where tool calls run: local, docker or ssh"},
		&cli.DurationFlag{Name: "command-timeout", Value: 60 * time.Second, Usage: "default timeout of one sandbox command (exit code 124 when it passes)"},
		&cli.IntFlag{Name: "max-output", Value: 64 << 10, Usage: "bytes of each command's stdout/stderr kept (head and tail, cut marker between)"},
		&cli.StringFlag{Name: "shell-mode", Value: sandbox.ShellPersistent, Usage: "persistent: one long-lived shell per session (cd, export, functions and aliases persist; background jobs run until a timeout or the end of the rollout); fresh: a new shell per command restoring the working folder and exported variables (slower; background jobs end with their command)"},
		&cli.StringFlag{Name: "local-isolation", Value: "bwrap", Usage: "confinement of local commands: bwrap (namespaces: read-only system, private /tmp and PID space, no network, no home) or none (run as the invoking user with everything in reach; prints a warning)"},
		&cli.StringSliceFlag{Name: "local-mount", Usage: "SRC:DST[:ro] host folder or file shown to confined local commands at DST (read-write unless :ro; repeatable)"},
		&cli.StringFlag{Name: "local-network", Value: "none", Usage: "network of confined local commands: none (a loopback of their own) or host"},
		&cli.IntFlag{Name: "local-max-procs", Value: defaultLocalLimits.Processes, Usage: "processes per confined local session (a cgroup where the machine allows it, else RLIMIT_NPROC, which root is exempt from); 0 = unlimited"},
		&cli.Int64Flag{Name: "local-max-file-size", Value: defaultLocalLimits.FileSizeBytes, Usage: "largest file a confined local command may write, in bytes; 0 = unlimited"},
		memoryFlag(), diskFlag(), cpuWeightFlag(),
		&cli.IntFlag{Name: "local-cpu-time", Usage: "CPU seconds per process of a confined local session; 0 = unlimited"},
		&cli.StringFlag{Name: "docker-image", Usage: "image for rows that name none (docker)"},
		&cli.StringFlag{Name: "docker-network", Value: "none", Usage: "container network (docker)"},
		&cli.Int64Flag{Name: "docker-memory", Value: 512 << 20, Usage: "container memory limit in bytes; -1 = unlimited (docker)"},
		&cli.Float64Flag{Name: "docker-cpus", Value: 1, Usage: "container CPU limit; -1 = unlimited (docker)"},
		&cli.Int64Flag{Name: "docker-pids", Value: 256, Usage: "container pids limit; -1 = unlimited (docker)"},
		&cli.StringSliceFlag{Name: "docker-cap-add", Usage: "capability added back after all are dropped (docker; repeatable)"},
		&cli.BoolFlag{Name: "docker-allow-new-privileges", Usage: "do not set no-new-privileges (docker)"},
		&cli.StringFlag{Name: "ssh-host", Usage: "host[:port] of the ssh sandbox"},
		&cli.StringFlag{Name: "ssh-user", Usage: "remote user (ssh)"},
		&cli.StringFlag{Name: "ssh-key", Usage: "private key file (ssh); without it the ssh agent is used"},
		&cli.StringFlag{Name: "ssh-known-hosts", Usage: "known_hosts file (ssh; default ~/.ssh/known_hosts)"},
		&cli.BoolFlag{Name: "ssh-accept-new-host", Usage: "add an unknown host key to known_hosts instead of refusing (a changed key is always refused)"},
		&cli.StringFlag{Name: "ssh-isolation", Value: "bwrap", Usage: "confinement of ssh commands: bwrap (bubblewrap on the remote host: read-only system, private /tmp and PID space, no network, no home; a host without it is refused) or none (run as the remote login with everything in reach; prints a warning)"},
		&cli.StringFlag{Name: "ssh-network", Value: "none", Usage: "network of confined ssh commands: none (a loopback of their own) or host"},
		&cli.IntFlag{Name: "ssh-max-procs", Value: defaultLocalLimits.Processes, Usage: "processes per confined ssh session (RLIMIT_NPROC); 0 = unlimited"},
		&cli.Int64Flag{Name: "ssh-max-file-size", Value: defaultLocalLimits.FileSizeBytes, Usage: "largest file a confined ssh command may write, in bytes; 0 = unlimited"},
		cwdRootFlag(),
	}
}

func generateCommand() *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "prompts", Usage: "JSONL prompts file: one {\"prompt\": ..., \"id\"?, \"image\"?, \"cwd\"?, \"toolsets\"?, \"metadata\"?, \"verify\"?, \"answer\"?} per line", Required: true},
		&cli.StringFlag{Name: "out", Usage: "output folder (data/ and failed/ shards, ledger.jsonl, rejects.jsonl, statistics.json)", Required: true},
		&cli.IntFlag{Name: "max-turns", Value: rollout.DefaultMaxTurns, Usage: "assistant turns per rollout"},
		&cli.IntFlag{Name: "samples", Value: 1, Usage: "rollouts per prompt (each is its own record)"},
		&cli.StringFlag{Name: "system-prompt", Usage: "file whose text is sent as the system message (not recorded in trajectories, as Hermes)"},
		&cli.DurationFlag{Name: "timeout", Value: 30 * time.Minute, Usage: "wall-clock deadline of one rollout (outcome timeout, retried by --resume); 0 = none"},
		&cli.IntFlag{Name: "max-tokens", Usage: "max_tokens per completion; 0 = not sent"},
		&cli.IntFlag{Name: "max-line-bytes", Value: 4 << 20, Usage: "longest prompts line accepted"},
		&cli.IntFlag{Name: "batch-size", Value: 1, Usage: "prompts per batch as Hermes' batch_runner --batch_size counts them: each record's metadata.batch_num is its prompt_index divided by it (the run itself is not batched)"},
	}
	flags = append(flags, graderFlags()...)
	flags = append(flags, toolFlags("the distribution default")...)
	flags = append(flags, samplingFlags(true)...)
	flags = append(flags, logprobsFlags()...)
	flags = append(flags, llmFlags()...)
	flags = append(flags, rolloutCapFlags()...)
	flags = append(flags, runFlags()...)
	flags = append(flags, allowChangeFlag(),
		&cli.BoolFlag{Name: "redo-changed", Usage: "with --resume, run again rows whose text changed since their record was written (by default they are reported and kept)"},
		&cli.BoolFlag{Name: "prune", Usage: "with --resume, take records whose row is no longer in the prompts file out of the output (by default they are reported and kept)"})
	flags = append(flags, keepWorkspaceFlags()...)
	flags = append(flags, inCategory("Sandbox", sandboxFlags()...)...)
	return &cli.Command{
		Name:      "generate",
		Usage:     "run an agent rollout per prompt and write ShareGPT trajectories",
		UsageText: "hermes-pipe generate --prompts FILE --out DIR --base-url URL --model NAME [options]",
		Description: `Reads JSONL prompts, checks every container image the rows need before any
token is spent (--sandbox docker), then runs an agent loop per (row, sample) in
a bounded worker pool: the model calls the terminal and file tools, which run in
the sandbox. Each rollout becomes one record with Hermes' ShareGPT
"conversations", an outcome (completed, max_turns, partial, api_error, timeout,
sandbox_error) and per-tool call/success/failure counts.

Output is crash-safe: shards are committed atomically and every outcome is
journalled, so --resume after a crash or Ctrl-C finishes the run with no
duplicate and no lost row. Bad input lines go to rejects.jsonl with their line
number, field and raw text; the run goes on.

First Ctrl-C: stop starting rows, let rollouts in flight finish (--grace).
Second Ctrl-C: cancel them. Finished rows are always committed; exit 130.

--max-cost USD caps the spend of every run in --out together: once the
committed plus in-flight spend reaches it, no row starts, each rollout in
flight stops before its next model call (outcome budget_paused; after --grace
a rollout still running is cancelled with the same outcome), finished rows are
committed and the command exits 5. The overshoot is at most the model calls in
flight when the cap is reached: one per worker. --resume with a higher
--max-cost goes on; with the same cap it makes no model call and exits 5.
--max-cost-per-rollout / --max-tokens-per-rollout end one rollout with the
final outcome budget_exceeded (trajectory kept, not run again by --resume).

A row's "verify" (a shell command) or "answer" (the expected final answer)
makes each of its rollouts graded before its sandbox session closes: the
record gets "reward" (a number; null when ungraded or the grader failed) and
"grade". See --grader.`,
		Flags:  groupFlags(flags, generateGroups),
		Action: runGenerate,
	}
}

// maxRetriesOf is --max-retries in llm.Options' form, where 0 is the
// default and a negative number none: --max-retries 0 means no retry.
func maxRetriesOf(c *cli.Context) (int, error) {
	n := c.Int("max-retries")
	switch {
	case n < 0:
		return 0, usagef("--max-retries must be 0 or more, got %d", n)
	case n == 0:
		return -1, nil
	}
	return n, nil
}

// buildLLM builds the shared client and rate controller from the llm flags;
// the client counts its retries by cause into retries.
func buildLLM(c *cli.Context, workers int, retries *llm.RetryCounts) (llm.Client, *llm.Controller, error) {
	base := c.String("base-url")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, nil, usagef("--base-url: %q is not an http(s) URL", llm.RedactURL(base))
	}
	sampling, err := samplingOf(c)
	if err != nil {
		return nil, nil, err
	}
	maxRetries, err := maxRetriesOf(c)
	if err != nil {
		return nil, nil, err
	}
	ctrl := llm.NewController(llm.ControllerOptions{Max: maxConcurrent(c, workers)})
	client, err := llm.New(llm.Options{
		BaseURL:        base,
		APIKey:         os.Getenv(c.String("api-key-env")),
		Model:          c.String("model"),
		RequestTimeout: c.Duration("request-timeout"),
		MaxRetries:     maxRetries,
		Stream:         c.Bool("stream"),
		Controller:     ctrl,
		Sampling:       sampling,
		Retries:        retries,
	})
	if err != nil {
		return nil, nil, usagef("%v", err)
	}
	return client, ctrl, nil
}

// maxConcurrent is --max-concurrent-requests, workers when unset.
func maxConcurrent(c *cli.Context, workers int) int {
	if n := c.Int("max-concurrent-requests"); n > 0 {
		return n
	}
	return workers
}

// sandboxConfig reads the sandbox flags.
func sandboxConfig(c *cli.Context, runID string) sandbox.Config {
	cfg := sandbox.Config{
		RunID:          runID,
		DefaultTimeout: c.Duration("command-timeout"),
		MaxOutput:      c.Int("max-output"),
		ShellMode:      c.String("shell-mode"),
		Local: sandbox.LocalConfig{
			Isolation: c.String("local-isolation"),
			Mounts:    c.StringSlice("local-mount"),
			Network:   c.String("local-network"),
			Limits: sandbox.LocalLimits{
				Processes:     c.Int("local-max-procs"),
				FileSizeBytes: c.Int64("local-max-file-size"),
				CPUSeconds:    c.Int("local-cpu-time"),
			},
		},
		Docker: sandbox.DockerConfig{
			DefaultImage:       c.String("docker-image"),
			Network:            c.String("docker-network"),
			MemoryBytes:        c.Int64("docker-memory"),
			CPUs:               c.Float64("docker-cpus"),
			PidsLimit:          c.Int64("docker-pids"),
			CapAdd:             c.StringSlice("docker-cap-add"),
			AllowNewPrivileges: c.Bool("docker-allow-new-privileges"),
		},
		SSH: sandbox.SSHConfig{
			Host:           c.String("ssh-host"),
			User:           c.String("ssh-user"),
			KeyFile:        c.String("ssh-key"),
			KnownHosts:     c.String("ssh-known-hosts"),
			AcceptNewHosts: c.Bool("ssh-accept-new-host"),
			Isolation:      c.String("ssh-isolation"),
			Network:        c.String("ssh-network"),
			Limits: sandbox.LocalLimits{
				Processes:     c.Int("ssh-max-procs"),
				FileSizeBytes: c.Int64("ssh-max-file-size"),
			},
		},
	}
	localCeilings(c, c.Int("workers"), &cfg.Local.Limits)
	return cfg
}

// outputMode reads --resume/--overwrite.
func outputMode(c *cli.Context) (pipeline.Mode, error) {
	switch {
	case c.Bool("resume") && c.Bool("overwrite"):
		return 0, usagef("--resume and --overwrite exclude each other")
	case c.Bool("resume"):
		return pipeline.ModeResume, nil
	case c.Bool("overwrite"):
		return pipeline.ModeOverwrite, nil
	}
	return pipeline.ModeFresh, nil
}

// progressFor builds the progress reporter from --progress.
func progressFor(c *cli.Context, label string) (*pipeline.Progress, error) {
	var mode pipeline.ProgressMode
	switch c.String("progress") {
	case "auto", "":
		mode = pipeline.ProgressAuto
	case "bar":
		mode = pipeline.ProgressBar
	case "plain":
		mode = pipeline.ProgressPlain
	case "none":
		return nil, nil
	default:
		return nil, usagef("--progress: %q is not one of auto, bar, plain, none", c.String("progress"))
	}
	return pipeline.NewProgress(pipeline.ProgressOptions{Writer: c.App.ErrWriter, Mode: mode, Label: label}), nil
}

// checkFormat reads --format: the shard format of the output folder.
func checkFormat(c *cli.Context) (string, error) {
	switch f := c.String("format"); f {
	case "jsonl", "", "parquet":
		if f == "" {
			f = "jsonl"
		}
		return f, nil
	default:
		return "", usagef("--format: %q is not jsonl or parquet", f)
	}
}

func runGenerate(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("generate takes no arguments, got %q", c.Args().First())
	}
	if _, err := checkRunFlags(c); err != nil {
		return err
	}
	format, err := checkFormat(c)
	if err != nil {
		return err
	}
	if c.Int("samples") < 1 {
		return usagef("--samples must be at least 1, got %d", c.Int("samples"))
	}
	if c.Int("max-turns") < 1 {
		return usagef("--max-turns must be at least 1, got %d", c.Int("max-turns"))
	}
	if c.Duration("timeout") < 0 {
		return usagef("--timeout must not be negative")
	}
	grader, err := graderOf(c)
	if err != nil {
		return err
	}
	tools, err := bindTools(c, nil)
	if err != nil {
		return err
	}
	systemPrompt, err := readSystemPrompt(c, "")
	if err != nil {
		return err
	}
	promptsFile, err := localInput(c, "prompts", c.String("prompts"))
	if err != nil {
		return err
	}
	if err := checkInputFile("prompts", promptsFile); err != nil {
		return err
	}
	cwds, err := cwdRule(c)
	if err != nil {
		return err
	}
	if err := someValidRow(c, promptsFile, cwds); err != nil {
		return err
	}
	// The MCP pre-flight: a server that cannot start costs no token and
	// leaves no output folder.
	if err := tools.start(c); err != nil {
		return err
	}
	defer tools.close()
	r, err := startRun(c, "generate", format, sandboxAtRun)
	if err != nil {
		return err
	}
	defer r.close()
	if err := protectRunDir(cwds, r.out.Dir); err != nil {
		return err
	}
	ro := r.rolloutOptions(c, systemPrompt)
	ro.Grader = grader
	tools.apply(&ro)
	keeper, err := keepWorkspace(c, r.out.Dir, &ro)
	if err != nil {
		return err
	}
	opts := generate.Options{
		RunConfig:    r.cfg,
		Prompts:      promptsFile,
		Samples:      c.Int("samples"),
		Rollout:      ro,
		CheckImages:  imageChecker(r.driver),
		DefaultImage: c.String("docker-image"),
		MaxLineBytes: c.Int("max-line-bytes"),
		RedoChanged:  c.Bool("redo-changed"),
		Prune:        c.Bool("prune"),
	}
	if cwds != nil {
		// local and ssh bind a folder of a host: a row's cwd must be under a
		// --cwd-root and clear of the output folder (local: an existing
		// folder, through its links; ssh: the path's form only). Docker's
		// cwd is a path inside the container, created when missing.
		opts.CheckCwd = cwds.Check
	}
	res, err := generate.Run(r.ctx, opts)
	if err == nil {
		err = sweepWorkspaces(c, keeper, r.out.Dir)
	}
	if err = r.finish(c, err); err != nil {
		return err
	}
	return reportRun(c, res.Summary, res.NothingToDo, res.PreviouslyDone, res.MissingImages, r.retries)
}

// someValidRow refuses, before the output folder is made, a prompts file
// whose every row is bad: exit 2 with the first reasons (file:line: field:
// reason). A row is bad here as in the run: unreadable, over-long, a cwd
// the rule refuses, or, with --sandbox docker and no --docker-image, no
// image (needImage). A file with one good row runs, its bad rows going to
// rejects.jsonl; --resume is left to the run (its folder exists already).
func someValidRow(c *cli.Context, path string, cwds *sandbox.CwdRule) error {
	if c.Bool("resume") {
		return nil
	}
	opts := prompts.Options{MaxLineBytes: c.Int("max-line-bytes"), NeedImage: needImage(c)}
	if cwds != nil {
		opts.CheckCwd = cwds.Check
	}
	const shown = 5
	ok, bad, rejects, err := prompts.FirstValid(c.Context, path, opts, shown)
	if err != nil {
		return usagef("--prompts: %v", err)
	}
	if ok || bad == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "--prompts %s: none of its %d rows is valid; nothing was run and no output folder made:", path, bad)
	for _, rj := range rejects {
		why := rj.Reason
		if rj.Field != "" && !strings.HasPrefix(why, rj.Field+":") {
			why = rj.Field + ": " + why
		}
		fmt.Fprintf(&b, "\n  %s:%d: %s", rj.File, rj.Line, why)
	}
	if bad > len(rejects) {
		fmt.Fprintf(&b, "\n  ... and %d more", bad-len(rejects))
	}
	return usagef("%s", b.String())
}

// needImage reports whether a prompts row must name an image: the docker
// sandbox runs every row in one, and no --docker-image stands in. Such rows
// are rejected (prompts.Options.NeedImage) by generate and listed by
// preflight.
func needImage(c *cli.Context) bool {
	return c.String("sandbox") == "docker" && c.String("docker-image") == ""
}

// checkInputFile fails with a usage error unless path is a regular file this
// process can open for reading. Commands call it before they create or lock
// an output folder, so a wrong input leaves no half-initialised output behind
// that would refuse the corrected rerun.
func checkInputFile(flag, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return usagef("--%s: %v", flag, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return usagef("--%s: %v", flag, err)
	}
	if fi.IsDir() {
		return usagef("--%s %s: is a folder; give the JSONL file", flag, path)
	}
	return nil
}

// reportRun prints the end-of-run line and turns the summary into an exit status.
func reportRun(c *cli.Context, s pipeline.Summary, nothing bool, previously int, missing map[string]error, retries *llm.RetryCounts) error {
	w := c.App.ErrWriter
	for img, why := range missing {
		if img != "" {
			fmt.Fprintf(w, "pre-flight: image %s unavailable: %v (its rows end sandbox_error without a model call; --resume retries them)\n", img, why)
		}
	}
	out := c.String("out")
	if nothing {
		fmt.Fprintf(w, "nothing to do: all %d records in %s are already done\n", previously, out)
	} else {
		fmt.Fprintf(w, "%s: %d written (%d ok, %d failed), %d rejected, %d already done, in %s\n",
			out, s.Written, s.OK, s.Failed, s.Rejected, s.Skipped, s.Duration.Round(time.Millisecond))
		printRunSummary(w, out, s, retries)
	}
	return exitFor(s, out, "")
}

// exitFor maps a run's summary to its exit status (0, 3, 5 or 130) with the
// message that tells the user what to do next; note is added to the
// failed-rows message. Every mode that writes an output folder ends here.
func exitFor(s pipeline.Summary, out, note string) error {
	switch code := pipeline.ExitCode(s); code {
	case exitOK:
		return nil
	case exitBudget:
		return budgetStop(s, out, "rows")
	case exitInterrupted:
		return &exitStatus{code: code, msg: fmt.Sprintf("interrupted: finished rows are committed; run again with --resume to finish %s", out)}
	default:
		return &exitStatus{code: code, msg: fmt.Sprintf("finished with rejected or failed rows%s: see %s/%s and `hermes-pipe stats %s`", note, out, pipeline.RejectsFile, out)}
	}
}

// budgetStop is the exit status of a run stopped by --max-cost: what the
// folder's runs spent and how to go on. what names the units ("rows", "tasks").
func budgetStop(s pipeline.Summary, out, what string) error {
	return &exitStatus{code: exitBudget, msg: fmt.Sprintf("run budget reached: $%.4f spent of --max-cost $%.4f by the runs in %s; finished %s are committed, and %s stopped by the budget are budget_paused; to continue, run the same command with --resume --max-cost HIGHER",
		s.Spent, s.MaxCost, out, what, what)}
}

// flagRecord is the flags set on the command line, for run.json; the
// userinfo of a URL among them (--base-url http://user:pass@host) is
// recorded as *** (llm.RedactURL).
func flagRecord(c *cli.Context) map[string]any {
	m := map[string]any{}
	for _, name := range c.FlagNames() {
		if !c.IsSet(name) {
			continue
		}
		switch v := c.Value(name).(type) {
		case string:
			if name == "extra-body" {
				m[name] = extraBodyRecord(v)
				continue
			}
			m[name] = llm.RedactURL(v)
		case cli.StringSlice:
			m[name] = redactURLs(v.Value())
		case []string:
			m[name] = redactURLs(v)
		default:
			m[name] = v
		}
	}
	return m
}

func redactURLs(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = llm.RedactURL(v)
	}
	return out
}

func withRunID(m map[string]any, id string) map[string]any {
	m["run_id"] = id
	return m
}

func newRunID() string {
	return fmt.Sprintf("%x-%d", time.Now().UnixNano(), os.Getpid())
}

// imageChecker returns the pre-flight check of drivers that run images.
func imageChecker(d sandbox.Driver) func(context.Context, []string) map[string]error {
	if ic, ok := d.(sandbox.ImageChecker); ok {
		return ic.CheckImages
	}
	return nil
}

// preflightDriver lets a driver that can check itself (ssh: host key, login,
// remote folder) fail before any token is spent.
func preflightDriver(ctx context.Context, d sandbox.Driver) error {
	p, ok := d.(sandbox.Preflighter)
	if !ok {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := p.Preflight(pctx); err != nil {
		return fmt.Errorf("sandbox pre-flight: %w", err)
	}
	return nil
}

// readSystemPrompt returns the text of --system-prompt, or def without it.
func readSystemPrompt(c *cli.Context, def string) (string, error) {
	f := c.String("system-prompt")
	if f == "" {
		return def, nil
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return "", usagef("--system-prompt: %v", err)
	}
	return string(b), nil
}

// reachable checks --base-url answers before any row is read.
func reachable(ctx context.Context, base string) error {
	err := llm.CheckReachable(ctx, base)
	if errors.Is(err, llm.ErrBadURL) {
		return usagef("--base-url: %v", err)
	}
	if err != nil {
		return fmt.Errorf("cannot reach --base-url %s: %w", llm.RedactURL(base), err)
	}
	return nil
}

// chatReady probes the chat-completions route of --base-url with --model and
// the API key (llm.CheckChat, no token spent) before any row is read: a 401,
// 403 or 404 there is an error naming the URL and the status.
func chatReady(ctx context.Context, c *cli.Context, base string) error {
	err := llm.CheckChat(ctx, base, os.Getenv(c.String("api-key-env")), c.String("model"))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, llm.ErrBadURL):
		return usagef("--base-url: %v", err)
	case errors.Is(err, llm.ErrEndpoint):
		return fmt.Errorf("--base-url %s: %w (check --base-url, --model and the key in $%s)", llm.RedactURL(base), err, c.String("api-key-env"))
	}
	return fmt.Errorf("cannot reach --base-url %s: %w", llm.RedactURL(base), err)
}
