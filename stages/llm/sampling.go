package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/openai/openai-go/v3"
)

// Sampling is what a client sends with every chat request besides the
// conversation: the sampling parameters a user set, each left out of the
// body when unset so the server's default applies, and Extra, fields merged
// into the body as they are (top_k, min_p, repetition_penalty,
// chat_template_kwargs of vLLM or SGLang).
type Sampling struct {
	Temperature *float64 // nil = not sent
	TopP        *float64 // nil = not sent
	MaxTokens   int      // 0 = not sent
	Seed        *int64   // nil = not sent
	// Logprobs asks for the token log-probabilities of every completion
	// ("logprobs": true); the reply's land in Response.Logprobs.
	// LogprobTokenIDs also asks for the tokens as their ids
	// ("return_tokens_as_token_ids": true, a vLLM extension other servers
	// may refuse), read into TokenIDs. Both false = neither sent nor read.
	Logprobs        bool
	LogprobTokenIDs bool
	// Extra holds JSON values keyed by body field. A field the client
	// builds itself (ReservedFields) or one of the fields above is refused
	// by New, so nothing is given two values.
	Extra map[string]any
}

// Body fields of Sampling.Logprobs and LogprobTokenIDs.
const (
	FieldLogprobs        = "logprobs"
	FieldLogprobTokenIDs = "return_tokens_as_token_ids"
)

// ReservedFields are the request body fields the client writes from the
// request itself; Sampling.Extra may not name them.
var ReservedFields = []string{"model", "messages", "tools", "stream", "stream_options"}

// SamplingFields are the body fields of Sampling's typed parameters.
var SamplingFields = []string{"temperature", "top_p", "max_tokens", "seed"}

// ErrSampling marks a Sampling New refuses.
var ErrSampling = errors.New("bad sampling parameters")

// Check is the check New makes of a client's Sampling, for a caller that
// stores one to use later (a cron job's): values no server accepts and
// Extra fields that would give a body field a second value are refused
// (ErrSampling).
func (s Sampling) Check() error { return s.check() }

// check refuses values no server accepts and Extra fields that would give a
// body field a second value.
func (s Sampling) check() error {
	if t := s.Temperature; t != nil && (*t < 0 || math.IsNaN(*t) || math.IsInf(*t, 0)) {
		return fmt.Errorf("%w: temperature %v is not a number >= 0", ErrSampling, *t)
	}
	if p := s.TopP; p != nil && !(*p > 0 && *p <= 1) {
		return fmt.Errorf("%w: top_p %v is not in (0, 1]", ErrSampling, *p)
	}
	if s.MaxTokens < 0 {
		return fmt.Errorf("%w: max_tokens %d is negative", ErrSampling, s.MaxTokens)
	}
	if s.LogprobTokenIDs && !s.Logprobs {
		return fmt.Errorf("%w: token ids of the logprobs asked for without the logprobs", ErrSampling)
	}
	keys := make([]string, 0, len(s.Extra))
	for k := range s.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if slices.Contains(ReservedFields, k) {
			return fmt.Errorf("%w: extra field %q is written by the client itself", ErrSampling, k)
		}
		if s.sets(k) {
			return fmt.Errorf("%w: extra field %q is also set as a sampling parameter", ErrSampling, k)
		}
	}
	return nil
}

// sets reports whether the typed parameter sent as body field k is set.
func (s Sampling) sets(k string) bool {
	switch k {
	case "temperature":
		return s.Temperature != nil
	case "top_p":
		return s.TopP != nil
	case "max_tokens":
		return s.MaxTokens > 0
	case "seed":
		return s.Seed != nil
	case FieldLogprobs:
		return s.Logprobs
	case FieldLogprobTokenIDs:
		return s.LogprobTokenIDs
	}
	return false
}

// apply writes the parameters into p; req's own MaxTokens and Temperature
// replace the client's (and an Extra field of the same name).
func (s Sampling) apply(p *openai.ChatCompletionNewParams, req Request) {
	maxTokens, temp := s.forRequest(req)
	if maxTokens > 0 {
		p.MaxTokens = openai.Int(int64(maxTokens))
	}
	if temp != nil {
		p.Temperature = openai.Float(*temp)
	}
	if s.TopP != nil {
		p.TopP = openai.Float(*s.TopP)
	}
	if s.Seed != nil {
		p.Seed = openai.Int(*s.Seed)
	}
	if s.Logprobs {
		p.Logprobs = openai.Bool(true)
	}
	if len(s.Extra) == 0 && !s.LogprobTokenIDs {
		return
	}
	extra := make(map[string]any, len(s.Extra)+1)
	if s.LogprobTokenIDs {
		extra[FieldLogprobTokenIDs] = true
	}
	for k, v := range s.Extra {
		if !req.overrides(k) {
			extra[k] = v
		}
	}
	p.SetExtraFields(extra)
}

// forRequest is the max_tokens and temperature a request for req sends:
// req's own when it gives them, else the client's (0 and nil: not sent).
func (s Sampling) forRequest(req Request) (maxTokens int, temp *float64) {
	maxTokens, temp = s.MaxTokens, s.Temperature
	if req.MaxTokens > 0 {
		maxTokens = req.MaxTokens
	}
	if req.Temperature != nil {
		temp = req.Temperature
	}
	return maxTokens, temp
}

// overrides reports whether req gives its own value of the Extra field k
// (max_tokens, temperature): the request's own value wins.
func (req Request) overrides(k string) bool {
	return (k == "max_tokens" && req.MaxTokens > 0) || (k == "temperature" && req.Temperature != nil)
}

// extraKeys are the Extra fields a request for req sends, in key order
// (the written body's order): all that req does not override.
func (s Sampling) extraKeys(req Request) []string {
	keys := make([]string, 0, len(s.Extra))
	for k := range s.Extra {
		if !req.overrides(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// ErrExtraBody marks extra body text that is not one JSON object; its text
// says what it is instead ("not valid JSON", "not a JSON object", "more than
// one JSON value").
var ErrExtraBody = errors.New("extra body")

// DecodeExtraBody reads extra body fields (--extra-body, a cron job's
// stored extra_body): one JSON object, its numbers kept as written (1.05 and
// large integers reach the server unchanged).
func DecodeExtraBody(text []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		var typ *json.UnmarshalTypeError
		if err == nil || errors.As(err, &typ) {
			return nil, fmt.Errorf("%w: not a JSON object", ErrExtraBody)
		}
		return nil, fmt.Errorf("%w: not valid JSON", ErrExtraBody)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: more than one JSON value", ErrExtraBody)
	}
	return m, nil
}
