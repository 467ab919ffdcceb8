package rollout

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/cost"
	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/grade"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout/mcp"
)

// Defaults used when an Options field is zero.
const (
	DefaultMaxTurns       = 10
	DefaultCommandTimeout = 60 * time.Second
	DefaultMaxBadCalls    = 3
)

// Options configures the rollout stage. The zero value of every field except
// Client, Model and Driver means "default".
type Options struct {
	Client llm.Client
	Model  string
	Driver sandbox.Driver
	// Ready, when set, is the driver's pre-flight, left to the run: the
	// stage's Preflight calls it before the first record, and its error
	// stops the run. nil = the driver was checked already.
	Ready func(ctx context.Context) error
	RunID string

	MaxTurns       int           // assistant turns per rollout; 0 = DefaultMaxTurns
	Timeout        time.Duration // wall-clock deadline per rollout; 0 = none
	CommandTimeout time.Duration // default per-command timeout; 0 = DefaultCommandTimeout
	MaxBadCalls    int           // consecutive bad tool calls that end a rollout as partial; 0 = 3
	MaxOutput      int           // bytes of command output kept per stream; 0 = driver default

	// Toolsets used when a row names none. When empty, Distribution is sampled
	// per rollout (seeded by Seed and the record key).
	Toolsets     []string
	Distribution Distribution
	Seed         int64

	// MCP holds the run's MCP servers (already checked by mcp.Start); nil =
	// none. Their toolsets are "mcp-<server>".
	MCP *mcp.Manager
	// SkillsDir is the folder the skills toolset reads (<dir>/<name>/SKILL.md
	// or <dir>/<category>/<name>/SKILL.md); "" = the toolset is unavailable.
	SkillsDir string
	// PlanSchedule reads a schedule given to the cronjob toolset (its
	// display form and first occurrence after now); nil = the toolset is
	// unavailable. The command layer binds cron.PlanSchedule.
	PlanSchedule func(text string, now time.Time) (PlannedSchedule, error)
	// GuardCronPrompt checks a prompt the cronjob toolset is given (create,
	// update) as `cron add` checks one; a refusal is answered as Hermes
	// answers a blocked prompt. nil = none. The command layer binds
	// cron.GuardPrompt.
	GuardCronPrompt func(prompt string) error

	// Price of Model's tokens; nil = unknown: records get cost_usd null.
	Price *cost.Price

	// Caps of one rollout (0 = none): before each model call after the
	// first, a rollout whose calls so far cost MaxCostPerRollout US dollars
	// (needs Price) or used MaxTokensPerRollout prompt plus completion
	// tokens ends with the final outcome budget_exceeded, its trajectory
	// kept. The overshoot is at most one model call.
	MaxCostPerRollout   float64
	MaxTokensPerRollout int64

	// Logprobs keeps each reply's token logprobs (the client must ask for
	// them: llm.Sampling.Logprobs) in the record's Logprobs, one entry per
	// assistant turn, placed at its gpt turn of the conversations; a reply
	// without them keeps nothing and adds one to LogprobsMissing (when set).
	Logprobs        bool
	LogprobsMissing *atomic.Int64

	SystemPrompt string   // sent to the model as a system message, not recorded (as Hermes)
	MaxTokens    int      // per completion; 0 = not sent
	Temperature  *float64 // nil = not sent

	// KeepWorkspace, when set, is called once the agent's turns are over
	// and the rollout graded, before the session closes, with the record
	// and its still-open session (generate --keep-workspace archives the
	// working folder and records it in rec.Extra). It is not called when
	// the run was cancelled (the record is not committed then). It must
	// record its own failures.
	KeepWorkspace func(ctx context.Context, rec *schemas.Record, sess sandbox.Session)
	// Grader grades each rollout the agent ended (see graded) before its
	// session closes, into the record's reward and grade; the zero value
	// grades a row with verify by cmd and a row with answer by number or
	// exact (grade.Grader), and leaves other rows ungraded.
	Grader grade.Grader

	// OnTerminal, when set, sees every terminal command's raw result and may
	// end the rollout with the given outcome (SWE mode's sentinel check).
	OnTerminal func(command string, res sandbox.Result) (schemas.Outcome, bool)

	Now func() time.Time // clock seam; nil = time.Now
}

