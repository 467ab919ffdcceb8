package cron

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/cost"
	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout/mcp"
)

// RolloutRunner implements AgentRunner. Jobs without their own model or base
// URL use DefaultModel and DefaultBaseURL.
type RolloutRunner struct {
	Driver         sandbox.Driver
	DefaultBaseURL string
	DefaultModel   string
	// BaseURLEnv and ModelEnv name where DefaultBaseURL and DefaultModel
	// come from (environment variables), for the error of a job with no
	// endpoint; "" leaves them unnamed.
	BaseURLEnv, ModelEnv string
	APIKey               string
	MaxTurns             int // 0 = 20
	// NewClient builds the LLM client for a base URL; nil = llm.New.
	NewClient func(baseURL, apiKey string) (llm.Client, error)
	// Getenv reads a job's API key variable; nil = os.Getenv.
	Getenv func(string) string
	// OpenDriver builds the driver of a job that names its own sandbox
	// (docker:IMAGE, ssh:HOST); nil makes such jobs fail saying so.
	OpenDriver func(scheme string, cfg sandbox.Config) (sandbox.Driver, error)
	// PricesFile is a price table (cost.Load) in which each job's model is
	// looked up, so the execution's record gets usage and cost_usd as
	// generate's do; "" or a model it does not price = cost_usd null.
	PricesFile string
	// Caps of each execution's rollout (rollout.Options): past them it ends
	// budget_exceeded. MaxCostPerRollout applies only to priced models.
	MaxCostPerRollout   float64
	MaxTokensPerRollout int64
}

// priceOf looks model up in PricesFile; nil when there is no file or no
// price. A file that cannot be read is an error.
func (r *RolloutRunner) priceOf(model string) (*cost.Price, error) {
	if r.PricesFile == "" {
		return nil, nil
	}
	tab, err := cost.Load(r.PricesFile)
	if err != nil {
		return nil, err
	}
	if p, ok := tab.Lookup(model); ok {
		return &p, nil
	}
	return nil, nil
}

// driverFor returns the driver of the job's sandbox, the image its record
// names, and a release function.
func (r *RolloutRunner) driverFor(job AgentJob) (sandbox.Driver, string, func(), error) {
	scheme, target, err := ParseSandbox(job.Sandbox)
	if err != nil {
		return nil, "", nil, err
	}
	if job.Sandbox == "" || (scheme == "local" && r.OpenDriver == nil) {
		return r.Driver, "", func() {}, nil
	}
	if r.OpenDriver == nil {
		return nil, "", nil, fmt.Errorf("sandbox %s: this runner opens no other sandbox", job.Sandbox)
	}
	var cfg sandbox.Config
	image := ""
	switch scheme {
	case "docker":
		image = target
		cfg.Docker.DefaultImage = target
	case "ssh":
		host := target
		if u, h, ok := strings.Cut(target, "@"); ok {
			cfg.SSH.User, host = u, h
		}
		cfg.SSH.Host = host
	}
	d, err := r.OpenDriver(scheme, cfg)
	if err != nil {
		return nil, "", nil, fmt.Errorf("sandbox %s: %w", job.Sandbox, err)
	}
	release := func() {
		if rel, ok := d.(sandbox.Releaser); ok {
			_ = rel.Release()
		}
	}
	return d, image, release, nil
}

