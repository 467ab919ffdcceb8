package rollout

import (
	"encoding/json"
	"sync/atomic"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// How a model call's cost is projected before it is sent (the reservation
// the run's budget journals and counts against --max-cost while the call is
// in flight, and what a resume counts for a call a kill left unanswered).
const (
	// projectBytesPerToken: text is projected at one token per three
	// bytes, more than BPE tokenizers give English prose or code (about
	// four bytes a token).
	projectBytesPerToken = 3
	// projectMessageTokens is what a message's role and chat-template
	// markers add.
	projectMessageTokens = 4
	// projectCompletionTokens is the completion projected before the run
	// has had a reply, when --max-tokens is not set.
	projectCompletionTokens = 256
)

// projector projects the calls of one rollout. The prompt of a call after
// the first is the previous call's prompt and completion tokens, as the
// endpoint reported them, plus the messages added since (the tool results)
// at projectBytesPerToken; the first call's (or one after a reply without
// usage) is the whole request, tool definitions included, at that rate.
// The completion is the largest the stage has had (over every rollout of
// the run), at most --max-tokens; before any reply, --max-tokens or
// projectCompletionTokens. It is a projection, not a ceiling: a reply
// longer than any before it, or a first reply past projectCompletionTokens,
// costs more than was reserved.
type projector struct {
	price     func(schemas.Usage) float64
	maxTokens int
	largest   *atomic.Int64 // the largest completion the stage has had
	tools     int           // tokens of the tool definitions

	prev    schemas.Usage // the last reply's usage
	prevLen int           // messages its request had
}

// newProjector returns the projector of a rollout offering tools.
func (s *Stage) newProjector(tools []schemas.Tool) *projector {
	p := &projector{price: func(u schemas.Usage) float64 { return s.o.Price.Cost(u, false) }, maxTokens: s.o.MaxTokens, largest: &s.completion}
	if len(tools) > 0 {
		if b, err := json.Marshal(tools); err == nil {
			p.tools = len(b) / projectBytesPerToken
		}
	}
	return p
}

// projected is what the next call with messages may cost.
func (p *projector) projected(messages []schemas.Message) float64 {
	var prompt int64
	if p.prev.PromptTokens > 0 && p.prevLen <= len(messages) {
		prompt = p.prev.PromptTokens + p.prev.CompletionTokens + textTokens(messages[p.prevLen:])
	} else {
		prompt = int64(p.tools) + textTokens(messages)
	}
	completion := p.largest.Load()
	if completion == 0 {
		completion = projectCompletionTokens
		if p.maxTokens > 0 {
			completion = int64(p.maxTokens)
		}
	}
	if p.maxTokens > 0 {
		completion = min(completion, int64(p.maxTokens))
	}
	return p.price(schemas.Usage{PromptTokens: prompt, CompletionTokens: completion})
}

// answered records the reply to a request of n messages.
func (p *projector) answered(n int, u schemas.Usage) {
	p.prev, p.prevLen = u, n
	for c := p.largest.Load(); u.CompletionTokens > c; c = p.largest.Load() {
		if p.largest.CompareAndSwap(c, u.CompletionTokens) {
			break
		}
	}
}

// textTokens projects the tokens of messages.
func textTokens(messages []schemas.Message) int64 {
	n := 0
	for _, m := range messages {
		b := len(m.Content) + len(m.Reasoning) + len(m.ToolCallID) + len(m.Name)
		for _, c := range m.ToolCalls {
			b += len(c.ID) + len(c.Function.Name) + len(c.Function.Arguments)
		}
		n += projectMessageTokens + (b+projectBytesPerToken-1)/projectBytesPerToken
	}
	return int64(n)
}
