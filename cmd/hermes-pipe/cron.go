package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/stages/cron"
)

// cronDeps are what the cron command needs from outside: the agent runner
// (backed by the rollout stage in production, a fake in tests) and seams.
type cronDeps struct {
	Agent  cron.AgentRunner       // runs agent jobs; nil makes them fail with a clear error
	Now    func() time.Time       // clock; nil means time.Now
	Getenv func(string) string    // environment lookup for the home folder; nil means os.Getenv
	Notify func(chan<- os.Signal) // signal subscription for the daemon; nil means SIGINT+SIGTERM
}

const cronDSTHelp = `Time zones and DST: every job has an IANA zone (--tz, default the local zone);
instants are stored in UTC and printed in the job's zone. Cron expressions and
timestamps without an offset are wall-clock times in that zone:
  - a time inside a spring-forward gap (02:30 on the night clocks jump from
    02:00 to 03:00) fires once, at the first valid instant after the gap (03:00);
  - a time repeated by a fall-back (01:30 on the night clocks go from 02:00
    back to 01:00) fires once, at its first occurrence;
  - 30-minute shifts (Australia/Lord_Howe) follow the same two rules;
  - intervals ("every 2h") and "in 30m" count elapsed time and ignore DST.`

const cronGrammarHelp = `Schedules:
  in 45s, in 30m, in 2h, in 1d  one-shot, that long from now
  2026-07-01T09:00[:00][±hh:mm] one-shot at a timestamp (no offset: the job's zone)
  every 30s, every 2h, every 1d repeating interval (10s to 36500d; under 1m needs the daemon)
  "0 9 * * 1-5"                 5-field cron: minute hour day-of-month month day-of-week
  @hourly @daily @weekly @monthly @yearly
A bare duration such as "30m" is refused: write "every 30m" or "in 30m".`

const cronMissedHelp = `Missed runs: the tick advances a job's next run before executing it, so an
occurrence runs at most once, even across crashes. An occurrence found late runs
if it is within its grace window (half the period clamped to 120 s – 2 h, or
--starting-deadline); only the latest late occurrence runs, older ones are
recorded as missed in the history. A one-shot found late still runs once
unless it is past its --starting-deadline. Every occurrence recorded missed or
skipped (overlap forbid) is delivered as an alert through the job's --deliver
target. An execution whose process died is recorded as unknown and never
retried.

Bad jobs: a job in jobs.json that cannot be scheduled (a schedule such as
"61 * * * *", a non-string id, an id two jobs share, a field of the wrong type) is left untouched,
named by tick and list (exit 1) and alerted once; the other jobs run. A job
with no next_run_at (null) gets one as import gives it. A job whose scheduling
fails is paused with the reason and alerted; fix it, then cron resume.`

func cronCommand(deps cronDeps) *cli.Command {
	return &cli.Command{
		Name:  "cron",
		Usage: "schedule agent and script jobs that fire once per occurrence",
		Description: "Jobs live in <home>/cron/jobs.json (Hermes' format; `cron import` reads a Hermes file),\n" +
			"executions in <home>/cron/executions.db. Run `cron daemon`, or `cron tick` from\n" +
			"the system crontab every minute; any number of them may run together.\n\n" +
			"Operator settings of every job live in <home>/cron/config.yaml; its one key,\n" +
			"disabled_toolsets: [file, mcp-fs], takes those toolsets away from every agent job whatever\n" +
			"the job asks (read at each execution; cron show names them).\n\n" +
			cronGrammarHelp + "\n\n" + cronDSTHelp + "\n\n" + cronMissedHelp,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "home", Usage: "hermes-pipe home `DIR` (default ~/.hermes-pipe)", EnvVars: []string{"HERMES_PIPE_HOME"}},
			&cli.StringFlag{Name: "script-isolation", Value: cron.IsolationBwrap, Usage: "confinement of script jobs: bwrap (namespaces: read-only system, private /tmp, home and PID space, no network unless the job's policy script_network is host, only the script's folder or workdir writable) or none (every script runs as this user with everything in reach; prints a warning; one job opts out with its policy script_isolation: none)"},
		},
		Subcommands: []*cli.Command{
			cronAddCommand(deps),
			cronListCommand(deps),
			cronShowCommand(deps),
			cronEditCommand(deps),
			cronRmCommand(deps),
			cronPauseCommand(deps),
			cronResumeCommand(deps),
			cronRunCommand(deps),
			cronTriggerCommand(deps),
			cronTickCommand(deps),
			cronDaemonCommand(deps),
			cronHistoryCommand(deps),
			cronNextCommand(deps),
			cronImportCommand(deps),
		},
	}
}