// RunAgent runs one rollout for the job and returns its final answer. It
// blocks until the rollout ends, the job's inactivity timeout passes with no
// model reply and no tool result, or ctx (carrying MaxRuntime) ends.
func (r *RolloutRunner) RunAgent(ctx context.Context, job AgentJob) (AgentResult, error) {
	base, model := r.endpoint(job)
	if base == "" || model == "" {
		return AgentResult{Outcome: schemas.OutcomeAPIError, Error: r.noEndpoint(job, base, model)}, nil
	}
	key, ok := r.apiKey(job)
	if !ok {
		return AgentResult{Outcome: schemas.OutcomeAPIError, Error: fmt.Sprintf("the job's API key variable %s is not set (--api-key-env, or the provider's PROVIDER_API_KEY)", job.APIKeyEnv)}, nil
	}
	client, err := r.clientMaker(model, job.Sampling)(base, key)
	if err != nil {
		return AgentResult{}, fmt.Errorf("cron agent %s: %w", job.JobID, err)
	}
	maxTurns := r.maxTurns(job)

	act := watchActivity(ctx, job.InactivityTimeout)
	defer act.stop()
	driver, image, release, err := r.driverFor(job)
	if err != nil {
		return AgentResult{Outcome: schemas.OutcomeSandboxError, Error: err.Error()}, nil
	}
	defer release()
	price, err := r.priceOf(model)
	if err != nil {
		return AgentResult{}, fmt.Errorf("cron agent %s: %w", job.JobID, err)
	}
	capCost := r.MaxCostPerRollout
	if price == nil {
		capCost = 0 // unpriced: only the token cap can hold
	}
	servers, fail := startMCP(act.ctx, job, driver)
	if fail != nil {
		return *fail, nil
	}
	defer servers.Close() // a no-op when the job has no MCP servers (nil)
	stage, err := rollout.New(rollout.Options{
		Client:         activityClient{client, act},
		Model:          model,
		Driver:         activityDriver{driver, act},
		RunID:          "cron-" + job.JobID,
		MaxTurns:       maxTurns,
		CommandTimeout: job.CommandTimeout,
		Toolsets:       job.Toolsets,
		MCP:            servers,
		SkillsDir:      job.SkillsDir,
		SystemPrompt:   job.SystemPrompt,
		Price:          price,

		MaxCostPerRollout:   capCost,
		MaxTokensPerRollout: r.MaxTokensPerRollout,
	})
	if err != nil {
		return AgentResult{}, fmt.Errorf("cron agent %s: %w", job.JobID, err)
	}
	out, err := runOne(act.ctx, job, executionRecord(job, image), stage)
	return act.result(ctx, out, err)
}

// endpoint is the job's base URL and model, the runner's defaults standing
// in for those it leaves empty.
func (r *RolloutRunner) endpoint(job AgentJob) (base, model string) {
	base, model = job.BaseURL, job.Model
	if base == "" {
		base = r.DefaultBaseURL
	}
	if model == "" {
		model = r.DefaultModel
	}
	return base, model
}

// noEndpoint says what a job without an endpoint lacks and where each
// setting comes from: the job's own field (cron edit), else the runner's
// default and the variable it is read from.
func (r *RolloutRunner) noEndpoint(job AgentJob, base, model string) string {
	var missing, fix []string
	if base == "" {
		missing = append(missing, "base_url")
		fix = append(fix, "--base-url URL")
	}
	if model == "" {
		missing = append(missing, "model")
		fix = append(fix, "--model NAME")
	}
	var vars []string
	if base == "" && r.BaseURLEnv != "" {
		vars = append(vars, r.BaseURLEnv)
	}
	if model == "" && r.ModelEnv != "" {
		vars = append(vars, r.ModelEnv)
	}
	msg := fmt.Sprintf("agent job %s has no %s: give the job its own (cron edit %s %s)", job.JobID, strings.Join(missing, " and no "), job.JobID, strings.Join(fix, " "))
	if len(vars) > 0 {
		msg += fmt.Sprintf(", or set %s in the environment of cron tick, run and daemon", strings.Join(vars, " and "))
	}
	return msg
}

// apiKey is the job's API key: the value of its own variable when it names
// one (ok is false when that is unset or empty), else the runner's.
func (r *RolloutRunner) apiKey(job AgentJob) (key string, ok bool) {
	if job.APIKeyEnv == "" {
		return r.APIKey, true
	}
	getenv := r.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	key = getenv(job.APIKeyEnv)
	return key, key != ""
}

// clientMaker is NewClient, or llm.New streaming for model with the job's
// sampling parameters.
func (r *RolloutRunner) clientMaker(model string, sampling llm.Sampling) func(baseURL, apiKey string) (llm.Client, error) {
	if r.NewClient != nil {
		return r.NewClient
	}
	return func(u, key string) (llm.Client, error) {
		// Streamed, so that a long reply that keeps coming counts as
		// activity (each event resets the inactivity timeout).
		return llm.New(llm.Options{BaseURL: u, APIKey: key, Model: model, Stream: true, Sampling: sampling})
	}
}

