package schemas

import "encoding/json"

// Outcome is the single terminal result of one unit of work (one rollout, one
// compressed row, one SWE task). Every record ends with exactly one outcome.
type Outcome string

// Outcomes of a generate rollout. The first three are model behaviour and are
// final; the retryable ones describe infrastructure faults and are tried again
// by `--resume`.
const (
	OutcomeCompleted    Outcome = "completed"      // the model answered without a tool call
	OutcomeMaxTurns     Outcome = "max_turns"      // the turn limit ended the rollout
	OutcomePartial      Outcome = "partial"        // three bad tool calls in a row ended the rollout
	OutcomeAPIError     Outcome = "api_error"      // the LLM endpoint failed after all retries
	OutcomeTimeout      Outcome = "timeout"        // the per-rollout deadline passed
	OutcomeSandboxError Outcome = "sandbox_error"  // the sandbox driver failed (not the command)
	OutcomeInternal     Outcome = "internal_error" // a panic or bug inside a stage
	// OutcomeLost marks, in the ledger only, a unit whose committed record
	// was lost (its shard missing, cut short or changed) when the output
	// folder was opened; --resume runs it again.
	OutcomeLost Outcome = "lost"
	// OutcomeBudgetPaused ends a rollout that the run's spending cap
	// (--max-cost) stopped before its next model call, or cancelled after
	// --grace. Its spend is committed; --resume with a higher cap runs it
	// again.
	OutcomeBudgetPaused Outcome = "budget_paused"
	// OutcomeBudgetExceeded ends a rollout that reached its own cap
	// (--max-cost-per-rollout, --max-tokens-per-rollout). It is final: the
	// trajectory up to that point is kept and --resume does not run it again.
	OutcomeBudgetExceeded Outcome = "budget_exceeded"
)

// Final outcomes that still make a run exit 3: the row was kept or written,
// but its work failed. Modes decide whether --resume runs them again.
const (
	OutcomeSummaryFailed Outcome = "summary_failed" // compress: a summary call failed; the original row is kept
	OutcomeError         Outcome = "error"          // a stage marked the record failed
)

// Retryable reports whether `--resume` should run a unit with this outcome again.
func (o Outcome) Retryable() bool {
	switch o {
	case OutcomeAPIError, OutcomeTimeout, OutcomeSandboxError, OutcomeInternal, OutcomeLost, OutcomeBudgetPaused:
		return true
	}
	return false
}

// OK reports whether the outcome counts as a successful row for the exit code.
// Retryable outcomes are failures; so is anything a stage marks as failed.
func (o Outcome) OK() bool {
	return o != "" && !o.Retryable() && !failedOutcomes[o]
}

// failedOutcomes are final outcomes that still make the run exit 3.
var failedOutcomes = map[Outcome]bool{
	OutcomeSummaryFailed: true,
	OutcomeError:         true,
}

// Turn is one ShareGPT turn as Hermes writes it.
//
// ValueJSON, when not empty, is the value as JSON text (Python json.dumps
// form) that replaces the string Value when the turn is written: Hermes
// writes a human turn whose message content was a list of parts as that
// list. Value then holds the parts flattened to text. Only the `sharegpt`
// conversion sets it; records of output folders hold string values. Write a
// value with AppendTurnValue.
type Turn struct {
	From      string `json:"from"`
	Value     string `json:"value"`
	ValueJSON string `json:"-"`
}

// ToolStat counts calls of one tool and how many succeeded or failed, judged as
// Hermes judges them (see ToolResultSucceeded).
type ToolStat struct {
	Count   int `json:"count"`
	Success int `json:"success"`
	Failure int `json:"failure"`
}

// Usage is the token usage summed over every LLM call of a rollout.
// CachedPromptTokens (prompt_tokens_details.cached_tokens) are part of
// PromptTokens and ReasoningTokens (completion_tokens_details.reasoning_tokens)
// part of CompletionTokens; both are 0, and omitted, when the server does not
// report them.
type Usage struct {
	PromptTokens       int64 `json:"prompt_tokens"`
	CompletionTokens   int64 `json:"completion_tokens"`
	TotalTokens        int64 `json:"total_tokens"`
	CachedPromptTokens int64 `json:"cached_prompt_tokens,omitempty"`
	ReasoningTokens    int64 `json:"reasoning_tokens,omitempty"`
}

// Add adds o's counts to u.
func (u *Usage) Add(o Usage) {
	u.PromptTokens += o.PromptTokens
	u.CompletionTokens += o.CompletionTokens
	u.TotalTokens += o.TotalTokens
	u.CachedPromptTokens += o.CachedPromptTokens
	u.ReasoningTokens += o.ReasoningTokens
}

// ReasoningStats says how many assistant turns carried reasoning.
type ReasoningStats struct {
	TotalAssistantTurns int  `json:"total_assistant_turns"`
	TurnsWithReasoning  int  `json:"turns_with_reasoning"`
	TurnsWithoutReason  int  `json:"turns_without_reasoning"`
	HasAnyReasoning     bool `json:"has_any_reasoning"`
}

