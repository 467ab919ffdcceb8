package swe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/cost"
	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout"
)

// Sentinel is the line that submits the agent's work when it is the first
// line of a command's output and the command exits 0.
const Sentinel = "MINI_SWE_AGENT_FINAL_OUTPUT"

// Exit statuses of the agent loop, recorded as extra.exit_status. Only
// ExitSubmitted comes from the sentinel; the others are the rollout's own
// outcomes (completed: replied without a tool call; max_turns; partial:
// repeated invalid tool calls; timeout: the per-task time limit passed while
// a command ran).
const ExitSubmitted = "submitted"

// Submitted reports whether a terminal command's result submits the task:
// its stdout, leading blank space aside, begins with the line
// MINI_SWE_AGENT_FINAL_OUTPUT and it exited 0. A sentinel printed later in
// the output (by cat, grep or a test) does not count.
func Submitted(res sandbox.Result) bool {
	if res.ExitCode != 0 || res.TimedOut {
		return false
	}
	first, _, _ := strings.Cut(strings.TrimLeft(res.Stdout, " \t\r\n"), "\n")
	return strings.TrimRight(first, " \t\r") == Sentinel
}

// StageOptions configure the SWE stage. Rollout must carry the LLM client,
// the sandbox driver and the model; Grade.Driver defaults to Rollout.Driver.
type StageOptions struct {
	Rollout rollout.Options
	Grade   GradeOptions
	// Tasks are the run's tasks; records are matched to them by Key.
	Tasks []Task
}

// Stage runs one task: the agent loop in the task's image, the patch taken
// with git in the agent's session, then GradePatch in a fresh session. It is
// safe for concurrent use by the worker pool.
type Stage struct {
	o     StageOptions
	tasks map[string]Task
	// budget is the run's spending cap, handed on to each task's rollout.
	budget *cost.Budget
}

var (
	_ pipeline.Stage      = (*Stage)(nil)
	_ pipeline.BudgetUser = (*Stage)(nil)
)

// NewStage validates opts and returns the stage. It does no I/O. The
// rollout's toolsets are made to hold terminal (see withTerminal).
func NewStage(o StageOptions) (*Stage, error) {
	o.Rollout.Toolsets, o.Rollout.Distribution = withTerminal(o.Rollout.Toolsets, o.Rollout.Distribution)
	if _, err := rollout.New(o.Rollout); err != nil {
		return nil, fmt.Errorf("swe: %w", err)
	}
	if o.Grade.Driver == nil {
		o.Grade.Driver = o.Rollout.Driver
	}
	if o.Grade.RunID == "" {
		o.Grade.RunID = o.Rollout.RunID
	}
	if o.Rollout.SystemPrompt == "" {
		o.Rollout.SystemPrompt = SystemPrompt
	}
	s := &Stage{o: o, tasks: make(map[string]Task, len(o.Tasks))}
	for _, t := range o.Tasks {
		s.tasks[t.Key] = t
	}
	return s, nil
}

// Name implements pipeline.Stage.
func (s *Stage) Name() string { return "swe" }

// TimesRecords implements pipeline.RecordTimer: records carry timings (the
// rollout's, the grading as grader_ms).
func (s *Stage) TimesRecords() {}

// UseBudget implements pipeline.BudgetUser: each task's rollout checks and
// charges b.
func (s *Stage) UseBudget(b *cost.Budget) { s.budget = b }

// withTerminal returns the toolsets of a SWE rollout: terminal alone when
// none are given, terminal added to fixed toolsets that lack it, and
// terminal in every draw of a distribution. The agent submits through a
// terminal command, so no task may be without it.
func withTerminal(fixed []string, dist rollout.Distribution) ([]string, rollout.Distribution) {
	switch {
	case len(fixed) > 0:
		if !slices.Contains(fixed, "terminal") {
			fixed = append([]string{"terminal"}, fixed...)
		}
		return fixed, nil
	case len(dist) > 0:
		d := make(rollout.Distribution, len(dist)+1)
		for k, v := range dist {
			d[k] = v
		}
		d["terminal"] = 1
		return nil, d
	}
	return []string{"terminal"}, nil
}