// cronJobFlags are the job fields add and edit set.
func cronJobFlags() []cli.Flag {
	// The sampling flags (--temperature, --top-p, --max-tokens,
	// --sampling-seed, --extra-body) are stored on the job and sent with
	// every chat request of its agent executions.
	return append([]cli.Flag{
		&cli.StringFlag{Name: "name", Usage: "job name (default: the start of the prompt)"},
		&cli.StringFlag{Name: "tz", Usage: "IANA time zone of the schedule (default: the local zone)"},
		&cli.StringFlag{Name: "script", Usage: "script: `NAME` of one in <home>/cron/scripts, or the path of a file to copy there (created 0700 if missing); with --no-agent it is the job, otherwise its output is added to the prompt"},
		&cli.BoolFlag{Name: "no-agent", Usage: "run only the script: its stdout is delivered"},
		&cli.StringFlag{Name: "model", Usage: "model for agent jobs"},
		&cli.StringFlag{Name: "provider", Usage: "provider label for agent jobs"},
		&cli.StringFlag{Name: "base-url", Usage: "OpenAI-compatible endpoint for agent jobs"},
		&cli.StringSliceFlag{Name: "skill", Usage: "skill to load (repeatable)"},
		&cli.StringSliceFlag{Name: "context-from", Usage: "job `ID` whose latest output is added to the prompt (repeatable)"},
		&cli.StringSliceFlag{Name: "toolsets", Usage: "toolsets for agent jobs: terminal, file, todo, skills, execute_code, and mcp-<server> of --mcp-config (default terminal; scheduling, messaging and asking the user are never allowed; the disabled_toolsets of <home>/cron/config.yaml are taken away)"},
		&cli.StringFlag{Name: "mcp-config", Usage: "MCP servers the job's agent may use as toolsets mcp-<server> (generate's --mcp-config `FILE`, stored as an absolute path; \"\" removes it); each execution starts them first and fails, naming the server and its stderr, when one cannot start"},
		&cli.StringFlag{Name: "skills-dir", Usage: "skills `DIR` the skills toolset reads (default: <home>/skills)"},
		&cli.StringFlag{Name: "deliver", Usage: "where output goes: local, webhook:URL, or both comma-separated", Value: "local"},
		&cli.StringFlag{Name: "workdir", Usage: "absolute working folder for the script or agent"},
		&cli.IntFlag{Name: "repeat", Usage: "stop after N runs (0: forever; one-shots run once)"},
		&cli.StringFlag{Name: "overlap", Usage: "when the previous run is still going: forbid (skip and record) or allow", Value: cron.OverlapForbid},
		&cli.DurationFlag{Name: "starting-deadline", Usage: "how late a run may start (default: half the period, clamped to 120s-2h)"},
		&cli.DurationFlag{Name: "timeout", Usage: "inactivity timeout: the run ends after this long without a model reply or tool result (0: none; default HERMES_CRON_TIMEOUT seconds, else 10m)"},
		&cli.DurationFlag{Name: "max-runtime", Usage: "wall-clock cap of one run (default: none, as in Hermes)"},
		&cli.StringSliceFlag{Name: "env-allow", Usage: "extra environment variable passed to scripts (repeatable)"},
		&cli.IntFlag{Name: "max-turns", Usage: "agent turns per run (0: the default, 20)"},
		&cli.DurationFlag{Name: "command-timeout", Usage: "timeout of each tool command of the agent (0: the rollout default)"},
		&cli.StringFlag{Name: "sandbox", Usage: "where the agent's commands run: local (default), docker:IMAGE or ssh:[USER@]HOST[:PORT]"},
		&cli.StringFlag{Name: "api-key-env", Usage: "environment `VAR` holding the job's API key (default: PROVIDER_API_KEY when --provider is set, else OPENAI_API_KEY)"},
		&cli.IntFlag{Name: "max-tokens", Usage: "max_tokens sent with every chat request of the job's agent (0: not sent)"},
	}, samplingFlags(true)...)
}

// jobSampling reads the sampling flags of cron add, checked as generate
// checks them.
func jobSampling(c *cli.Context) (cron.Sampling, error) {
	ls, err := samplingOf(c)
	if err != nil {
		return cron.Sampling{}, err
	}
	s := cron.Sampling{Temperature: ls.Temperature, TopP: ls.TopP, MaxTokens: ls.MaxTokens, Seed: ls.Seed}
	if c.IsSet("extra-body") {
		if s.ExtraBody, err = cron.ExtraBody(c.String("extra-body")); err != nil {
			return s, usagef("--extra-body: %v", err)
		}
	}
	return s, nil
}

// cronSamplingHelp is what add and edit say of the sampling flags.
const cronSamplingHelp = `Sampling (agent jobs): --temperature, --top-p, --max-tokens, --sampling-seed
(the request's "seed") and --extra-body JSON are spelled and checked as generate's,
stored in the job (policy.sampling in jobs.json, shown by cron show) and sent with
every chat request of its executions; an unset one is not sent (the server's default):

   hermes-pipe cron add "0 6 * * *" --temperature 0.7 --top-p 0.95 --max-tokens 2048 \
     --extra-body '{"top_k": 20, "chat_template_kwargs": {"enable_thinking": false}}' "Summarise the logs"`

// jsonFlag makes a cron subcommand print JSON. Each command gets its own
// flag value: urfave/cli flags carry state once applied.
func jsonFlag() cli.Flag { return &cli.BoolFlag{Name: "json", Usage: "print JSON"} }

// cronAddCommand builds `cron add`.
func cronAddCommand(deps cronDeps) *cli.Command {
	return &cli.Command{
		Name: "add", Usage: "add a job", ArgsUsage: "SCHEDULE [PROMPT...]",
		Description: "Prints the normalised schedule and the next three fire times.\n\n" + cronSamplingHelp + "\n\n" + cronGrammarHelp + "\n\n" + cronDSTHelp,
		Flags:       append(cronJobFlags(), &cli.BoolFlag{Name: "paused", Usage: "add the job paused"}, jsonFlag()),
		Action: func(c *cli.Context) error {
			if c.NArg() < 1 {
				return cronUsage("add needs a SCHEDULE (quote cron expressions) and usually a PROMPT")
			}
			spec := specFromFlags(c)
			sampling, err := jobSampling(c)
			if err != nil {
				return err
			}
			spec.Sampling = sampling
			spec.Schedule = c.Args().First()
			spec.Prompt = strings.Join(c.Args().Slice()[1:], " ")
			spec.Paused = c.Bool("paused")
			home := cronHome(c, deps)
			undo := func() {}
			if spec.Script != "" {
				name, u, err := cron.InstallScript(home, spec.Script)
				if err != nil {
					return fmt.Errorf("cron add: %w", err)
				}
				spec.Script, undo = name, u
			}
			j, err := cron.AddJob(c.Context, cron.NewStore(home), home, spec, cronNow(deps))
			if err != nil {
				undo()
				return fmt.Errorf("cron add: %w", err)
			}
			warnNoEndpoint(c, deps, j)
			return printJob(c, j, "added", cronHome(c, deps), cronNow(deps))
		},
	}
}

