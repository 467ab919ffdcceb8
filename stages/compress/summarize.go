package compress

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/cost"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
)

// SummaryOptions configure the LLM summariser. Client and Model are required;
// the zero value of every other field means its default.
type SummaryOptions struct {
	Client llm.Client
	Model  string
	// Tokens is the summary budget; requests allow twice as many (max_tokens).
	Tokens int
	// Attempts bounds the requests for one summary when the reply is cut at
	// max_tokens (finish_reason "length") or empty (default 3); such a
	// reply is asked again at once. HTTP faults (429, 5xx, timeouts) are
	// retried inside the client with backoff, never here.
	Attempts int
	// Temperature is sent with every summary request when set (the CLI's
	// --temperature, default DefaultTemperature as Hermes' summariser).
	Temperature *float64
	// Price, when set, prices every summary reply into the row's CostUSD
	// (batch rates for replies that came through the Batch API).
	Price *cost.Price
	// MaxCostPerRow (USD, needs Price) and MaxTokensPerRow (prompt plus
	// completion tokens) cap one row's summary calls: before each call, a
	// row whose calls so far reached a cap stops summarising with outcome
	// budget_exceeded and keeps its original conversation. Zero = no cap.
	// The overshoot is at most one call per row.
	MaxCostPerRow   float64
	MaxTokensPerRow int64

	// batch, when set (batch modes), answers the summary calls instead of
	// Client. It charges the run budget itself (it reserves each request
	// before the request joins a batch), so the summariser only checks it.
	batch summaryClient
	// project is what a direct summary request may cost at most (set by
	// Run from the tokenizer: projector); each direct call reserves it in
	// the run budget's journal before it goes out (cost.Budget.Begin).
	// Nil reserves 0: the call is still journalled and charged.
	project func(req llm.Request, batch bool) float64
}

// rowCall is the row a summary is asked for, passed to each of its
// summary calls: its key, how many summary calls it made so far (the
// batcher numbers its custom_ids with it, the spend journal its calls) and
// the run budget (nil = no
// cap) the calls are checked against and charged to.
type rowCall struct {
	key    string
	n      int
	budget *cost.Budget
}

// summaryClient answers the summary requests of a row.
type summaryClient interface {
	summary(ctx context.Context, row *rowCall, req llm.Request) (llm.Response, error)
}

// directClient asks an llm.Client; the row is the summariser's business.
type directClient struct{ c llm.Client }

func (d directClient) summary(ctx context.Context, row *rowCall, req llm.Request) (llm.Response, error) {
	row.n++
	return d.c.Chat(ctx, req)
}

// rowSummarizer is a Summarizer for the row it is given.
type rowSummarizer func(ctx context.Context, row *rowCall, content string, m *RowMetrics) (string, error)

// forRow is the Summarizer of the row's summaries.
func (f rowSummarizer) forRow(row *rowCall) Summarizer {
	return func(ctx context.Context, content string, m *RowMetrics) (string, error) {
		return f(ctx, row, content, m)
	}
}

// errRowBudget marks a summary not asked because the row reached its own
// cap (SummaryOptions.MaxCostPerRow / MaxTokensPerRow).
var errRowBudget = errors.New("row budget reached")

// rowCapReached says why m's summary calls so far reached o's per-row caps,
// or "" when they did not.
func (o SummaryOptions) rowCapReached(m *RowMetrics) string {
	if n := m.Usage.PromptTokens + m.Usage.CompletionTokens; o.MaxTokensPerRow > 0 && n >= o.MaxTokensPerRow {
		return fmt.Sprintf("%d tokens used by summary calls, --max-tokens-per-rollout is %d", n, o.MaxTokensPerRow)
	}
	if o.MaxCostPerRow > 0 && m.CostUSD != nil && *m.CostUSD >= o.MaxCostPerRow {
		return fmt.Sprintf("$%.6f spent on summary calls, --max-cost-per-rollout is $%g", *m.CostUSD, o.MaxCostPerRow)
	}
	return ""
}

// DefaultTemperature is the sampling temperature of Hermes' summariser.
const DefaultTemperature = 0.3

// errTruncated marks a summary cut at max_tokens.
var errTruncated = errors.New("summary cut at max_tokens (finish_reason=length)")