// Record builds the input record of task t, as the run's source yields it;
// clone as in GradeOptions.
func Record(t Task, clone bool) *schemas.Record {
	prompt := t.Prompt()
	if clone {
		prompt = strings.TrimRight(t.ProblemStatement, "\n") + "\n\nThe repository is checked out in the current working folder."
	}
	meta, _ := json.Marshal(map[string]string{"instance_id": t.InstanceID, "repo": t.Repo, "base_commit": t.BaseCommit, "image": t.Image})
	return &schemas.Record{
		Key:         t.Key,
		ID:          t.InstanceID,
		PromptIndex: t.Line - 1,
		Metadata:    meta,
		Input: &schemas.InputRow{
			Line:   t.Line,
			Index:  t.Line - 1,
			Prompt: prompt,
			ID:     t.InstanceID,
			Image:  t.Image,
			Cwd:    sessionCwd(t, clone),
			// No toolsets: the stage's options give them (fixed, or drawn
			// per task from its distribution by the record's key).
		},
	}
}

// Process runs and grades one task. It blocks for the agent loop and the
// grading. Every failure is recorded on the record: the model's results as
// resolved / unresolved / empty_patch, infrastructure faults as a retryable
// outcome. The error return is used only when ctx was cancelled (hard stop);
// the record must then not be committed.
func (s *Stage) Process(ctx context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
	t, ok := s.tasks[rec.Key]
	if !ok {
		return nil, fmt.Errorf("swe %s: no task with this key", rec.Key)
	}
	start := time.Now()
	h := &held{task: t, clone: s.o.Grade.Clone}
	defer h.close(ctx)
	// The agent's session closes here, after its patch is taken: its time
	// is the record's sandbox_close_ms; taking the patch and grading it
	// are its grader_ms.
	closeHeld := func() {
		t0 := time.Now()
		h.close(ctx)
		if rec.Timings != nil {
			rec.Timings.SandboxCloseMS += time.Since(t0).Milliseconds()
		}
	}
	spy := &llmSpy{Client: s.o.Rollout.Client}
	ro := s.o.Rollout
	ro.Client = spy
	ro.Driver = &holdDriver{Driver: s.o.Rollout.Driver, h: h}
	var (
		finalMu sync.Mutex
		final   *string
	)
	ro.OnTerminal = func(_ string, res sandbox.Result) (schemas.Outcome, bool) {
		if !Submitted(res) {
			return ExitSubmitted, false
		}
		r := FinalResult(res.Stdout)
		finalMu.Lock()
		final = &r
		finalMu.Unlock()
		return ExitSubmitted, true
	}
	st, err := rollout.New(ro)
	if err != nil {
		return nil, fmt.Errorf("swe %s: %w", t.InstanceID, err)
	}
	st.UseBudget(s.budget)
	outs, err := st.Process(ctx, rec)
	if err != nil {
		return nil, err
	}
	if len(outs) != 1 || outs[0] != rec {
		return nil, fmt.Errorf("swe %s: the rollout returned %d records", t.InstanceID, len(outs))
	}
	ex := extra{InstanceID: t.InstanceID, ExitStatus: string(rec.Outcome), AgentMS: time.Since(start).Milliseconds()}
	finalMu.Lock()
	ex.FinalResult = final
	finalMu.Unlock()
	defer func() { rec.Extra = ex.encode(rec.Extra) }()
	agentErr := rec.Error

	switch rec.Outcome {
	case schemas.OutcomeAPIError, schemas.OutcomeSandboxError, schemas.OutcomeInternal, schemas.OutcomeBudgetPaused:
		ex.ExitStatus = ""
		return []*schemas.Record{rec}, nil // infrastructure or the run's budget: retried by --resume
	case schemas.OutcomeBudgetExceeded:
		// The task's own cap ended the agent: unresolved, not graded, and
		// the report says why.
		closeHeld()
		rec.Outcome, rec.Error = OutcomeUnresolved, "the agent was stopped by its budget: "+agentErr
		rec.DurationMS = time.Since(start).Milliseconds()
		return []*schemas.Record{rec}, nil
	case schemas.OutcomeTimeout:
		if spy.failed() {
			// The time limit passed while the model endpoint was failing:
			// the endpoint's fault, not the model's.
			rec.Outcome = schemas.OutcomeAPIError
			ex.ExitStatus = ""
			return []*schemas.Record{rec}, nil
		}
	}

	if h.noGit() {
		// A simple task in an image without git (Hermes' default
		// python:3.11-slim): there is no patch, and the submission alone
		// is the verdict.
		closeHeld()
		g := Grade{GradedBy: "submission", Outcome: OutcomeResolved}
		if ex.ExitStatus != ExitSubmitted {
			g.Outcome, g.Reason = OutcomeUnresolved, "the agent did not submit (exit status "+ex.ExitStatus+")"
		}
		ex.Grade = &g
		gr := g.Record(0)
		rec.Grade, rec.Reward = &gr, gr.Value
		rec.Outcome, rec.Error = g.Outcome, g.Reason
		if g.Outcome != OutcomeResolved && agentErr != "" {
			rec.Error = strings.TrimPrefix(rec.Error+"; agent: "+agentErr, "; ")
		}
		rec.DurationMS = time.Since(start).Milliseconds()
		return []*schemas.Record{rec}, nil
	}

	t0 := time.Now()
	pctx, cancel := context.WithTimeout(ctx, 2*helperTime)
	patch, err := h.patch(pctx)
	cancel()
	ex.PatchMS = time.Since(t0).Milliseconds()
	closeHeld()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("swe %s: %w", t.InstanceID, ctx.Err())
	}
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		// git ran and failed: the agent broke its repository.
		rec.Outcome, rec.Error = OutcomeUnresolved, fmt.Sprintf("cannot take the agent's patch: %v", err)
		return []*schemas.Record{rec}, nil
	case err != nil:
		rec.Outcome, rec.Error = schemas.OutcomeSandboxError, fmt.Sprintf("take the agent's patch: %v", err)
		return []*schemas.Record{rec}, nil
	}
	ex.Patch = &patch

	g := GradePatch(ctx, s.o.Grade, t, patch)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("swe %s: %w", t.InstanceID, ctx.Err())
	}
	if g.GradedBy == "submission" && g.Outcome == OutcomeResolved && ex.ExitStatus != ExitSubmitted {
		g.Outcome, g.Reason = OutcomeUnresolved, "the agent did not submit (exit status "+ex.ExitStatus+")"
	}
	ex.Grade = &g
	ex.HarnessMS = ex.PatchMS + g.TotalMS
	gr := g.Record(g.TotalMS)
	rec.Grade, rec.Reward = &gr, gr.Value
	if rec.Timings != nil {
		rec.Timings.GraderMS = ex.HarnessMS
	}
	rec.Outcome = g.Outcome
	rec.Error = g.Reason
	if g.Outcome != OutcomeResolved && agentErr != "" {
		rec.Error = strings.TrimPrefix(rec.Error+"; agent: "+agentErr, "; ")
	}
	rec.DurationMS = time.Since(start).Milliseconds()
	return []*schemas.Record{rec}, nil
}