// warnNoEndpoint warns on stderr when an agent job has no endpoint of its
// own and the environment gives none either: its runs would fail. Only the
// missing settings are named.
func warnNoEndpoint(c *cli.Context, deps cronDeps, j *cron.Job) {
	if j.NoAgent {
		return
	}
	getenv := deps.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	var vars, flags []string
	if j.BaseURL == "" && getenv("HERMES_PIPE_BASE_URL") == "" {
		vars, flags = append(vars, "HERMES_PIPE_BASE_URL"), append(flags, "--base-url URL")
	}
	if j.Model == "" && getenv("HERMES_PIPE_MODEL") == "" {
		vars, flags = append(vars, "HERMES_PIPE_MODEL"), append(flags, "--model NAME")
	}
	if len(vars) == 0 {
		return
	}
	fmt.Fprintf(c.App.ErrWriter, "cron: warning: agent job %s has no endpoint, so its runs fail: set %s in the environment of cron tick, run and daemon, or give the job its own (cron edit %s %s)\n",
		j.ID, strings.Join(vars, " and "), j.ID, strings.Join(flags, " "))
}

// cronListCommand builds `cron list`.
func cronListCommand(deps cronDeps) *cli.Command {
	return &cli.Command{
		Name: "list", Usage: "list jobs (exit 1 when a stored job cannot be scheduled; it is named)", Flags: []cli.Flag{jsonFlag()},
		Action: func(c *cli.Context) (err error) {
			tx, err := cron.NewStore(cronHome(c, deps)).Load()
			if err != nil {
				return fmt.Errorf("cron list: %w", err)
			}
			jobs, err := tx.Jobs()
			if err != nil {
				return fmt.Errorf("cron list: %w", err)
			}
			invalid := tx.Invalid()
			bad := map[string]bool{}
			for _, e := range invalid {
				bad[e.ID] = true
			}
			w := c.App.Writer
			if c.Bool("json") {
				if jobs == nil {
					jobs = []*cron.Job{}
				}
				if err := writeJSON(w, jobs); err != nil {
					return err
				}
				return jobProblems("cron list", invalid)
			}
			defer func() {
				if err == nil {
					err = jobProblems("cron list", invalid)
				}
			}()
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tSCHEDULE\tNEXT\tSTATE\tLAST")
			for _, j := range jobs {
				next := "-"
				if at, ok := j.PlannedRun(cronNow(deps)); ok {
					next = at.In(j.Location()).Format(time.RFC3339)
				}
				last := "-"
				if j.LastStatus != "" {
					last = string(j.LastStatus)
				}
				state := j.ShownState()
				if bad[j.ID] {
					state, next = "invalid", "-"
				} else if _, ok := j.Triggered(); ok {
					next = "next tick (triggered)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, clip(j.Name, 30), j.Schedule.Normalized(j.Location()), next, state, last)
			}
			return tw.Flush()
		},
	}
}

// cronShowCommand builds `cron show`.
func cronShowCommand(deps cronDeps) *cli.Command {
	return &cli.Command{
		Name: "show", Usage: "show one job", ArgsUsage: "ID", Flags: []cli.Flag{jsonFlag()},
		Action: func(c *cli.Context) error {
			id, err := oneArg(c, "ID")
			if err != nil {
				return err
			}
			tx, err := cron.NewStore(cronHome(c, deps)).Load()
			if err != nil {
				return fmt.Errorf("cron show: %w", err)
			}
			j, err := tx.Get(id)
			if err != nil {
				return fmt.Errorf("cron show: %w", err)
			}
			return printJob(c, j, "job", cronHome(c, deps), cronNow(deps))
		},
	}
}

// cronEditCommand builds `cron edit`.
func cronEditCommand(deps cronDeps) *cli.Command {
	return &cli.Command{
		Name: "edit", Usage: "change a job (only the flags given)", ArgsUsage: "ID",
		Description: cronSamplingHelp + "\n\n" +
			"An edit replaces the sampling parameters it gives and keeps the others;\n" +
			"--max-tokens 0 and --extra-body '' (or '{}') remove theirs, --no-sampling drops them all:\n\n" +
			"   hermes-pipe cron edit JOB_ID --temperature 0.2 --extra-body ''",
		Flags: append(cronJobFlags(),
			&cli.BoolFlag{Name: "no-sampling", Usage: "drop the job's sampling parameters (the sampling flags given with it are then its only ones)"},
			&cli.StringFlag{Name: "schedule", Usage: "new schedule"},
			&cli.StringFlag{Name: "prompt", Usage: "new prompt"}, jsonFlag()),
		Action: func(c *cli.Context) error {
			id, err := oneArg(c, "ID")
			if err != nil {
				return err
			}
			home := cronHome(c, deps)
			now := cronNow(deps)
			e, err := jobEdit(c)
			if err != nil {
				return err
			}
			undo := func() {}
			if e.Script != nil && *e.Script != "" {
				name, u, err := cron.InstallScript(home, *e.Script)
				if err != nil {
					return fmt.Errorf("cron edit: %w", err)
				}
				e.Script, undo = &name, u
			}
			j, err := cron.EditJob(c.Context, cron.NewStore(home), home, id, e, now)
			if err != nil {
				undo()
				return fmt.Errorf("cron edit: %w", err)
			}
			return printJob(c, j, "edited", home, now)
		},
	}
}

// cronRmCommand builds `cron rm`.
func cronRmCommand(deps cronDeps) *cli.Command {
	return &cli.Command{
		Name: "rm", Usage: "remove a job (its history is kept)", ArgsUsage: "ID",
		Action: jobIDAction(deps, func(c *cli.Context, home, id string) (string, error) {
			return "removed job " + id, cron.RemoveJob(c.Context, cron.NewStore(home), id)
		}),
	}
}

// cronPauseCommand builds `cron pause`.
func cronPauseCommand(deps cronDeps) *cli.Command {
	return &cli.Command{
		Name: "pause", Usage: "pause a job", ArgsUsage: "ID",
		Action: jobIDAction(deps, func(c *cli.Context, home, id string) (string, error) {
			_, err := cron.PauseJob(c.Context, cron.NewStore(home), home, id, cronNow(deps))
			return "paused job " + id, err
		}),
	}
}

// cronResumeCommand builds `cron resume`.
func cronResumeCommand(deps cronDeps) *cli.Command {
	return &cli.Command{
		Name: "resume", Usage: "resume a paused job from its next occurrence", ArgsUsage: "ID",
		Action: jobIDAction(deps, func(c *cli.Context, home, id string) (string, error) {
			j, err := cron.ResumeJob(c.Context, cron.NewStore(home), home, id, cronNow(deps))
			if err != nil {
				return "", err
			}
			at, _ := j.NextRun()
			return fmt.Sprintf("resumed job %s; next run %s", id, at.In(j.Location()).Format(time.RFC3339)), nil
		}),
	}
}

// cronRunCommand builds `cron run`.
func cronRunCommand(deps cronDeps) *cli.Command {
	return &cli.Command{
		Name: "run", Usage: "run a job now (recorded as a manual execution; the schedule does not move)", ArgsUsage: "ID",
		Flags: []cli.Flag{jsonFlag()},
		Action: schedulerJobAction(deps, func(c *cli.Context, s *cron.Scheduler, id string) error {
			r, err := s.RunNow(c.Context, id)
			if err != nil {
				return fmt.Errorf("cron run: %w", err)
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, r)
			}
			printResult(c.App.Writer, r)
			if r.State != cron.StateDone {
				return fmt.Errorf("cron run %s: %s", id, r.Error)
			}
			return nil
		}),
	}
}

