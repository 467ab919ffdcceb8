package fakellm

import (
	"hash/fnv"
	"strconv"
	"unicode"
)

// Token log-probabilities, sent when a request asks for them ("logprobs":
// true): one entry per completion token the reply's usage counts, so
// len(content) == usage.completion_tokens always. The reply's text
// (reasoning sent in a field, then the content, then each tool call's name
// and arguments) is cut into words, each with the whitespace before it;
// words past the count are joined into the last token and missing ones are
// empty tokens (as an end-of-text token has no text), so the tokens joined
// give the text back. A token's logprob is drawn from the request's hash
// (in (-4, 0]) and its id is a hash of its text below tokenVocab, the same
// text always the same id. With "return_tokens_as_token_ids": true each
// token is sent as "token_id:N", as vLLM sends it.

// tokenVocab bounds the fake's token ids (a vocabulary of the usual size).
const tokenVocab = 151936

// wireLogprob is one entry of a reply's logprobs.content.
type wireLogprob struct {
	Token       string        `json:"token"`
	Logprob     float64       `json:"logprob"`
	Bytes       []int         `json:"bytes"`
	TopLogprobs []wireLogprob `json:"top_logprobs,omitempty"`
}

// wireLogprobs is a choice's (or a chunk choice's) logprobs object.
type wireLogprobs struct {
	Content []wireLogprob `json:"content"`
}

// logprobs is the logprobs object of p's reply (the whole reply), or nil
// when the request did not ask for them or the step withholds them.
func (s *Server) logprobs(p *plan) *wireLogprobs {
	if !p.logprobs || p.reply.noLogprobs {
		return nil
	}
	content, field := s.surface(&p.reply)
	var text []string
	if field != "think" {
		text = append(text, p.reply.reasoning)
	}
	text = append(text, content)
	for _, tc := range p.reply.toolCalls {
		text = append(text, tc.Function.Name, tc.Function.Arguments)
	}
	toks := fitTokens(wordTokens(text), p.reply.completionTokens)
	out := &wireLogprobs{Content: make([]wireLogprob, len(toks))}
	for i, t := range toks {
		e := wireLogprob{Token: t, Logprob: -4 * unit(mix(p.hash, uint64(i)+0x10b9)), Bytes: []int{}}
		for _, b := range []byte(t) {
			e.Bytes = append(e.Bytes, int(b))
		}
		if p.tokenIDs {
			e.Token = "token_id:" + strconv.FormatUint(tokenIDOf(t), 10)
		}
		out.Content[i] = e
	}
	return out
}

// wordTokens cuts each text into words, each token holding a word and the
// whitespace before it.
func wordTokens(texts []string) []string {
	var toks []string
	for _, t := range texts {
		start := 0
		prevSpace := true
		for i, r := range t {
			space := unicode.IsSpace(r)
			if !space && prevSpace && i > start && !isAllSpace(t[start:i]) {
				toks = append(toks, t[start:i])
				start = i
			}
			prevSpace = space
		}
		if start < len(t) {
			toks = append(toks, t[start:])
		}
	}
	return toks
}

func isAllSpace(s string) bool {
	for _, r := range s {
		if !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// fitTokens makes toks exactly n long: the tokens past n joined into the
// last one, or empty tokens added.
func fitTokens(toks []string, n int) []string {
	if len(toks) > n && n > 0 {
		last := toks[n-1]
		for _, t := range toks[n:] {
			last += t
		}
		toks = append(toks[:n-1], last)
	}
	for len(toks) < n {
		toks = append(toks, "")
	}
	return toks[:n]
}

// tokenIDOf is the fake's id of a token's text.
func tokenIDOf(t string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(t))
	return h.Sum64() % tokenVocab
}

// splitLogprobs cuts lp's entries into groups of n for a stream's chunks.
func splitLogprobs(lp *wireLogprobs, n int) []*wireLogprobs {
	var out []*wireLogprobs
	for c := lp.Content; len(c) > 0; {
		k := min(n, len(c))
		out = append(out, &wireLogprobs{Content: c[:k]})
		c = c[k:]
	}
	return out
}