// Record is one unit of work and, once finished, one output line. Field names
// follow Hermes' batch_runner where it has them, so existing readers keep working.
//
// Key is the stable resume key (see RowKey); Input is the parsed input row for
// generate. Stages fill the rest; the runtime fills Success and Hermes'
// members of Metadata (see HermesMetadata) when the record is finished.
// Success is nil in records written before hermes-pipe wrote it (readers
// tell it from the outcome: Outcome.OK). Extra holds mode-specific fields (compression
// metrics, SWE grading) that are written as-is.
type Record struct {
	Key             string                     `json:"key"`
	ID              string                     `json:"id,omitempty"`
	PromptIndex     int                        `json:"prompt_index"`
	Sample          int                        `json:"sample"`
	Conversations   []Turn                     `json:"conversations"`
	Outcome         Outcome                    `json:"outcome"`
	Success         *bool                      `json:"success,omitempty"`
	Completed       bool                       `json:"completed"`
	Partial         bool                       `json:"partial"`
	APICalls        int                        `json:"api_calls"`
	Usage           Usage                      `json:"usage"`
	CostUSD         *float64                   `json:"cost_usd"` // nil (null) when the model has no price
	ToolsetsUsed    []string                   `json:"toolsets_used"`
	ToolStats       map[string]ToolStat        `json:"tool_stats"`
	ToolErrorCounts map[string]int             `json:"tool_error_counts"`
	ReasoningStats  ReasoningStats             `json:"reasoning_stats"`
	Model           string                     `json:"model,omitempty"`
	DurationMS      int64                      `json:"duration_ms"`
	Timings         *Timings                   `json:"timings,omitempty"`
	Reward          *float64                   `json:"reward"` // nil (null) when ungraded or the grader failed
	Grade           *Grade                     `json:"grade,omitempty"`
	Error           string                     `json:"error,omitempty"`
	Metadata        json.RawMessage            `json:"metadata,omitempty"`
	Extra           map[string]json.RawMessage `json:"extra,omitempty"`
	Logprobs        []TurnLogprobs             `json:"logprobs,omitempty"`

	// Input is the parsed input row; it is not written to the output.
	Input *InputRow `json:"-"`
	// Raw, when set, is written verbatim as the output line instead of the
	// struct fields above. Stages that must preserve every field of an input
	// record and its order (compress) carry and edit the record here.
	Raw json.RawMessage `json:"-"`
}

// Timings says where a record's wall time went, in milliseconds summed over
// the record's work: model calls (ModelMS), tool calls (ToolMS), opening and
// closing its sandbox session, waiting for a worker (QueueMS) and grading.
// Records written before hermes-pipe kept it have none.
type Timings struct {
	ModelMS        int64 `json:"model_ms"`
	ToolMS         int64 `json:"tool_ms"`
	SandboxStartMS int64 `json:"sandbox_start_ms"`
	SandboxCloseMS int64 `json:"sandbox_close_ms"`
	QueueMS        int64 `json:"queue_ms"`
	GraderMS       int64 `json:"grader_ms"`
}

// Grade is what a grader said of one rollout. Value is the reward it gave
// (the record's Reward holds the same number); Passed and Value are nil when
// the grader itself failed (crashed, timed out, could not run), and Error
// then says why: a failed grader is never a silent 0. Output is the tail of
// what the grader printed (a verify command's stdout and stderr).
type Grade struct {
	Grader     string   `json:"grader"`
	Passed     *bool    `json:"passed"`
	Value      *float64 `json:"value"`
	Output     string   `json:"output,omitempty"`
	DurationMS int64    `json:"duration_ms"`
	Error      string   `json:"error,omitempty"`
}

// TurnLogprobs holds the token log-probabilities the endpoint returned for
// one assistant turn (--logprobs): Turn is the turn's index in the record's
// conversations, Tokens and Logprobs one entry per completion token, and
// TokenIDs the tokens' ids where the server gives them.
type TurnLogprobs struct {
	Turn     int       `json:"turn"`
	Tokens   []string  `json:"tokens"`
	Logprobs []float64 `json:"logprobs"`
	TokenIDs []int64   `json:"token_ids,omitempty"`
}

// InputRow is one validated line of a generate prompts file.
type InputRow struct {
	Line     int             `json:"-"` // 1-based line number in the prompts file
	Index    int             `json:"-"` // prompt_index: 0-based position among non-blank lines
	Prompt   string          `json:"prompt"`
	ID       string          `json:"id,omitempty"`
	Image    string          `json:"image,omitempty"`
	Cwd      string          `json:"cwd,omitempty"`
	Toolsets []string        `json:"toolsets,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// Verify is a shell command run in the rollout's own sandbox after the
	// agent stops (the cmd grader); Answer the expected final answer (the
	// answer graders: exact, contains, regex, number).
	Verify string `json:"verify,omitempty"`
	Answer string `json:"answer,omitempty"`
}

// Reject is one input row that could not be processed, written to rejects.jsonl.
type Reject struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Field  string `json:"field,omitempty"`
	Reason string `json:"reason"`
	Raw    string `json:"raw"`
	// RawBase64 holds the exact bytes of a line that was not valid UTF-8
	// (Raw then carries it with U+FFFD replacements), so nothing is lost.
	RawBase64 string `json:"raw_base64,omitempty"`
}