// cronTriggerCommand builds `cron trigger`.
func cronTriggerCommand(deps cronDeps) *cli.Command {
	return &cli.Command{
		Name: "trigger", Usage: "mark a job to run at the next tick and return at once (cron run blocks instead)", ArgsUsage: "ID",
		Description: "The next `cron tick` (or the running daemon, which notices the change) runs the job once, as\n" +
			"its own occurrence in the history (trigger \"trigger\"); the schedule does not move and the run does\n" +
			"not count towards --repeat. The tick clears the trigger and records the occurrence together, so a\n" +
			"crash never runs it twice. A paused or completed job is refused; triggering a job twice before the\n" +
			"tick gives one run. `cron list` and `cron show` show a pending trigger.",
		Action: jobIDAction(deps, func(c *cli.Context, home, id string) (string, error) {
			j, pending, err := cron.TriggerJob(c.Context, cron.NewStore(home), id, cronNow(deps))
			if err != nil {
				return "", err
			}
			at, _ := j.Triggered()
			if pending {
				return fmt.Sprintf("job %s was already triggered at %s; it runs once at the next tick", id, at.In(j.Location()).Format(time.RFC3339)), nil
			}
			return fmt.Sprintf("triggered job %s; it runs at the next tick", id), nil
		}),
	}
}

// cronTickCommand builds `cron tick`.
func cronTickCommand(deps cronDeps) *cli.Command {
	return &cli.Command{
		Name: "tick", Usage: "one scheduling pass: run what is due, then exit",
		Description: "Takes the tick lock without waiting (another ticker holds it: exit 0 quietly).\n\n" + cronMissedHelp,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "now", Usage: "pretend the time is `RFC3339` (testing, replays)"},
			maxParallelFlag(),
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			if v := c.String("now"); v != "" {
				at, err := time.Parse(time.RFC3339, v)
				if err != nil {
					return cronUsage("--now %q: want RFC3339 such as 2026-07-01T09:00:00Z", v)
				}
				deps.Now = func() time.Time { return at }
			}
			s, err := openScheduler(c, deps)
			if err != nil {
				return err
			}
			defer s.Close()
			rep, err := s.Tick(c.Context)
			if err != nil {
				return fmt.Errorf("cron tick: %w", err)
			}
			if c.Bool("json") {
				if err := writeJSON(c.App.Writer, rep); err != nil {
					return err
				}
			} else {
				for _, r := range rep.Results {
					printResult(c.App.Writer, r)
				}
				if rep.Missed+rep.Skipped+len(rep.Recovered) > 0 {
					fmt.Fprintf(c.App.Writer, "missed %d, skipped %d, marked unknown %d\n", rep.Missed, rep.Skipped, len(rep.Recovered))
				}
				if !rep.Busy && len(rep.Results) == 0 {
					fmt.Fprintln(c.App.Writer, nothingDue(s, rep, cronNow(deps)))
				}
			}
			return jobProblems("cron tick", rep.Problems())
		},
	}
}

