package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-pipe/hermes-pipe/cmd/hermes-pipe/internal/heapfloor"
	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/cluster"
	"github.com/hermes-pipe/hermes-pipe/pipeline/cost"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/stages/cron"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout"
	"github.com/urfave/cli/v2"
)

// runSetup is what every command that writes an output folder (generate,
// compress, swe) sets up from the flags they share, before it calls its
// mode: the runtime's part of the mode's options (pipeline.RunConfig, with
// the shard's folder or spool), the signal-driven context, the LLM client
// and, for agent modes, the sandbox driver, checked before any token is
// spent. Each command binds its own flags, calls startRun, then its mode's
// Run with cfg, and finally finish.
type runSetup struct {
	ctx    context.Context
	cfg    pipeline.RunConfig
	client llm.Client
	price  *cost.Price    // of --model; nil = unknown (cost_usd null)
	driver sandbox.Driver // nil unless agent
	runID  string
	out    *cluster.Output
	stop   func()
	// unfloor ends the run's heap floor (heapfloor.Keep).
	unfloor func()

	retries *llm.RetryCounts // the client's retries by cause, for the closing summary

	label      string       // the command, for warnings
	noLogprobs atomic.Int64 // replies without logprobs although --logprobs asked
	// ready is the driver's pre-flight and ceiling warnings when the run
	// does them (sandboxAtRun: the rollout stage's Preflight calls it), nil
	// when startRun did.
	ready func(ctx context.Context) error
}

// sandboxUse says whether a command needs the sandbox and when its driver
// is checked.
type sandboxUse int

const (
	noSandbox sandboxUse = iota
	// sandboxNow: the driver is opened and pre-flighted before startRun
	// returns.
	sandboxNow
	// sandboxAtRun: as sandboxNow, but with --resume the driver is
	// pre-flighted by the run before its first record
	// (rollout.Options.Ready), once the output folder's ledger is loaded:
	// the local driver's confinement probe (a few hundred ms) runs
	// meanwhile. A fresh run checks first, so a broken sandbox leaves no
	// output folder.
	sandboxAtRun
)

// startRun binds runFlags, llmFlags and, unless sb is noSandbox,
// sandboxFlags. label names the run in progress lines; format is the shard
// format ("" for modes without --format). Bad flags are usage errors found
// before any I/O; the caller must call close when startRun succeeds.
func startRun(c *cli.Context, label, format string, sb sandboxUse) (*runSetup, error) {
	agent := sb != noSandbox
	// The counter of the run's retries by cause: the model client's, and any
	// other client the mode makes from r.retries (compress's Batch API
	// client); run.json and the closing summary report it.
	retries := &llm.RetryCounts{}
	mode, err := checkRunFlags(c)
	if err != nil {
		return nil, err
	}
	workers := c.Int("workers")
	progress, err := progressFor(c, label)
	if err != nil {
		return nil, err
	}
	// Every mode needs an endpoint but compress writing and reading batch
	// files only (--batch-export/--batch-import), which may leave it out.
	var client llm.Client
	if c.String("base-url") != "" {
		if client, _, err = buildLLM(c, workers, retries); err != nil {
			return nil, err
		}
	}
	r := &runSetup{client: client, retries: retries, stop: func() {}, label: label,
		unfloor: heapfloor.Keep(heapfloor.Default)}
	record := flagRecord(c)
	recordChanges(c, record)
	if r.price, err = priceOf(c, label); err != nil {
		r.close()
		return nil, err
	}
	if agent {
		r.runID = newRunID()
		record = withRunID(record, r.runID)
		if r.driver, err = openSandbox(c.String("sandbox"), sandboxConfig(c, r.runID)); err != nil {
			r.close()
			return nil, err
		}
		if c.String("sandbox") == "local" && c.String("local-isolation") == "none" {
			fmt.Fprintf(c.App.ErrWriter, "%s: warning: --local-isolation none: commands run as this user with its files, network and processes in reach\n", label)
		}
		if c.String("sandbox") == "ssh" && c.String("ssh-isolation") == "none" {
			fmt.Fprintf(c.App.ErrWriter, "%s: warning: --ssh-isolation none: commands run as the remote login with its files, network and processes in reach\n", label)
		}
		if c.Bool("resume") {
			collectPrevious(c, label, r.driver)
		}
	}
	if err := checkCaps(c, r.price); err != nil {
		r.close()
		return nil, err
	}
	if r.out, err = shardOutput(c); err != nil {
		r.close()
		return nil, err
	}
	if p, ok := client.(llm.Prewarmer); ok && agent {
		// The first wave's connections open while the sandbox and the
		// endpoint are checked (a plain-http endpoint's: llm.Prewarmer):
		// one per rollout that can be in a call at once.
		p.Prewarm(min(workers, maxConcurrent(c, workers)))
	}
	if agent && c.String("sandbox") != "local" {
		fmt.Fprintf(c.App.ErrWriter, "%s: run %s (after a crash, `hermes-pipe sandbox gc --sandbox %s --run %s` removes its leftovers)\n", label, r.runID, c.String("sandbox"), r.runID)
	}
	ctx, soft, stop := signalContext(c.Context, c.Duration("grace"), c.App.ErrWriter)
	r.ctx, r.stop = ctx, stop
	// The endpoint check runs while the sandbox is checked (the local
	// driver's probe takes a few tens of ms); the sandbox's error, if any,
	// is the one reported.
	var endpointErr <-chan error
	checkCtx, cancelCheck := context.WithCancel(ctx)
	defer cancelCheck()
	if base := c.String("base-url"); base != "" {
		check := reachable
		if agent { // the chat route itself: a wrong path, key or model stops here
			check = func(ctx context.Context, base string) error { return chatReady(ctx, c, base) }
		}
		ch := make(chan error, 1)
		go func() { ch <- check(checkCtx, base) }()
		endpointErr = ch
	}
	if agent {
		var once sync.Once
		var readyErr error
		ready := func(ctx context.Context) error {
			once.Do(func() {
				if readyErr = preflightDriver(ctx, r.driver); readyErr == nil {
					ceilingWarnings(c, label, r.driver)
				}
			})
			return readyErr
		}
		if sb == sandboxAtRun && c.Bool("resume") {
			r.ready = ready
		} else if err := ready(ctx); err != nil {
			cancelCheck()
			if endpointErr != nil {
				<-endpointErr
			}
			r.close()
			return nil, err
		}
	}
	if endpointErr != nil {
		if err := <-endpointErr; err != nil {
			r.close()
			return nil, err
		}
	}
	r.cfg = pipeline.RunConfig{
		Out:            r.out.Dir,
		Filter:         r.out.Filter,
		KeepShards:     r.out.KeepShards,
		Mode:           mode,
		Format:         format,
		Workers:        workers,
		MaxShardRows:   c.Int("shard-rows"),
		CommitInterval: c.Duration("commit-interval"),
		VerifyShards:   c.Bool("verify-shards"),
		MaxCost:        c.Float64("max-cost"),
		Grace:          c.Duration("grace"),
		BatchSize:      c.Int("batch-size"), // generate's; 0 (default 1) elsewhere
		Stop:           soft,
		Progress:       progress,
		Logger:         warnLogger(c),
		ToolVersion:    versionString(),
		Record:         record,
		Retries:        func() outdir.Retries { return retriesOf(retries) },
	}
	return r, nil
}