// Stage is the rollout stage. It is safe for concurrent use by the worker pool.
type Stage struct {
	o         Options
	statTools []string // the tools every record's tool_stats lists
	// budget is the run's spending cap (nil = none), set by UseBudget
	// before the first Process.
	budget *cost.Budget
	// completion is the largest completion a reply had (projector).
	completion atomic.Int64
	// closer closes the rollouts' sessions off their path; Close waits
	// for it.
	closer *closer
}

// New validates opts and returns the stage. It does no I/O.
func New(opts Options) (*Stage, error) {
	if opts.Client == nil {
		return nil, errors.New("rollout: no LLM client")
	}
	if opts.Driver == nil {
		return nil, errors.New("rollout: no sandbox driver")
	}
	if opts.Model == "" {
		return nil, errors.New("rollout: no model name")
	}
	if opts.MaxCostPerRollout < 0 || opts.MaxTokensPerRollout < 0 {
		return nil, errors.New("rollout: per-rollout caps must not be negative")
	}
	if opts.MaxCostPerRollout > 0 && opts.Price == nil {
		return nil, errors.New("rollout: a cost cap per rollout needs the model's price")
	}
	if err := opts.Grader.Check(); err != nil {
		return nil, fmt.Errorf("rollout: %w", err)
	}
	if opts.MaxTurns <= 0 {
		opts.MaxTurns = DefaultMaxTurns
	}
	if opts.CommandTimeout <= 0 {
		opts.CommandTimeout = DefaultCommandTimeout
	}
	if opts.MaxBadCalls <= 0 {
		opts.MaxBadCalls = DefaultMaxBadCalls
	}
	if len(opts.Toolsets) == 0 && len(opts.Distribution) == 0 {
		opts.Distribution = Distributions["default"]
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	st := &Stage{o: opts, closer: newCloser()}
	st.statTools = st.statToolNames()
	return st, nil
}

// Name implements pipeline.Stage.
func (s *Stage) Name() string { return "rollout" }

// Preflight is the stage's pipeline.Preflighter: it calls Options.Ready.
// It blocks while the driver checks itself (for the local driver, until
// its confinement probe has finished).
func (s *Stage) Preflight(ctx context.Context) error {
	if s.o.Ready == nil {
		return nil
	}
	return s.o.Ready(ctx)
}

// Close implements pipeline.Closer: it blocks until the sandbox sessions
// of finished rollouts, closed in the background, are closed, or ctx ends.
// The runtime calls it once every record has left the stages, while the
// last ones are committed. It first closes the client's idle connections
// to the endpoint (when the client can: llm.New's): the run's model calls
// are over, and a process ending with hundreds of them open spends some
// ms of its exit closing them.
func (s *Stage) Close(ctx context.Context) error {
	if c, ok := s.o.Client.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	return s.closer.wait(ctx)
}

// TimesRecords implements pipeline.RecordTimer: records carry timings.
func (s *Stage) TimesRecords() {}

// UseBudget implements pipeline.BudgetUser: every model call is checked
// against b first and charged to it once it returns.
func (s *Stage) UseBudget(b *cost.Budget) { s.budget = b }

// Process runs one agent rollout for rec (whose Input must be set) and returns
// it filled. It blocks for the whole rollout: LLM calls and tool executions.
// Every failure of the model, the endpoint or the sandbox is recorded on the
// record as an outcome; the error return is used only when ctx itself was
// cancelled (hard stop), in which case the record must not be committed.
func (s *Stage) Process(ctx context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
	if rec.Input == nil {
		return nil, fmt.Errorf("rollout %s: record has no input row", rec.Key)
	}
	start := s.o.Now()
	rctx := ctx
	if s.o.Timeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, s.o.Timeout)
		defer cancel()
	}
	toolsets := rec.Input.Toolsets
	if len(toolsets) == 0 {
		toolsets = s.o.Toolsets
	}
	if len(toolsets) == 0 {
		toolsets = s.o.Distribution.Sample(s.o.Seed, rec.Key)
	}
	tools, terr := s.toolsFor(toolsets)
	var spent spent
	defer func() { spent.put(rec) }()
	if terr != nil {
		rec.ToolsetsUsed, rec.Model = toolsets, s.o.Model
		rec.Outcome, rec.Error = schemas.OutcomeError, terr.Error()
		rec.ToolStats, rec.ToolErrorCounts = schemas.NormalizeToolStats(nil, nil, s.statTools)
		return []*schemas.Record{rec}, nil
	}
	allowed := map[string]bool{}
	for _, t := range tools {
		allowed[t.Function.Name] = true
	}
	rec.ToolsetsUsed = toolsets
	rec.Model = s.o.Model

	// The system prompt is sent to the model but, as in Hermes, not recorded:
	// ShareGPT conversion skips leading system messages.
	var messages []schemas.Message
	if s.o.SystemPrompt != "" {
		messages = append(messages, schemas.Message{Role: "system", Content: s.o.SystemPrompt})
	}
	messages = append(messages, schemas.Message{Role: "user", Content: rec.Input.Prompt})
	outcome, errMsg := s.loop(ctx, rctx, rec, tools, allowed, &messages, &spent)
	if ctx.Err() != nil {
		if !errors.Is(context.Cause(ctx), cost.ErrBudget) {
			return nil, fmt.Errorf("rollout %s: %w", rec.Key, ctx.Err())
		}
		// The run's budget was reached and its grace passed: keep what was
		// done, committed with its spend, for a later --resume.
		outcome, errMsg = schemas.OutcomeBudgetPaused, "cancelled: the run's --max-cost was reached and --grace passed; "+errMsg
		rec.Grade, rec.Reward = nil, nil // a grader cut by the stop judged nothing; --resume grades the rerun
	}
	s.fill(rec, outcome, errMsg, messages, tools)
	rec.DurationMS = s.o.Now().Sub(start).Milliseconds()
	return []*schemas.Record{rec}, nil
}