// nothingDue is tick's line when it ran nothing: which job runs next and
// when, in that job's zone, or that no job is scheduled.
func nothingDue(s *cron.Scheduler, rep cron.TickReport, now time.Time) string {
	tx, err := s.Store.Load()
	if err != nil {
		return "nothing due"
	}
	jobs, err := tx.Jobs()
	if err != nil {
		return "nothing due"
	}
	bad := map[string]bool{}
	for _, e := range rep.Problems() {
		bad[e.ID] = true
	}
	var next *cron.Job
	var nextAt time.Time
	paused := 0
	for _, j := range jobs {
		if !j.Runnable() {
			paused++
			continue
		}
		at, ok := j.PlannedRun(now)
		if !ok || bad[j.ID] {
			continue
		}
		if next == nil || at.Before(nextAt) {
			next, nextAt = j, at
		}
	}
	if next == nil {
		line := "nothing due; no job is scheduled"
		if paused > 0 {
			line += fmt.Sprintf(" (%d paused or completed)", paused)
		}
		return line
	}
	loc := next.Location()
	return fmt.Sprintf("nothing due; next: job %s %q at %s (%s)", next.ID, next.Name, nextAt.In(loc).Format(time.RFC3339), loc)
}

// cronDaemonCommand builds `cron daemon`.
func cronDaemonCommand(deps cronDeps) *cli.Command {
	return &cli.Command{
		Name: "daemon", Usage: "run jobs until SIGTERM, sleeping until the next due time",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "shutdown-grace", Usage: "how long running jobs may finish after SIGTERM", Value: 30 * time.Second},
			maxParallelFlag(),
		},
		Action: func(c *cli.Context) error {
			s, err := openScheduler(c, deps)
			if err != nil {
				return err
			}
			defer s.Close()
			s.Log = slog.New(slog.NewTextHandler(c.App.ErrWriter, nil))
			ctx, stop := context.WithCancel(c.Context)
			defer stop()
			sigs := make(chan os.Signal, 1)
			if deps.Notify != nil {
				deps.Notify(sigs)
			} else {
				signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
				defer signal.Stop(sigs)
			}
			go func() {
				select {
				case <-sigs:
					s.Log.Info("stopping: no new runs; waiting for running jobs", "grace", c.Duration("shutdown-grace"))
					stop()
				case <-ctx.Done():
				}
			}()
			s.Log.Info("cron daemon started", "home", s.Home, "pid", os.Getpid())
			return s.RunDaemon(ctx, cron.DaemonOptions{ShutdownGrace: c.Duration("shutdown-grace")})
		},
	}
}

// cronHistoryCommand builds `cron history`.
func cronHistoryCommand(deps cronDeps) *cli.Command {
	return &cli.Command{
		Name: "history", Usage: "show a job's executions, or with --show one agent execution's trajectory", ArgsUsage: "ID",
		Flags: []cli.Flag{jsonFlag(), &cli.IntFlag{Name: "limit", Usage: "newest N only (0: all)", Value: 50},
			&cli.StringFlag{Name: "show", Usage: "print the trajectory record of agent execution `EXEC` (as hermes-pipe cat prints it)"}},
		Action: schedulerJobAction(deps, func(c *cli.Context, s *cron.Scheduler, id string) error {
			if exec := c.String("show"); exec != "" {
				e, err := s.Ledger.Get(c.Context, exec)
				if err != nil {
					return fmt.Errorf("cron history: %w", err)
				}
				if e.JobID != id {
					return cronUsage("execution %s belongs to job %s, not %s", exec, e.JobID, id)
				}
				dir := cron.RunDir(s.Home, id, exec)
				if _, err := os.Stat(dir); err != nil {
					return cronUsage("execution %s kept no trajectory (only agent executions do; it ended %s)", exec, e.State)
				}
				return pipeline.Cat(dir, c.App.Writer)
			}
			h, err := s.Ledger.History(c.Context, id, c.Int("limit"))
			if err != nil {
				return fmt.Errorf("cron history: %w", err)
			}
			if c.Bool("json") {
				if h == nil {
					h = []cron.Execution{}
				}
				return writeJSON(c.App.Writer, h)
			}
			loc := time.UTC
			if tx, err := s.Store.Load(); err == nil {
				if j, err := tx.Get(id); err == nil {
					loc = j.Location()
				}
			}
			tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SCHEDULED\tSTATE\tTRIGGER\tDURATION\tDETAIL")
			for _, e := range h {
				dur := "-"
				if !e.StartedAt.IsZero() && !e.FinishedAt.IsZero() {
					dur = e.FinishedAt.Sub(e.StartedAt).Round(time.Millisecond).String()
				}
				detail := e.Error
				if detail == "" {
					detail = e.Delivery
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.ScheduledAt.In(loc).Format(time.RFC3339), e.State, e.Trigger, dur, clip(oneLine(detail), 80))
			}
			return tw.Flush()
		}),
	}
}