// maxTurns is the job's turn cap, else the runner's, else 20.
func (r *RolloutRunner) maxTurns(job AgentJob) int {
	maxTurns := job.MaxTurns
	if maxTurns <= 0 {
		maxTurns = r.MaxTurns
	}
	if maxTurns <= 0 {
		maxTurns = 20
	}
	return maxTurns
}

// activity is an execution's inactivity watch: every LLM reply, streamed
// event and tool result counts as progress (touch); with a timeout, ctx is
// cancelled with errInactive once none came for that long. It also keeps
// what the execution was doing (the iteration, the last activity and how
// long each step took), so the timeout's error says where it stalled.
type activity struct {
	ctx         context.Context
	stop        func()
	last        atomic.Int64
	errInactive error // the sentinel the cause wraps

	mu    sync.Mutex
	steps activitySteps
}

// activitySteps is what an execution did, for the timeout's error.
type activitySteps struct {
	iteration int       // model calls started (iteration n = the n-th call)
	waiting   string    // what is in flight: "model reply", a tool call, or ""
	since     time.Time // when it started
	tools     []string  // the tool calls the last reply asked for
	lastDone  string    // the last activity that ended, and how long it took
}

// watchActivity starts the watch of one execution under ctx; a timeout of
// 0 means none. stop ends it.
func watchActivity(ctx context.Context, timeout time.Duration) *activity {
	a := &activity{}
	a.touch()
	actx, cancel := context.WithCancelCause(ctx)
	a.ctx, a.stop = actx, func() { cancel(nil) }
	a.errInactive = fmt.Errorf("no model reply or tool result for %s (inactivity timeout)", timeout)
	if timeout > 0 {
		go func() {
			t := time.NewTicker(minDur(timeout/4, time.Second))
			defer t.Stop()
			for {
				select {
				case <-actx.Done():
					return
				case <-t.C:
					if time.Since(time.Unix(0, a.last.Load())) > timeout {
						cancel(fmt.Errorf("%w: %s", a.errInactive, a.describe()))
						return
					}
				}
			}
		}()
	}
	return a
}

// touch records progress now.
func (a *activity) touch() { a.last.Store(time.Now().UnixNano()) }

// modelCall marks the start of a model call (the next iteration).
func (a *activity) modelCall() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.steps.iteration++
	a.steps.waiting, a.steps.since, a.steps.tools = "model reply", time.Now(), nil
}

// modelReply marks the end of a model call, with the tools its reply asks for.
func (a *activity) modelReply(resp llm.Response, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	took := time.Since(a.steps.since).Round(time.Millisecond)
	if err != nil {
		a.steps.lastDone = fmt.Sprintf("model call of iteration %d failed after %s", a.steps.iteration, took)
	} else {
		a.steps.lastDone = fmt.Sprintf("model reply of iteration %d (took %s)", a.steps.iteration, took)
	}
	a.steps.waiting, a.steps.tools = "", nil
	for _, tc := range resp.Message.ToolCalls {
		a.steps.tools = append(a.steps.tools, tc.Function.Name)
	}
}

// toolStart marks the start of a sandbox operation of a tool call.
func (a *activity) toolStart() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.steps.waiting, a.steps.since = a.toolName(), time.Now()
}

// toolEnd marks the end of a sandbox operation of a tool call.
func (a *activity) toolEnd() {
	a.mu.Lock()
	defer a.mu.Unlock()
	took := time.Since(a.steps.since).Round(time.Millisecond)
	a.steps.lastDone = fmt.Sprintf("%s of iteration %d (took %s)", a.toolName(), a.steps.iteration, took)
	a.steps.waiting = ""
}

// toolName names the tool call the sandbox is working for: the one the
// last reply asked for, or the list when it asked for several. Called
// with mu held.
func (a *activity) toolName() string {
	switch len(a.steps.tools) {
	case 0:
		return "tool call"
	case 1:
		return "tool call " + a.steps.tools[0]
	}
	return "tool calls " + strings.Join(a.steps.tools, ", ")
}