// retriesOf is the client's retry counts in run.json's form (none for nil).
func retriesOf(r *llm.RetryCounts) outdir.Retries {
	if r == nil {
		return outdir.Retries{}
	}
	return outdir.Retries{RateLimited: r.RateLimited.Load(), Server: r.Server.Load(), Timeout: r.Timeout.Load(),
		Malformed: r.Malformed.Load(), Other: r.Other.Load()}
}

// checkRunFlags checks the flags startRun binds that need no I/O, so a
// command can report them before its own slower checks, and returns the
// output mode (--resume/--overwrite).
func checkRunFlags(c *cli.Context) (pipeline.Mode, error) {
	mode, err := outputMode(c)
	if err != nil {
		return 0, err
	}
	if w := c.Int("workers"); w < 1 {
		return 0, usagef("--workers must be at least 1, got %d", w)
	}
	if b := c.Int("batch-size"); c.IsSet("batch-size") && b < 1 {
		return 0, usagef("--batch-size must be at least 1, got %d", b)
	}
	if _, err := samplingOf(c); err != nil {
		return 0, err
	}
	for _, f := range []string{"max-cost", "max-cost-per-rollout"} {
		if v := c.Float64(f); v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, usagef("--%s must be a positive number of USD (0 = no cap), got %v", f, v)
		}
	}
	if v := c.Int64("max-tokens-per-rollout"); v < 0 {
		return 0, usagef("--max-tokens-per-rollout must not be negative, got %d", v)
	}
	return mode, nil
}

// rolloutCapFlags are the per-rollout caps of generate and swe, and of
// compress, where they cap the summary calls of one row.
func rolloutCapFlags() []cli.Flag {
	return []cli.Flag{
		&cli.Float64Flag{Name: "max-cost-per-rollout", Usage: "USD one rollout may spend: before each model call after the first, a rollout that has spent this much ends with the final outcome budget_exceeded (trajectory kept; --resume does not run it again; overshoot at most one model call); in compress, a row whose summary calls spent this much stops summarising and keeps its original conversation (budget_exceeded); 0 = none; needs a price"},
		&cli.Int64Flag{Name: "max-tokens-per-rollout", Usage: "prompt plus completion tokens one rollout may use, checked like --max-cost-per-rollout (outcome budget_exceeded; in compress, a row's summary calls); 0 = none"},
	}
}

// checkCaps refuses a cost cap that cannot be enforced: one without a price
// of --model.
func checkCaps(c *cli.Context, price *cost.Price) error {
	for _, f := range []string{"max-cost", "max-cost-per-rollout"} {
		if c.Float64(f) <= 0 || price != nil {
			continue
		}
		return usagef("--%s needs the price of --model %q: give --prices (with an entry for it) or --price-in/--price-out", f, c.String("model"))
	}
	return nil
}