// cronNextCommand builds `cron next`.
func cronNextCommand(deps cronDeps) *cli.Command {
	return &cli.Command{
		Name: "next", Usage: "print a schedule's next fire times", ArgsUsage: "SCHEDULE",
		Description: "One RFC3339 timestamp per line, in the zone.\n\n" + cronGrammarHelp + "\n\n" + cronDSTHelp,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "tz", Usage: "IANA time zone (default: the local zone)"},
			&cli.StringFlag{Name: "from", Usage: "start after `RFC3339` (default: now)"},
			&cli.IntFlag{Name: "count", Usage: "how many", Value: 5},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cronUsage("next needs exactly one SCHEDULE (quote cron expressions)")
			}
			loc, err := zone(c.String("tz"))
			if err != nil {
				return err
			}
			from := cronNow(deps)
			if v := c.String("from"); v != "" {
				if from, err = time.Parse(time.RFC3339, v); err != nil {
					return cronUsage("--from %q: want RFC3339", v)
				}
			}
			if c.Int("count") < 1 {
				return cronUsage("--count must be at least 1")
			}
			s, err := cron.ParseSchedule(c.Args().First(), loc, from)
			if err != nil {
				return err
			}
			// What cron add refuses (never fires, a one-shot time past) is
			// refused here too, rather than printing nothing.
			if _, err := cron.FirstRun(s, c.Args().First(), loc, from); err != nil {
				return err
			}
			at := from
			for range c.Int("count") {
				next, ok := s.Next(at, loc)
				if !ok {
					break
				}
				fmt.Fprintln(c.App.Writer, next.In(loc).Format(time.RFC3339))
				at = next
			}
			return nil
		},
	}
}

// cronImportCommand builds `cron import`.
func cronImportCommand(deps cronDeps) *cli.Command {
	return &cli.Command{
		Name: "import", Usage: "import a Hermes jobs.json", ArgsUsage: "FILE",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "tz", Usage: "zone for jobs without one (default: the local zone)"},
			&cli.BoolFlag{Name: "skip-invalid", Usage: "import the valid jobs and list the others"},
			&cli.StringFlag{Name: "skills-dir", Usage: "Hermes skills `DIR` (e.g. ~/.hermes/skills) to link under <home>/skills, where jobs' skills are loaded from"},
			&cli.StringFlag{Name: "scripts-dir", Usage: "Hermes scripts `DIR` the jobs' scripts are copied from into <home>/cron/scripts (default: <hermes home>/scripts when FILE is <hermes home>/cron/jobs.json or a Hermes home)"},
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			file, err := oneArg(c, "FILE")
			if err != nil {
				return err
			}
			if tz := c.String("tz"); tz != "" {
				if _, err := zone(tz); err != nil {
					return err
				}
			}
			home := cronHome(c, deps)
			if dir := c.String("skills-dir"); dir != "" {
				linked, err := cron.LinkSkills(home, dir)
				if err != nil {
					return fmt.Errorf("cron import: %w", err)
				}
				if !c.Bool("json") && len(linked) > 0 {
					fmt.Fprintf(c.App.Writer, "linked %d skill folders from %s into %s\n", len(linked), dir, cron.SkillsDir(home))
				}
			}
			rep, err := cron.ImportHermesWith(c.Context, cron.NewStore(home), home, file, cron.ImportOptions{
				TZ: c.String("tz"), Now: cronNow(deps), SkipInvalid: c.Bool("skip-invalid"), ScriptsDir: c.String("scripts-dir")})
			if err != nil {
				return fmt.Errorf("cron import: %w", err)
			}
			if c.Bool("json") {
				if err := writeJSON(c.App.Writer, rep); err != nil {
					return err
				}
				return notTaken(rep)
			}
			fmt.Fprintf(c.App.Writer, "imported %d jobs\n", len(rep.Imported))
			if len(rep.Scripts) > 0 {
				fmt.Fprintf(c.App.Writer, "copied %d scripts from %s into %s\n", len(rep.Scripts), rep.ScriptsDir, cron.ScriptsDir(home))
			}
			for id, why := range rep.Rejected {
				fmt.Fprintf(c.App.Writer, "skipped %s: %s\n", id, why)
			}
			for id, why := range rep.Warnings {
				fmt.Fprintf(c.App.Writer, "warning %s: %s\n", id, why)
			}
			return notTaken(rep)
		},
	}
}

// jobProblems is the error of a command that found jobs it cannot schedule
// (exit 1): each is named with its reason; the other jobs were handled.
func jobProblems(cmd string, problems []cron.JobError) error {
	if len(problems) == 0 {
		return nil
	}
	lines := make([]string, len(problems))
	for i, p := range problems {
		lines[i] = p.String()
	}
	return fmt.Errorf("%s: %d job(s) cannot be scheduled (the others were handled):\n  %s", cmd, len(problems), strings.Join(lines, "\n  "))
}

func cronUsage(format string, a ...any) error {
	return fmt.Errorf("%w: %s", cron.ErrUsage, fmt.Sprintf(format, a...))
}

func cronNow(deps cronDeps) time.Time {
	if deps.Now != nil {
		return deps.Now()
	}
	return time.Now()
}

// cronHome resolves --home, then HERMES_PIPE_HOME, then ~/.hermes-pipe.
func cronHome(c *cli.Context, deps cronDeps) string {
	if h := c.String("home"); h != "" {
		return h
	}
	getenv := deps.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	return defaultHome(getenv)
}

// maxParallelFlag bounds the due jobs one tick or the daemon runs at once.
func maxParallelFlag() cli.Flag {
	return &cli.IntFlag{Name: "max-parallel", Value: cron.DefaultMaxParallel,
		Usage: "due jobs executed at once; the others wait their turn (claimed, in order)"}
}

