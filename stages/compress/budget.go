package compress

import (
	"context"

	"github.com/hermes-pipe/hermes-pipe/pipeline/cost"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/tokenizer"
)

// Chat-template allowances of a projected request: tokens per message
// (role and separators; OpenAI's format uses 3 or 4) and per request (the
// reply's priming, 3). Generous on purpose: a projection below the real
// count is what could take a batch run past --max-cost.
const (
	projectMessageTokens = 8
	projectRequestTokens = 8
)

// projector returns what a summary request may cost at most at price: its
// prompt counted with tok (plus turnOverhead and the template allowances
// per message) and every completion token it allows (max_tokens), at the
// batch rates when batch. Batch runs reserve it in the run budget before a
// request joins a batch (batchMeter). Its cost is one tokenizer pass over
// the prompt.
func projector(tok tokenizer.Tokenizer, turnOverhead int, price *cost.Price) func(llm.Request, bool) float64 {
	return func(req llm.Request, batch bool) float64 {
		n := projectRequestTokens
		for _, m := range req.Messages {
			n += tok.Count(m.Content) + projectMessageTokens + turnOverhead
		}
		return price.Cost(schemas.Usage{PromptTokens: int64(n), CompletionTokens: int64(max(req.MaxTokens, 0))}, batch)
	}
}

// UseBudget implements pipeline.BudgetUser: the run's cap (nil = none),
// which every row's summary calls are checked against and charged to.
func (s *Stage) UseBudget(b *cost.Budget) { s.budget = b }

// Preflight runs once before the first row (pipeline.Preflighter): in batch
// modes it holds against the run budget what the batch journal says was
// spent but is not in the ledger yet (batcher.hold), so a --resume after a
// capped or killed batch run counts the batches it left.
func (s *Stage) Preflight(context.Context) error {
	if s.batch != nil {
		s.batch.hold(s.budget, s.done)
	}
	return nil
}