// describe says where the execution stalled: the iteration, what it was
// waiting for and since when, and the last activity with how long it took.
func (a *activity) describe() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.steps
	if st.iteration == 0 && st.waiting != "" {
		return fmt.Sprintf("waiting for the sandbox before the first model call for %s", time.Since(st.since).Round(time.Millisecond))
	}
	if st.iteration == 0 {
		return "before the first model call"
	}
	var parts []string
	if st.waiting != "" {
		parts = append(parts, fmt.Sprintf("waiting for the %s of iteration %d for %s", st.waiting, st.iteration, time.Since(st.since).Round(time.Millisecond)))
	} else if len(st.tools) > 0 {
		parts = append(parts, fmt.Sprintf("iteration %d asked for %s", st.iteration, a.toolName()))
	}
	if st.lastDone != "" {
		parts = append(parts, "last activity: "+st.lastDone)
	}
	return strings.Join(parts, "; ")
}

// result is the execution's result from the record the rollout made: an
// error after the watch or ctx (the wall-clock cap) ended the run is a
// timeout, any other error an infrastructure fault.
func (a *activity) result(ctx context.Context, out *schemas.Record, err error) (AgentResult, error) {
	switch {
	case err != nil && errors.Is(context.Cause(a.ctx), a.errInactive):
		return AgentResult{Outcome: schemas.OutcomeTimeout, Error: context.Cause(a.ctx).Error()}, nil
	case err != nil && ctx.Err() != nil:
		return AgentResult{Outcome: schemas.OutcomeTimeout, Error: fmt.Sprintf("wall-clock cap reached: %v", ctx.Err())}, nil
	case err != nil:
		return AgentResult{}, err
	}
	return AgentResult{Output: finalAnswer(out.Conversations), Outcome: out.Outcome, Error: out.Error}, nil
}

// startMCP is the MCP pre-flight of an execution: every server of the job's
// configuration started (or connected) and its tools listed before the
// first model call; one that fails ends the execution (fail), naming it
// with its stderr. Run-scoped servers live as long as the execution,
// rollout-scoped ones are started in its folder on first use. servers is
// nil when the job has no MCP configuration.
func startMCP(ctx context.Context, job AgentJob, driver sandbox.Driver) (servers *mcp.Manager, fail *AgentResult) {
	if job.MCP == nil {
		return nil, nil
	}
	// Beside a confined local sandbox the job's stdio servers are
	// confined too, as generate's are.
	if c, ok := driver.(interface{ Confined() bool }); ok && c.Confined() {
		k, err := mcp.NewConfinement(ctx, nil, "")
		if err != nil {
			return nil, &AgentResult{Outcome: schemas.OutcomeError, Error: fmt.Sprintf("cannot confine the job's MCP servers: %v", err)}
		}
		job.MCP.Confine(k)
	}
	servers, err := mcp.Start(ctx, job.MCP)
	if err != nil {
		return nil, &AgentResult{Outcome: schemas.OutcomeError, Error: err.Error()}
	}
	return servers, nil
}

// executionRecord is the one record of an execution: the job's prompt,
// workdir and toolsets (terminal when it names none) and its sandbox image.
func executionRecord(job AgentJob, image string) *schemas.Record {
	toolsets := job.Toolsets
	if len(toolsets) == 0 {
		toolsets = []string{"terminal"}
	}
	return &schemas.Record{Key: job.ExecutionID, Input: &schemas.InputRow{Prompt: job.Prompt, Cwd: job.Workdir, Toolsets: toolsets, Image: image}}
}

// runOne runs the execution's record through the mode skeleton every mode
// uses (pipeline.RunMode), into job.OutDir (a temporary folder, removed
// after, when it is ""), and returns the record the rollout stage made or
// the error it returned.
func runOne(ctx context.Context, job AgentJob, rec *schemas.Record, stage pipeline.Stage) (*schemas.Record, error) {
	dir := job.OutDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "hermes-pipe-cron-")
		if err != nil {
			return nil, fmt.Errorf("cron agent %s: %w", job.JobID, err)
		}
		defer os.RemoveAll(tmp)
		dir = filepath.Join(tmp, "run")
	}
	capt := &captureStage{Stage: stage}
	_, err := pipeline.RunMode(ctx, pipeline.RunConfig{Out: dir, Mode: pipeline.ModeResume, Workers: 1,
		Record: map[string]any{"job_id": job.JobID, "execution_id": job.ExecutionID, "scheduled_at": job.ScheduledAt}},
		pipeline.ModeSpec{
			Kind: "cron",
			Open: func(context.Context, *pipeline.Output) (pipeline.Source, []pipeline.Stage, error) {
				return pipeline.SliceSource([]*schemas.Record{rec}), []pipeline.Stage{capt}, nil
			},
		})
	if capt.err != nil {
		return nil, capt.err
	}
	if err != nil {
		return nil, fmt.Errorf("cron agent %s: %w", job.JobID, err)
	}
	if capt.out == nil {
		return nil, fmt.Errorf("cron agent %s: the rollout returned no record", job.JobID)
	}
	return capt.out, nil
}