func openScheduler(c *cli.Context, deps cronDeps) (*cron.Scheduler, error) {
	if c.IsSet("max-parallel") && c.Int("max-parallel") < 1 {
		return nil, cronUsage("--max-parallel must be at least 1, got %d", c.Int("max-parallel"))
	}
	s, err := cron.NewScheduler(c.Context, cronHome(c, deps))
	if err != nil {
		return nil, err
	}
	s.MaxParallel = c.Int("max-parallel")
	if err := cron.CheckScriptIsolation(c.String("script-isolation")); err != nil {
		s.Close()
		return nil, cronUsage("--script-isolation: %v", err)
	}
	if s.ScriptIsolation = c.String("script-isolation"); s.ScriptIsolation == cron.IsolationNone && c.Command.Name != "history" {
		fmt.Fprintln(c.App.ErrWriter, "cron: warning: --script-isolation none: scripts run as this user with its files, network and processes in reach")
	}
	s.Agent = deps.Agent
	getenv := deps.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if d, ok, err := cron.ParseCronTimeout(getenv("HERMES_CRON_TIMEOUT")); err != nil {
		s.Close()
		return nil, err
	} else if ok {
		s.DefaultInactivity = &d
	}
	if deps.Now != nil {
		s.Now = deps.Now
		s.Store.Now = deps.Now
	}
	return s, nil
}

func zone(name string) (*time.Location, error) {
	if name == "" {
		name = cron.LocalZone()
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, cronUsage("time zone %q: %v", name, err)
	}
	return loc, nil
}

func oneArg(c *cli.Context, what string) (string, error) {
	if c.NArg() != 1 {
		return "", cronUsage("%s needs exactly one %s", c.Command.Name, what)
	}
	return c.Args().First(), nil
}

// schedulerJobAction is the Action of subcommands that take exactly one job
// ID and need the scheduler (run, history): it opens the scheduler of the
// home folder, calls do, and closes it.
func schedulerJobAction(deps cronDeps, do func(c *cli.Context, s *cron.Scheduler, id string) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		id, err := oneArg(c, "ID")
		if err != nil {
			return err
		}
		s, err := openScheduler(c, deps)
		if err != nil {
			return err
		}
		defer s.Close()
		return do(c, s, id)
	}
}

// jobIDAction is the Action of rm, pause and resume: it takes exactly one job
// ID, runs do against the home folder and prints the line do returns; errors
// are prefixed with the command, e.g. "cron pause: ...".
func jobIDAction(deps cronDeps, do func(c *cli.Context, home, id string) (string, error)) cli.ActionFunc {
	return func(c *cli.Context) error {
		id, err := oneArg(c, "ID")
		if err != nil {
			return err
		}
		line, err := do(c, cronHome(c, deps), id)
		if err != nil {
			return fmt.Errorf("cron %s: %w", c.Command.Name, err)
		}
		fmt.Fprintln(c.App.Writer, line)
		return nil
	}
}

func specFromFlags(c *cli.Context) cron.JobSpec {
	var timeout *time.Duration // unset: HERMES_CRON_TIMEOUT or the default, decided at run time
	if c.IsSet("timeout") {
		v := c.Duration("timeout")
		timeout = &v
	}
	return cron.JobSpec{
		Name: c.String("name"), Timezone: c.String("tz"), Script: c.String("script"), NoAgent: c.Bool("no-agent"),
		Model: c.String("model"), Provider: c.String("provider"), BaseURL: c.String("base-url"),
		Skills: c.StringSlice("skill"), ContextFrom: c.StringSlice("context-from"), Toolsets: splitList(c.StringSlice("toolsets")),
		Deliver: c.String("deliver"), Workdir: c.String("workdir"), Repeat: c.Int("repeat"), Overlap: c.String("overlap"),
		StartingDeadline: c.Duration("starting-deadline"), Timeout: timeout, MaxRuntime: c.Duration("max-runtime"),
		EnvAllow: c.StringSlice("env-allow"), MaxTurns: c.Int("max-turns"), CommandTimeout: c.Duration("command-timeout"),
		APIKeyEnv: c.String("api-key-env"), Sandbox: c.String("sandbox"),
		MCPConfig: c.String("mcp-config"), SkillsDir: c.String("skills-dir"),
	}
}