// fill sets what a rollout's end gives rec: outcome, error, trajectory, tool
// and reasoning statistics, cost.
func (s *Stage) fill(rec *schemas.Record, outcome schemas.Outcome, errMsg string, messages []schemas.Message, tools []schemas.Tool) {
	rec.Outcome = outcome
	rec.Error = errMsg
	rec.Completed = outcome == schemas.OutcomeCompleted
	rec.Partial = outcome == schemas.OutcomePartial
	rec.Conversations = schemas.ToShareGPT(messages, tools)
	alignLogprobs(rec, messages)
	// Every tool hermes-pipe knows appears with zero counts when unused, as
	// Hermes' batch runner fills every possible tool.
	stats, errs := schemas.ToolStatsOf(messages)
	rec.ToolStats, rec.ToolErrorCounts = schemas.NormalizeToolStats(stats, errs, s.statTools)
	rec.ReasoningStats = schemas.ReasoningStatsOf(messages)
	if s.o.Price != nil {
		c := s.o.Price.Cost(rec.Usage, false)
		rec.CostUSD = &c
	}
}

// loop runs the agent turns and returns the outcome and error text.
func (s *Stage) loop(ctx, rctx context.Context, rec *schemas.Record, tools []schemas.Tool, allowed map[string]bool,
	messages *[]schemas.Message, spent *spent) (schemas.Outcome, string) {
	failed := func(err error, base schemas.Outcome) (schemas.Outcome, string) {
		if rctx.Err() != nil && ctx.Err() == nil {
			return schemas.OutcomeTimeout, fmt.Sprintf("rollout deadline of %s passed: %v", s.o.Timeout, err)
		}
		return base, err.Error()
	}
	// The session opens at its first use (a tool that needs the sandbox);
	// an open failure surfaces there as a sandbox_error.
	sess := newLazySession(s.o.Driver, sandbox.Spec{
		RunID:     s.o.RunID,
		RolloutID: rec.Key,
		Image:     rec.Input.Image,
		Cwd:       rec.Input.Cwd,
		Timeout:   s.o.CommandTimeout,
		MaxOutput: s.o.MaxOutput,
	}, s.o.Now)
	// The todo list and MCP servers of this rollout; its servers stop
	// before its sandbox closes, and the sandbox closes in the background
	// (Stage.Close waits for it).
	rt := s.newRolloutTools(sess, spent)
	defer func() {
		t0 := s.o.Now()
		rt.close()
		s.closer.close(ctx, sess.take())
		spent.close += s.o.Now().Sub(t0)
		spent.start = sess.waited()
	}()

	outcome, errMsg := s.turns(rctx, rt, rec, tools, allowed, messages, failed)
	// Graded in the agent's own session, before it closes; its own
	// timeout, not the rollout's deadline, bounds the grader.
	w0 := sess.waited()
	s.grade(ctx, rec, sess, outcome, errMsg, *messages, tools)
	if w := sess.waited() - w0; w > 0 && rec.Timings != nil {
		// A grader's command that opened the session: the open is
		// sandbox_start's, not grader_ms's.
		rec.Timings.GraderMS = max(0, rec.Timings.GraderMS-w.Milliseconds())
	}
	if s.o.KeepWorkspace != nil && ctx.Err() == nil {
		s.o.KeepWorkspace(ctx, rec, sess)
	}
	return outcome, errMsg
}

