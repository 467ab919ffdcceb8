package rollout

import (
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
)

// keepLogprobs keeps the token logprobs of the model reply that just
// became the last message of messages (the turns loop calls it once per
// reply). Until alignLogprobs places them, an entry's Turn is the ordinal of
// its assistant message among the rollout's assistant messages. A reply
// without logprobs although Options.Logprobs asked for them keeps nothing
// and is counted in Options.LogprobsMissing. Without Options.Logprobs it
// does nothing.
func (s *Stage) keepLogprobs(rec *schemas.Record, messages []schemas.Message, resp *llm.Response) {
	if !s.o.Logprobs {
		return
	}
	if resp.Logprobs == nil {
		if s.o.LogprobsMissing != nil {
			s.o.LogprobsMissing.Add(1)
		}
		return
	}
	ordinal := -1
	for i := range messages {
		if messages[i].Role == "assistant" {
			ordinal++
		}
	}
	lp := *resp.Logprobs
	lp.Turn = ordinal
	rec.Logprobs = append(rec.Logprobs, lp)
}

// alignLogprobs turns each kept entry's assistant ordinal into the index
// of the gpt turn its message became in rec's conversations (made from
// messages by schemas.ToShareGPT); an entry of a message that made no gpt
// turn is dropped. Process calls it once the conversations are set.
func alignLogprobs(rec *schemas.Record, messages []schemas.Message) {
	if len(rec.Logprobs) == 0 {
		return
	}
	turns := schemas.GPTTurns(messages)
	kept := rec.Logprobs[:0]
	for _, lp := range rec.Logprobs {
		if lp.Turn < 0 || lp.Turn >= len(turns) || turns[lp.Turn] < 0 {
			continue
		}
		lp.Turn = turns[lp.Turn]
		kept = append(kept, lp)
	}
	rec.Logprobs = kept
	if len(kept) == 0 {
		rec.Logprobs = nil
	}
}