// FinalResult is the agent's final result in a submitting command's output:
// the text after the sentinel line, trimmed.
func FinalResult(stdout string) string {
	_, rest, _ := strings.Cut(strings.TrimLeft(stdout, " \t\r\n"), "\n")
	return strings.TrimSpace(rest)
}

// extra is what the SWE stage adds to a record, under record.extra.
type extra struct {
	InstanceID string `json:"instance_id"`
	ExitStatus string `json:"exit_status,omitempty"`
	// FinalResult is the text after the sentinel line when the agent
	// submitted (Hermes' runner asks for the result there).
	FinalResult *string `json:"final_result,omitempty"`
	Patch       *string `json:"model_patch,omitempty"`
	Grade       *Grade  `json:"grade,omitempty"`
	AgentMS     int64   `json:"agent_ms"`
	PatchMS     int64   `json:"patch_ms,omitempty"`
	HarnessMS   int64   `json:"harness_ms,omitempty"`
}

func (e extra) encode(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	put := func(k string, v any) {
		if b, err := json.Marshal(v); err == nil {
			m[k] = b
		}
	}
	put("instance_id", e.InstanceID)
	if e.ExitStatus != "" {
		put("exit_status", e.ExitStatus)
	}
	if e.FinalResult != nil {
		put("final_result", *e.FinalResult)
	}
	if e.Patch != nil {
		put("model_patch", *e.Patch)
	}
	if e.Grade != nil {
		put("grade", e.Grade)
	}
	put("agent_ms", e.AgentMS)
	if e.Grade != nil {
		put("patch_ms", e.PatchMS)
		put("harness_ms", e.HarnessMS)
	}
	return m
}

// llmSpy remembers whether the last model call failed, so a time limit that
// passes during endpoint retries is told apart from the model's own slowness.
type llmSpy struct {
	llm.Client
	mu      sync.Mutex
	lastErr error
}

func (c *llmSpy) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	resp, err := c.Client.Chat(ctx, req)
	c.mu.Lock()
	c.lastErr = err
	c.mu.Unlock()
	return resp, err
}

func (c *llmSpy) failed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr != nil
}

