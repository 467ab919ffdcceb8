package llm

import (
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// tokenIDPrefix starts a token vLLM sends as its id
// (return_tokens_as_token_ids): "token_id:151643".
const tokenIDPrefix = "token_id:"

// logprobsAcc gathers the token log-probabilities of one reply: the
// content entries of a direct reply, or those of every chunk of a stream.
// Its zero value is ready; only a client whose Sampling asks for logprobs
// touches one, so a call without them allocates nothing here.
type logprobsAcc struct {
	lp    *schemas.TurnLogprobs
	noIDs bool // a token was not in the "token_id:N" form
}

// add appends the entries of one reply or chunk.
func (a *logprobsAcc) add(content []openai.ChatCompletionTokenLogprob) {
	if len(content) == 0 {
		return
	}
	if a.lp == nil {
		a.lp = &schemas.TurnLogprobs{Tokens: make([]string, 0, len(content)), Logprobs: make([]float64, 0, len(content))}
	}
	for i := range content {
		t := &content[i]
		a.lp.Tokens = append(a.lp.Tokens, t.Token)
		a.lp.Logprobs = append(a.lp.Logprobs, t.Logprob)
		if a.noIDs {
			continue
		}
		id, ok := tokenID(t.Token)
		if !ok {
			a.noIDs, a.lp.TokenIDs = true, nil
			continue
		}
		a.lp.TokenIDs = append(a.lp.TokenIDs, id)
	}
}

// result is what was gathered: nil when the server sent no entry; TokenIDs
// only when every token came as its id.
func (a *logprobsAcc) result() *schemas.TurnLogprobs {
	if a.lp != nil && a.noIDs {
		a.lp.TokenIDs = nil
	}
	return a.lp
}

// tokenID reads a "token_id:N" token.
func tokenID(tok string) (int64, bool) {
	rest, ok := strings.CutPrefix(tok, tokenIDPrefix)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	return id, err == nil && id >= 0
}

// logprobsOf is the logprobs acc gathered for msg, the reply before
// finishMessage redacts it: nil when the reply or its tokens hold a secret
// of the endpoint (the tokens would spell what the redacted text hides), so
// a record never keeps one through its logprobs.
func (c *client) logprobsOf(acc *logprobsAcc, msg *schemas.Message) *schemas.TurnLogprobs {
	lp := acc.result()
	if lp == nil || c.red == nil || c.red.r == nil {
		return lp
	}
	texts := []string{msg.Content, msg.Reasoning, strings.Join(lp.Tokens, "")}
	for _, tc := range msg.ToolCalls {
		texts = append(texts, tc.Function.Arguments)
	}
	for _, t := range texts {
		if c.red.String(t) != t {
			return nil
		}
	}
	return lp
}