// turns runs the agent's turns in rt's session with rt's tool state.
func (s *Stage) turns(rctx context.Context, rt *rolloutTools, rec *schemas.Record, tools []schemas.Tool, allowed map[string]bool,
	messages *[]schemas.Message, failed func(error, schemas.Outcome) (schemas.Outcome, string)) (schemas.Outcome, string) {
	bad := 0
	budget := s.budget
	var proj *projector
	if s.o.Price != nil && budget != nil {
		proj = s.newProjector(tools)
	}
	for turn := 0; turn < s.o.MaxTurns; turn++ {
		if err := budget.Allow(); err != nil {
			return schemas.OutcomeBudgetPaused, fmt.Sprintf("stopped before model call %d: %v (--resume with a higher --max-cost runs it again)", turn+1, err)
		}
		if why := s.overCap(rec); why != "" {
			return schemas.OutcomeBudgetExceeded, fmt.Sprintf("stopped before model call %d: %s", turn+1, why)
		}
		// A priced call's projected cost is reserved in the spend journal
		// before it goes out, and refused when it does not fit under the
		// run's cap.
		var res cost.Reservation
		if proj != nil {
			r, err := budget.Begin(rctx, rec.Key, rec.APICalls+1, proj.projected(*messages))
			switch {
			case errors.Is(err, cost.ErrBudget):
				return schemas.OutcomeBudgetPaused, fmt.Sprintf("stopped before model call %d: %v (--resume with a higher --max-cost runs it again)", turn+1, err)
			case err != nil: // the rollout's end while waiting, or the spend journal
				return failed(fmt.Errorf("llm call %d: %w", turn+1, err), schemas.OutcomeAPIError)
			}
			res = r
		}

		t0 := s.o.Now()
		resp, err := s.o.Client.Chat(rctx, llm.Request{Model: s.o.Model, Messages: *messages, Tools: tools,
			MaxTokens: s.o.MaxTokens, Temperature: s.o.Temperature})
		rt.spent.model += s.o.Now().Sub(t0)
		rec.APICalls++
		if err != nil {
			// A failed call is not billed; one cut in flight (the rollout's
			// deadline, the run's cancel) may be: it counts at its
			// projection, as after a kill.
			cut := 0.0
			if rctx.Err() != nil {
				cut = res.Projected()
			}
			budget.End(res, cut)
			return failed(fmt.Errorf("llm call %d: %w", turn+1, err), schemas.OutcomeAPIError)
		}
		rec.Usage.Add(resp.Usage)
		if proj != nil {
			budget.End(res, s.o.Price.Cost(resp.Usage, false))
			proj.answered(len(*messages), resp.Usage)
		}
		msg := resp.Message
		msg.Role = "assistant"
		for i := range msg.ToolCalls {
			if msg.ToolCalls[i].ID == "" {
				msg.ToolCalls[i].ID = "call_" + strconv.Itoa(turn) + "_" + strconv.Itoa(i)
			}
			if msg.ToolCalls[i].Type == "" {
				msg.ToolCalls[i].Type = "function"
			}
		}
		*messages = append(*messages, msg)
		s.keepLogprobs(rec, *messages, &resp)
		if len(msg.ToolCalls) == 0 {
			return schemas.OutcomeCompleted, ""
		}
		var stop schemas.Outcome
		for _, call := range msg.ToolCalls {
			result, err := s.timedCall(rctx, rt, allowed, call, &stop)
			var bc *errBadCall
			switch {
			case errors.As(err, &bc):
				bad++
			case err != nil:
				// The call got no result: record it as failed, as Hermes
				// records a tool that raised, so tool_stats counts a call
				// cut by the rollout deadline (or a driver fault) as a
				// failure instead of neither.
				why := err.Error()
				if rctx.Err() != nil {
					why = fmt.Sprintf("stopped: the rollout deadline of %s passed", s.o.Timeout)
				}
				*messages = append(*messages, schemas.Message{Role: "tool", Content: toolError(call.Function.Name + " did not finish: " + why),
					ToolCallID: call.ID, Name: call.Function.Name})
				return failed(fmt.Errorf("tool %s: %w", call.Function.Name, err), schemas.OutcomeSandboxError)
			default:
				bad = 0
			}
			*messages = append(*messages, schemas.Message{Role: "tool", Content: result, ToolCallID: call.ID, Name: call.Function.Name})
			if bad >= s.o.MaxBadCalls {
				return schemas.OutcomePartial, fmt.Sprintf("%d invalid tool calls in a row; last: %v", bad, err)
			}
		}
		if stop != "" {
			return stop, ""
		}
	}
	return schemas.OutcomeMaxTurns, fmt.Sprintf("reached the limit of %d turns", s.o.MaxTurns)
}