// held keeps the agent's session open after the rollout ends, so the patch
// is taken even when the time limit ended the loop, and records where the
// repository is and its starting commit.
type held struct {
	task  Task
	clone bool

	mu   sync.Mutex
	sess sandbox.Session
	err  error
	root string
	base string
	done bool
}

// holdDriver opens sessions through the real driver, finds the repository
// and its starting commit, and returns a session whose Close the rollout
// cannot use: held.close ends it.
type holdDriver struct {
	sandbox.Driver
	h *held
}

func (d *holdDriver) Open(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	spec.ReadOnly = append(spec.ReadOnly, cloneSource(d.h.task, d.h.clone)...)
	spec.Env = withEnv(spec.Env, d.h.task.Environment)
	sess, err := d.Driver.Open(ctx, spec)
	if err == nil {
		var res sandbox.Result
		prep := ensureRepo + ` && cd "$(git rev-parse --show-toplevel)" && pwd && git rev-parse HEAD`
		if d.h.clone {
			prep = cloneScript(d.h.task) + " && " + prep
		}
		if d.h.task.Graded() == "submission" {
			// Judged by the submission alone: an image without git is fine.
			prep = `if ! command -v git >/dev/null 2>&1; then pwd; echo ` + noGitMark + `; exit 0; fi; ` + prep
		}
		res, err = run(ctx, sess, "find the repository", prep, helperTime)
		if err == nil {
			lines := strings.Fields(res.Stdout)
			if len(lines) < 2 {
				err = fmt.Errorf("find the repository: unexpected output %q", tail(res.Stdout, 200))
			} else {
				d.h.mu.Lock()
				d.h.root, d.h.base = lines[len(lines)-2], lines[len(lines)-1]
				d.h.mu.Unlock()
			}
		}
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			_ = sess.Close(cctx)
			cancel()
			sess = nil
		}
	}
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	d.h.sess, d.h.err = sess, err
	if err != nil {
		return nil, err
	}
	return keepOpen{Session: sess, h: d.h}, nil
}

// noGitMark stands for the base commit of a session without git.
const noGitMark = "NO-GIT"

// noGit reports whether the agent's session has no git (a simple task
// judged by its submission alone).
func (h *held) noGit() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err == nil && h.sess != nil && h.base == noGitMark
}

// withEnv returns base with the task's variables added (the task's win).
func withEnv(base, task map[string]string) map[string]string {
	if len(task) == 0 {
		return base
	}
	out := make(map[string]string, len(base)+len(task))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range task {
		out[k] = v
	}
	return out
}

// keepOpen hides Close from the rollout.
type keepOpen struct {
	sandbox.Session
	h *held
}

func (keepOpen) Close(context.Context) error { return nil }

// HostDir is the repository's folder when the session has a folder on this
// machine (the local driver, whose confined commands see it at the same
// path), "" otherwise: the rollout gives it to MCP servers as ${workdir},
// so a filesystem server works on the files the agent edits.
func (k keepOpen) HostDir() string {
	hd, ok := k.Session.(interface{ HostDir() string })
	if !ok || hd.HostDir() == "" {
		return ""
	}
	k.h.mu.Lock()
	defer k.h.mu.Unlock()
	if k.h.root == "" {
		return hd.HostDir()
	}
	return k.h.root
}

// patch takes `git diff` of the working tree (new files included) against
// the base commit in the agent's session.
func (h *held) patch(ctx context.Context) (string, error) {
	h.mu.Lock()
	sess, err, root, base := h.sess, h.err, h.root, h.base
	h.mu.Unlock()
	if err != nil {
		return "", fmt.Errorf("the agent's session did not open: %w", err)
	}
	if sess == nil {
		// The session opens at the agent's first command: an agent that
		// ran none changed nothing.
		return "", nil
	}
	if h.task.BaseCommit != "" {
		base = h.task.BaseCommit
	}
	const out = "/tmp/.hermes-swe-agent.patch"
	prefix := "cd " + q(root) + " && git add -A && git diff --cached --binary --no-color --no-ext-diff " + q(base) + " > " + out
	data, err := readFile(ctx, sess, prefix, out)
	if err != nil {
		return "", err
	}
	return string(data), nil
}

// close ends the agent's session; it is safe to call more than once.
func (h *held) close(ctx context.Context) {
	h.mu.Lock()
	sess, done := h.sess, h.done
	h.done = true
	h.mu.Unlock()
	if sess == nil || done {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = sess.Close(cctx)
}