// captureStage runs the rollout stage and keeps what it returned for the one
// record of an execution.
type captureStage struct {
	pipeline.Stage
	out *schemas.Record
	err error
}

// TimesRecords implements pipeline.RecordTimer: the execution's record
// carries the rollout's timings.
func (c *captureStage) TimesRecords() {}

// Close passes the run's end on to the rollout stage, which waits there for
// its sandbox session, closed in the background, to be closed.
func (c *captureStage) Close(ctx context.Context) error {
	if cl, ok := c.Stage.(pipeline.Closer); ok {
		return cl.Close(ctx)
	}
	return nil
}

func (c *captureStage) Process(ctx context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
	out, err := c.Stage.Process(ctx, rec)
	c.err = err
	if len(out) > 0 {
		c.out = out[0]
	}
	return out, err
}

func minDur(a, b time.Duration) time.Duration {
	if a < b && a > 0 {
		return a
	}
	return b
}

// finalAnswer is the last gpt turn without its <think> block.
func finalAnswer(turns []schemas.Turn) string {
	for i := len(turns) - 1; i >= 0; i-- {
		if turns[i].From != "gpt" {
			continue
		}
		v := turns[i].Value
		if strings.HasPrefix(v, "<think>") {
			if j := strings.Index(v, "</think>"); j >= 0 {
				v = v[j+len("</think>"):]
			}
		}
		return strings.TrimSpace(v)
	}
	return ""
}

type activityClient struct {
	llm.Client
	act *activity
}

func (a activityClient) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	req.OnEvent = a.act.touch
	a.act.modelCall()
	resp, err := a.Client.Chat(ctx, req)
	a.act.modelReply(resp, err)
	a.act.touch()
	return resp, err
}

type activityDriver struct {
	sandbox.Driver
	act *activity
}

func (a activityDriver) Open(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	// The session opens at the rollout's first tool call: opening it is
	// that call's activity (a stalled open is "waiting for the tool
	// call"), but not a step of its own, so the last finished step stays
	// what it was (the model's reply) until the call's command ends.
	a.act.toolStart()
	defer a.act.touch()
	s, err := a.Driver.Open(ctx, spec)
	if err != nil {
		return nil, err
	}
	return activitySession{s, a.act}, nil
}

type activitySession struct {
	sandbox.Session
	act *activity
}

// op brackets one sandbox operation of a tool call: its start and end
// are the execution's activity.
func (a activitySession) op() func() {
	a.act.toolStart()
	return func() {
		a.act.toolEnd()
		a.act.touch()
	}
}

func (a activitySession) Exec(ctx context.Context, cmd sandbox.Cmd) (sandbox.Result, error) {
	defer a.op()()
	return a.Session.Exec(ctx, cmd)
}

// HostDir is the session's folder on this machine when it has one (the
// local driver), so the rollout gives it to MCP servers as ${workdir}.
func (a activitySession) HostDir() string {
	if h, ok := a.Session.(interface{ HostDir() string }); ok {
		return h.HostDir()
	}
	return ""
}

// ReadRange, Stat and WriteFile count as activity too: a rollout busy with
// file tools is making progress.
func (a activitySession) ReadRange(ctx context.Context, path string, off int64, n int) ([]byte, int64, error) {
	defer a.op()()
	return a.Session.ReadRange(ctx, path, off, n)
}

func (a activitySession) Stat(ctx context.Context, path string) (sandbox.FileInfo, error) {
	defer a.op()()
	return a.Session.Stat(ctx, path)
}

func (a activitySession) WriteFile(ctx context.Context, path string, data []byte, perm fs.FileMode) error {
	defer a.op()()
	return a.Session.WriteFile(ctx, path, data, perm)
}