// rolloutOptions binds the agent-loop flags generate and swe share (model,
// turns, timeouts, output limit, max tokens) with the run's client, driver
// and run id; systemPrompt is the mode's. Modes add their own fields.
// --max-tokens and the other sampling flags are the client's (samplingOf).
func (r *runSetup) rolloutOptions(c *cli.Context, systemPrompt string) rollout.Options {
	return rollout.Options{
		Client:         r.client,
		Model:          c.String("model"),
		Driver:         r.driver,
		Ready:          r.ready,
		RunID:          r.runID,
		MaxTurns:       c.Int("max-turns"),
		Timeout:        c.Duration("timeout"),
		CommandTimeout: c.Duration("command-timeout"),
		MaxOutput:      c.Int("max-output"),
		SystemPrompt:   systemPrompt,
		Price:          r.price,
		// The cronjob toolset reads schedules and checks prompts as `cron add`.
		PlanSchedule:    cron.PlanSchedule,
		GuardCronPrompt: cron.GuardPrompt,

		MaxCostPerRollout:   c.Float64("max-cost-per-rollout"),
		MaxTokensPerRollout: c.Int64("max-tokens-per-rollout"),

		Logprobs:        hasFlag(c, "logprobs") && c.Bool("logprobs"),
		LogprobsMissing: &r.noLogprobs,
	}
}

// priceOf reads --prices, --price-in and --price-out for --model. Without a
// price it says once, on the error stream, that costs are unknown (records
// get cost_usd null, never 0).
func priceOf(c *cli.Context, label string) (*cost.Price, error) {
	model := c.String("model")
	in, out := c.Float64("price-in"), c.Float64("price-out")
	if (in >= 0) != (out >= 0) {
		return nil, usagef("give --price-in and --price-out together (USD per million tokens)")
	}
	var tab *cost.Table
	if f := c.String("prices"); f != "" {
		t, err := cost.Load(f)
		if err != nil {
			return nil, usagef("%v", err)
		}
		tab = t
	}
	if in >= 0 {
		p := cost.PerMillion(in, out)
		if tp, ok := tab.Lookup(model); ok { // keep the table's cached and batch rates, scaled
			if tp.Input > 0 {
				p.CachedInput = tp.CachedInput * p.Input / tp.Input
				p.BatchInput = tp.BatchInput * p.Input / tp.Input
			}
			if tp.Output > 0 {
				p.BatchOutput = tp.BatchOutput * p.Output / tp.Output
			}
		}
		return &p, nil
	}
	if p, ok := tab.Lookup(model); ok {
		return &p, nil
	}
	why := "no --prices or --price-in/--price-out"
	if tab != nil {
		why = fmt.Sprintf("%s has no price for %q", c.String("prices"), model)
	}
	fmt.Fprintf(c.App.ErrWriter, "%s: costs unknown: %s; records get cost_usd null\n", label, why)
	return nil, nil
}

// finish uploads what the run committed (for an object-storage --out) and
// returns the run's error, or the upload's when the run had none.
func (r *runSetup) finish(c *cli.Context, err error) error {
	if ferr := r.out.Finish(context.WithoutCancel(r.ctx)); err == nil && ferr != nil {
		err = fmt.Errorf("upload %s: %w", c.String("out"), ferr)
	}
	if n := r.noLogprobs.Load(); n > 0 {
		fmt.Fprintf(c.App.ErrWriter, "%s: warning: %d model replies came without logprobs although --logprobs asked for them (does the endpoint support them?) or held the endpoint's key; their turns have no entry in the records' logprobs\n", r.label, n)
	}
	return err
}

// close stops the signal handling and releases the sandbox driver. It does
// not upload: call finish first.
func (r *runSetup) close() {
	r.stop()
	r.unfloor()
	if r.driver != nil {
		releaseSandbox(r.driver)
	}
}

// warnLogger logs warnings and errors to the command's error stream.
func warnLogger(c *cli.Context) *slog.Logger {
	return slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// collectPrevious removes what the run that last wrote --out left in the
// sandbox (folders of a killed local run, containers of a killed docker
// run): run.json names that run's id. It only warns on failure; the run goes
// on.
func collectPrevious(c *cli.Context, label string, d sandbox.Driver) {
	if _, ok := d.(sandbox.Collector); !ok || pipeline.FolderInUse(c.String("out")) {
		return // nothing to collect, or that run is still going: leave it alone
	}
	man, ok, err := outdir.ReadManifest(c.String("out"))
	if err != nil || !ok {
		return
	}
	var opts struct {
		RunID string `json:"run_id"`
	}
	if json.Unmarshal(man.Options, &opts) != nil || opts.RunID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(c.Context, 2*time.Minute)
	defer cancel()
	n, err := sandbox.GC(ctx, d, opts.RunID)
	switch {
	case err != nil:
		fmt.Fprintf(c.App.ErrWriter, "%s: warning: removing what run %s left: %v\n", label, opts.RunID, err)
	case n > 0:
		fmt.Fprintf(c.App.ErrWriter, "%s: removed %d leftovers of the previous run %s\n", label, n, opts.RunID)
	}
}