// newLLMSummarizer returns a summariser asking o.Client (o.batch in batch
// modes) for each summary. It counts every HTTP attempt as a summarisation
// call and every failed or cut attempt as an error, in the row's metrics.
func newLLMSummarizer(o SummaryOptions) (rowSummarizer, error) {
	if o.Client == nil && o.batch == nil {
		return nil, errors.New("summariser: an LLM client is required")
	}
	client, metered := o.batch, true
	if client == nil {
		client, metered = directClient{o.Client}, false
	}
	if o.MaxCostPerRow < 0 || o.MaxTokensPerRow < 0 {
		return nil, errors.New("summariser: per-row caps must not be negative")
	}
	if o.MaxCostPerRow > 0 && o.Price == nil {
		return nil, errors.New("summariser: a per-row cost cap needs a price")
	}
	if o.Tokens <= 0 {
		o.Tokens = DefaultSummaryTokens
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	return func(ctx context.Context, row *rowCall, content string, m *RowMetrics) (string, error) {
		req := llm.Request{
			Model:       o.Model,
			Messages:    []schemas.Message{{Role: "user", Content: summaryPrompt(content, o.Tokens)}},
			MaxTokens:   2 * o.Tokens,
			Temperature: o.Temperature,
		}
		var last error
		for a := 1; a <= o.Attempts; a++ {
			if a > 1 && ctx.Err() != nil {
				return "", fmt.Errorf("summary: %w (after %v)", ctx.Err(), last)
			}
			if why := o.rowCapReached(m); why != "" {
				return "", fmt.Errorf("summary: %w: %s", errRowBudget, why)
			}
			// The run's --max-cost: once reached, no further summary call;
			// the row stays pending (not written) and --resume with a
			// higher cap redoes it.
			if err := row.budget.Allow(); err != nil {
				return "", fmt.Errorf("%w: %w", pipeline.ErrDeferred, err)
			}
			var res cost.Reservation
			if !metered {
				r, err := o.reserve(ctx, row, req)
				if err != nil {
					return "", fmt.Errorf("%w: %w", pipeline.ErrDeferred, err)
				}
				res = r
			}
			resp, err := client.summary(ctx, row, req)
			if !metered {
				o.settle(ctx, row, res, resp, err)
			}
			if errors.Is(err, pipeline.ErrDeferred) {
				return "", err
			}
			calls := max(resp.Attempts, 1)
			m.SummarizationCalls += calls
			m.Usage.Add(resp.Usage)
			if o.Price != nil && err == nil {
				call := o.Price.Cost(resp.Usage, resp.Batch)
				if m.CostUSD != nil {
					call += *m.CostUSD
				}
				m.CostUSD = &call
			}
			if err != nil {
				m.SummarizationErrs += calls
				// The client has already retried what can be retried.
				return "", fmt.Errorf("summary: %w", err)
			}
			m.SummarizationErrs += calls - 1
			if strings.EqualFold(resp.FinishReason, "length") {
				m.SummarizationErrs++
				last = errTruncated
				continue
			}
			text := strings.TrimSpace(resp.Message.Content)
			if _, rest, ok := llm.SplitThink(text); ok {
				text = strings.TrimSpace(rest)
			}
			if text == "" {
				m.SummarizationErrs++
				last = errors.New("summary reply is empty")
				continue
			}
			if !strings.HasPrefix(text, SummaryPrefix) {
				text = SummaryPrefix + " " + text
			}
			return text, nil
		}
		return "", fmt.Errorf("summary: %d attempts: %w", o.Attempts, last)
	}, nil
}

// reserve reserves a priced direct summary call of row at its projection
// in the run budget, journalled before the call goes out; an error (the
// cap, or a journal that cannot be written) refuses the call. The batcher
// reserves its own requests.
func (o SummaryOptions) reserve(ctx context.Context, row *rowCall, req llm.Request) (cost.Reservation, error) {
	if o.Price == nil {
		return cost.Reservation{}, nil
	}
	usd := 0.0
	if o.project != nil {
		usd = o.project(req, false)
	}
	return row.budget.Begin(ctx, row.key, row.n+1, usd)
}

// settle replaces res by what the call cost: nothing when it failed, its
// projection when it was cut in flight (ctx done: it may have been billed,
// as after a kill).
func (o SummaryOptions) settle(ctx context.Context, row *rowCall, res cost.Reservation, resp llm.Response, err error) {
	if o.Price == nil {
		return
	}
	used := 0.0
	switch {
	case err == nil:
		used = o.Price.Cost(resp.Usage, resp.Batch)
	case ctx.Err() != nil:
		used = res.Projected()
	}
	row.budget.End(res, used)
}

// summaryPrompt is the user message of a summary request.
func summaryPrompt(content string, tokens int) string {
	var b strings.Builder
	b.WriteString("The turns below are the middle of an AI agent's conversation. They will be replaced in the ")
	b.WriteString("conversation history by your summary, so the agent must be able to continue from it.\n\n")
	b.WriteString("Write in the language the turns are written in; do not translate.\n")
	b.WriteString("Describe, from a neutral point of view:\n")
	b.WriteString("- the actions the assistant took (tool calls, commands, searches, file edits);\n")
	b.WriteString("- the results and information those actions produced;\n")
	b.WriteString("- decisions made and conclusions reached;\n")
	b.WriteString("- concrete details still needed: file names, paths, values, identifiers, outputs.\n\n")
	b.WriteString("Be factual and brief: about ")
	b.WriteString(strconv.Itoa(tokens))
	b.WriteString(" tokens.\n\n=== TURNS ===\n")
	b.WriteString(content)
	b.WriteString("\n=== END OF TURNS ===\n\nReply with the summary only, beginning with \"")
	b.WriteString(SummaryPrefix)
	b.WriteString("\".")
	return b.String()
}