func splitList(v []string) []string {
	var out []string
	for _, s := range v {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// jobEdit reads the job flags the user set into a cron.JobEdit (cron edit);
// the rules of applying it live in the library.
func jobEdit(c *cli.Context) (cron.JobEdit, error) {
	var e cron.JobEdit
	str := func(name string) *string {
		if !c.IsSet(name) {
			return nil
		}
		v := c.String(name)
		return &v
	}
	list := func(name string, f func([]string) []string) *[]string {
		if !c.IsSet(name) {
			return nil
		}
		v := c.StringSlice(name)
		if f != nil {
			v = f(v)
		}
		return &v
	}
	dur := func(name string) *time.Duration {
		if !c.IsSet(name) {
			return nil
		}
		v := c.Duration(name)
		return &v
	}
	e.Name, e.Schedule, e.Timezone, e.Prompt, e.Script = str("name"), str("schedule"), str("tz"), str("prompt"), str("script")
	e.Model, e.Provider, e.BaseURL = str("model"), str("provider"), str("base-url")
	e.Deliver, e.Workdir, e.Overlap = str("deliver"), str("workdir"), str("overlap")
	e.Skills, e.ContextFrom, e.Toolsets, e.EnvAllow = list("skill", nil), list("context-from", nil), list("toolsets", splitList), list("env-allow", nil)
	e.StartingDeadline, e.Timeout, e.MaxRuntime = dur("starting-deadline"), dur("timeout"), dur("max-runtime")
	if c.IsSet("no-agent") {
		v := c.Bool("no-agent")
		e.NoAgent = &v
	}
	if c.IsSet("repeat") {
		v := c.Int("repeat")
		e.Repeat = &v
	}
	if c.IsSet("max-turns") {
		v := c.Int("max-turns")
		e.MaxTurns = &v
	}
	e.CommandTimeout, e.APIKeyEnv, e.Sandbox = dur("command-timeout"), str("api-key-env"), str("sandbox")
	e.MCPConfig, e.SkillsDir = str("mcp-config"), str("skills-dir")
	return e, editSampling(c, &e)
}

// editSampling reads the sampling flags of cron edit into e: each one given
// replaces the job's (--max-tokens 0 and an empty --extra-body or '{}'
// remove theirs), --no-sampling drops the job's first.
func editSampling(c *cli.Context, e *cron.JobEdit) error {
	ls, err := samplingOf(c)
	if err != nil {
		return err
	}
	e.ClearSampling = c.Bool("no-sampling")
	e.Temperature, e.TopP, e.Seed = ls.Temperature, ls.TopP, ls.Seed
	if c.IsSet("max-tokens") {
		e.MaxTokens = &ls.MaxTokens
	}
	if c.IsSet("extra-body") {
		v := c.String("extra-body")
		e.ExtraBody = &v
	}
	return nil
}

// printJob echoes a job back: the normalised schedule and next three fire times.
func printJob(c *cli.Context, j *cron.Job, verb, home string, now time.Time) error {
	loc := j.Location()
	var next []string
	if at, ok := j.NextRun(); ok {
		next = append(next, at.In(loc).Format(time.RFC3339))
		for len(next) < 3 && j.Schedule.Kind != cron.KindOnce {
			if at, ok = j.Schedule.Next(at, loc); !ok {
				break
			}
			next = append(next, at.In(loc).Format(time.RFC3339))
		}
	}
	if c.Bool("json") {
		raw, err := j.MarshalIndent()
		if err != nil {
			return err
		}
		if next == nil {
			next = []string{}
		}
		v := map[string]any{"job": json.RawMessage(raw), "schedule": j.Schedule.Normalized(loc), "next": next}
		if !j.NoAgent {
			cfg, _ := cron.LoadConfig(home)
			toolsets, disabled := cfg.JobToolsets(j)
			v["toolsets"], v["disabled_toolsets"] = append([]string{}, toolsets...), append([]string{}, disabled...)
		}
		return writeJSON(c.App.Writer, v)
	}
	w := c.App.Writer
	fmt.Fprintf(w, "%s %s %q\n", verb, j.ID, j.Name)
	fmt.Fprintf(w, "schedule: %s\n", j.Schedule.Normalized(loc))
	kind := "agent"
	if j.NoAgent {
		kind = "script " + string(j.Script)
	} else if j.Script != "" {
		kind = "agent with script " + string(j.Script)
	}
	fmt.Fprintf(w, "runs:     %s, deliver %s, overlap %s\n", kind, j.Deliver, j.Policy.OverlapMode())
	if !j.NoAgent {
		printToolsets(w, j, home)
	}
	if p := j.Policy.MCPConfig; p != "" {
		fmt.Fprintf(w, "mcp:      %s\n", p)
	}
	if s := samplingText(j.Policy.Sampling); s != "" {
		fmt.Fprintf(w, "sampling: %s\n", s)
	}
	if !j.Enabled {
		fmt.Fprintf(w, "state:    %s\n", j.State)
	}
	if at, ok := j.Triggered(); ok {
		fmt.Fprintf(w, "trigger:  pending since %s: runs once at the next tick\n", at.In(loc).Format(time.RFC3339))
	}
	for i, n := range next {
		label := "          "
		if i == 0 {
			label = "next:     "
		}
		fmt.Fprintln(w, label+n)
	}
	if len(next) == 0 {
		fmt.Fprintln(w, "next:     none")
	}
	return nil
}

// printToolsets prints the toolsets an agent job's executions are given,
// and those the operator's disabled_toolsets (<home>/cron/config.yaml)
// take away from it.
func printToolsets(w io.Writer, j *cron.Job, home string) {
	cfg, err := cron.LoadConfig(home)
	toolsets, disabled := cfg.JobToolsets(j)
	line := strings.Join(toolsets, ", ")
	if len(toolsets) == 0 {
		line = "none: every one is disabled, so its executions fail"
	}
	fmt.Fprintf(w, "toolsets: %s\n", line)
	if len(disabled) > 0 {
		fmt.Fprintf(w, "disabled: %s (disabled_toolsets in %s; never given to any job)\n", strings.Join(disabled, ", "), cron.ConfigPath(home))
	}
	if err != nil {
		fmt.Fprintf(w, "config:   %v\n", err)
	}
}

// samplingText is a job's sampling parameters as `cron show` prints them
// (body field names); "" when it has none.
func samplingText(s *cron.Sampling) string {
	if s.IsZero() {
		return ""
	}
	var parts []string
	if s.Temperature != nil {
		parts = append(parts, fmt.Sprintf("temperature %v", *s.Temperature))
	}
	if s.TopP != nil {
		parts = append(parts, fmt.Sprintf("top_p %v", *s.TopP))
	}
	if s.MaxTokens > 0 {
		parts = append(parts, fmt.Sprintf("max_tokens %d", s.MaxTokens))
	}
	if s.Seed != nil {
		parts = append(parts, fmt.Sprintf("seed %d", *s.Seed))
	}
	if len(s.ExtraBody) > 0 {
		parts = append(parts, "extra body "+string(s.ExtraBody))
	}
	return strings.Join(parts, ", ")
}

func printResult(w io.Writer, r cron.Result) {
	line := fmt.Sprintf("%s %s", r.ExecutionID, r.State)
	if r.Error != "" {
		line += ": " + oneLine(r.Error)
	} else if r.Delivery != "" {
		line += " (" + r.Delivery + ")"
	}
	fmt.Fprintln(w, line)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

// clip shortens s to n characters, cutting at a character boundary.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
