package llm

import (
	"context"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// toolAcc gathers the deltas of one streamed tool call.
type toolAcc struct {
	id, name string
	args     strings.Builder
}

// stream makes one streaming call and assembles the deltas of choice 0 into a
// Response. Tool calls are keyed by their delta index (a delta without an
// index continues the last call unless it brings a new id); a stream that
// ends before any finish_reason is reported as malformed, since the reply
// may be cut short. onEvent (if set) is called for every event received.
func (c *client) stream(ctx context.Context, params *openai.ChatCompletionNewParams, onEvent func()) (Response, error) {
	s := c.svc.NewStreaming(ctx, *params)
	defer s.Close()

	var content, reasoning, reasoningContent strings.Builder
	var calls []*toolAcc
	byIndex := map[int64]int{}
	var usage schemas.Usage
	var lps logprobsAcc
	wantLogprobs := c.opts.Sampling.Logprobs
	finish := ""
	for s.Next() {
		if onEvent != nil {
			onEvent()
		}
		ch := s.Current()
		if ch.JSON.Usage.Valid() {
			usage.Add(usageOf(ch.Usage))
		}
		for i := range ch.Choices {
			choice := &ch.Choices[i]
			if choice.Index != 0 {
				continue
			}
			if wantLogprobs {
				lps.add(choice.Logprobs.Content)
			}
			d := &choice.Delta
			content.WriteString(d.Content)
			if ex := d.JSON.ExtraFields; ex != nil {
				reasoning.WriteString(rawString(ex["reasoning"].Raw()))
				reasoningContent.WriteString(rawString(ex["reasoning_content"].Raw()))
			}
			for j := range d.ToolCalls {
				t := &d.ToolCalls[j]
				var acc *toolAcc
				if t.JSON.Index.Valid() {
					k, ok := byIndex[t.Index]
					if !ok {
						k = len(calls)
						byIndex[t.Index] = k
						calls = append(calls, &toolAcc{})
					}
					acc = calls[k]
				} else {
					if len(calls) == 0 || (t.ID != "" && calls[len(calls)-1].id != "" && calls[len(calls)-1].id != t.ID) {
						calls = append(calls, &toolAcc{})
					}
					acc = calls[len(calls)-1]
				}
				if t.ID != "" {
					acc.id = t.ID
				}
				// Most servers send the whole name once; some repeat it on
				// every delta, and a few split it.
				if n := t.Function.Name; n != "" && n != acc.name {
					acc.name += n
				}
				acc.args.WriteString(t.Function.Arguments)
			}
			if choice.FinishReason != "" {
				finish = choice.FinishReason
			}
		}
	}
	if err := s.Err(); err != nil {
		return Response{}, err
	}
	if finish == "" {
		return Response{}, fmt.Errorf("%w: stream ended without a finish reason", ErrMalformed)
	}
	msg := schemas.Message{
		Role:      "assistant",
		Content:   content.String(),
		Reasoning: joinReasoning(reasoning.String(), reasoningContent.String()),
	}
	for _, acc := range calls {
		msg.ToolCalls = append(msg.ToolCalls, schemas.ToolCall{
			ID:       acc.id,
			Type:     "function",
			Function: schemas.FunctionCall{Name: acc.name, Arguments: acc.args.String()},
		})
	}
	var lp *schemas.TurnLogprobs
	if wantLogprobs {
		lp = c.logprobsOf(&lps, &msg)
	}
	c.finishMessage(&msg)
	return Response{Message: msg, FinishReason: finish, Usage: usage, Logprobs: lp}, nil
}