// overCap says which per-rollout cap rec has reached, or "".
func (s *Stage) overCap(rec *schemas.Record) string {
	if n := rec.Usage.PromptTokens + rec.Usage.CompletionTokens; s.o.MaxTokensPerRollout > 0 && n >= s.o.MaxTokensPerRollout {
		return fmt.Sprintf("%d tokens used, --max-tokens-per-rollout is %d", n, s.o.MaxTokensPerRollout)
	}
	if s.o.MaxCostPerRollout > 0 {
		if c := s.o.Price.Cost(rec.Usage, false); c >= s.o.MaxCostPerRollout {
			return fmt.Sprintf("$%.6f spent, --max-cost-per-rollout is $%g", c, s.o.MaxCostPerRollout)
		}
	}
	return ""
}

// timedCall runs s.call and adds its time to rt's tool time, less what it
// waited for the session to open (the record's sandbox_start_ms).
func (s *Stage) timedCall(ctx context.Context, rt *rolloutTools, allowed map[string]bool, call schemas.ToolCall, stop *schemas.Outcome) (string, error) {
	w0, t0 := rt.sess.waited(), s.o.Now()
	out, err := s.call(ctx, rt, allowed, call, stop)
	rt.spent.tool += s.o.Now().Sub(t0) - (rt.sess.waited() - w0)
	return out, err
}

// call runs one tool call in rt's session, with rt's tool state; for
// terminal calls it lets OnTerminal end the loop.
func (s *Stage) call(ctx context.Context, rt *rolloutTools, allowed map[string]bool, call schemas.ToolCall, stop *schemas.Outcome) (string, error) {
	sess := sandbox.Session(rt.sess)
	if out, err, handled := rt.call(ctx, allowed, call); handled {
		return out, err
	}
	if s.o.OnTerminal == nil || call.Function.Name != "terminal" {
		return runTool(ctx, sess, allowed, call, s.o.CommandTimeout)
	}
	spy := &spySession{Session: sess}
	out, err := runTool(ctx, spy, allowed, call, s.o.CommandTimeout)
	if err == nil && spy.ran {
		if o, done := s.o.OnTerminal(spy.cmd.Command, spy.res); done {
			*stop = o
		}
	}
	return out, err
}

// spySession records the last command and result passing through it.
type spySession struct {
	sandbox.Session
	cmd sandbox.Cmd
	res sandbox.Result
	ran bool
}

func (s *spySession) Exec(ctx context.Context, c sandbox.Cmd) (sandbox.Result, error) {
	r, err := s.Session.Exec(ctx, c)
	s.cmd, s.res, s.ran = c, r, err == nil
	return r, err
}

// spent is where one rollout's time went, measured on the stage's clock.
type spent struct {
	model time.Duration // in Client.Chat
	tool  time.Duration // in tool calls, the session's open left out
	start time.Duration // waiting for the sandbox session to open
	close time.Duration // stopping MCP servers and handing the session to the closer
}

// put writes what s measured into rec's timings, keeping what earlier
// steps set there (the runtime's queue_ms). The identity the figures keep:
// model + tool + sandbox_start + sandbox_close (+ grader, where a grader
// ran inside the rollout) add up to duration_ms but for the rollout's own
// bookkeeping; queue_ms is outside duration_ms (the time before the
// rollout began).
func (s *spent) put(rec *schemas.Record) {
	t := rec.Timings
	if t == nil {
		t = &schemas.Timings{}
		rec.Timings = t
	}
	t.ModelMS = s.model.Milliseconds()
	t.ToolMS = s.tool.Milliseconds()
	t.SandboxStartMS = s.start.Milliseconds()
	t.SandboxCloseMS = s.close.Milliseconds()
}
