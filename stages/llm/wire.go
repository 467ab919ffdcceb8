package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/openai/openai-go/v3"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// The wire form of a non-streamed chat call: the request body written by
// hand and the reply read into a small struct. The SDK's reflection-driven
// encoder and decoder cost about a quarter of the CPU of a model call at
// scale (stages/llm's BenchmarkChat, scripts/bench-generate.sh scheduling);
// these do the same work directly. Direct calls and Batch API bodies and
// results share them, so one reply gives one Response on both paths.

// chatBody is the JSON body of a chat-completions request for req: model,
// messages, tools, the sampling parameters (req's own max_tokens and
// temperature replacing the client's), then Sampling.Extra's fields in key
// order. Tool schemas keep their key order (compacted).
func (c *client) chatBody(req Request) ([]byte, error) {
	model := req.Model
	if model == "" {
		model = c.opts.Model
	}
	if model == "" {
		return nil, errors.New("no model named in the request or the client options")
	}
	if len(req.Messages) == 0 {
		return nil, errors.New("request has no messages")
	}
	b := make([]byte, 0, bodySize(req))
	b = append(b, `{"model":`...)
	b = schemas.AppendQuoted(b, model)
	b = append(b, `,"messages":[`...)
	for i := range req.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendMessage(b, &req.Messages[i]); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
	}
	b = append(b, ']')
	if len(req.Tools) > 0 {
		b = append(b, `,"tools":[`...)
		for i := range req.Tools {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendTool(b, &req.Tools[i]); err != nil {
				return nil, fmt.Errorf("tool %q: %w", req.Tools[i].Function.Name, err)
			}
		}
		b = append(b, ']')
	}
	return c.opts.Sampling.appendFields(b, req)
}

// bodySize is a first guess at the body's size, so it is built in one
// allocation most of the time.
func bodySize(req Request) int {
	n := 256
	for i := range req.Messages {
		m := &req.Messages[i]
		n += len(m.Content) + len(m.Content)/8 + 64
		for _, tc := range m.ToolCalls {
			n += len(tc.Function.Arguments) + len(tc.Function.Name) + 96
		}
	}
	for i := range req.Tools {
		n += len(req.Tools[i].Function.Description) + len(req.Tools[i].Function.Parameters) + 96
	}
	return n
}

func appendMessage(b []byte, m *schemas.Message) ([]byte, error) {
	switch m.Role {
	case "system", "developer", "user", "tool", "assistant":
	default:
		return b, fmt.Errorf("unknown role %q", m.Role)
	}
	b = append(b, `{"role":"`...)
	b = append(b, m.Role...)
	b = append(b, '"')
	if m.Role != "assistant" || m.Content != "" || len(m.ToolCalls) == 0 {
		b = append(b, `,"content":`...)
		b = schemas.AppendQuoted(b, m.Content)
	}
	if m.Name != "" && (m.Role == "user" || m.Role == "assistant") {
		b = append(b, `,"name":`...)
		b = schemas.AppendQuoted(b, m.Name)
	}
	if m.Role == "tool" {
		b = append(b, `,"tool_call_id":`...)
		b = schemas.AppendQuoted(b, m.ToolCallID)
	}
	if m.Role == "assistant" && len(m.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i, tc := range m.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = schemas.AppendQuoted(b, tc.ID)
			b = append(b, `,"type":"function","function":{"name":`...)
			b = schemas.AppendQuoted(b, tc.Function.Name)
			b = append(b, `,"arguments":`...)
			b = schemas.AppendQuoted(b, tc.Function.Arguments)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

func appendTool(b []byte, t *schemas.Tool) ([]byte, error) {
	typ := t.Type
	if typ == "" {
		typ = "function"
	}
	b = append(b, `{"type":`...)
	b = schemas.AppendQuoted(b, typ)
	b = append(b, `,"function":{"name":`...)
	b = schemas.AppendQuoted(b, t.Function.Name)
	if t.Function.Description != "" {
		b = append(b, `,"description":`...)
		b = schemas.AppendQuoted(b, t.Function.Description)
	}
	if len(t.Function.Parameters) > 0 {
		b = append(b, `,"parameters":`...)
		buf := bytes.NewBuffer(b)
		if err := json.Compact(buf, t.Function.Parameters); err != nil {
			return b, fmt.Errorf("parameters: %w", err)
		}
		b = buf.Bytes()
	}
	return append(b, "}}"...), nil
}

// appendFields appends the sampling parameters and the extra fields to the
// body b (open after its last member) and closes it. req's own MaxTokens
// and Temperature replace the client's (and an Extra field of the same
// name).
func (s Sampling) appendFields(b []byte, req Request) ([]byte, error) {
	maxTokens, temp := s.forRequest(req)
	if maxTokens > 0 {
		b = append(b, `,"max_tokens":`...)
		b = strconv.AppendInt(b, int64(maxTokens), 10)
	}
	if temp != nil {
		b = append(b, `,"temperature":`...)
		b = appendFloat(b, *temp)
	}
	if s.TopP != nil {
		b = append(b, `,"top_p":`...)
		b = appendFloat(b, *s.TopP)
	}
	if s.Seed != nil {
		b = append(b, `,"seed":`...)
		b = strconv.AppendInt(b, *s.Seed, 10)
	}
	if s.Logprobs {
		b = append(b, `,"`+FieldLogprobs+`":true`...)
	}
	if s.LogprobTokenIDs {
		b = append(b, `,"`+FieldLogprobTokenIDs+`":true`...)
	}
	if len(s.Extra) > 0 {
		for _, k := range s.extraKeys(req) {
			b = append(b, ',')
			b = schemas.AppendQuoted(b, k)
			b = append(b, ':')
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(s.Extra[k]); err != nil {
				return b, fmt.Errorf("extra body field %q: %w", k, err)
			}
			b = append(b, bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})...)
		}
	}
	return append(b, '}'), nil
}

// appendFloat appends f as encoding/json writes a float64.
func appendFloat(b []byte, f float64) []byte {
	enc, _ := json.Marshal(f) // finite: Sampling.check refused the others
	return append(b, enc...)
}

// chatReply is the part of a chat completion a Response is made of. Values
// of an unexpected JSON type are read as absent (rawString, flexInt), as
// the SDK's decoder reads them, so only a reply that is not JSON, or whose
// choices are not a list of objects, is malformed.
type chatReply struct {
	Choices []struct {
		Message struct {
			Content          json.RawMessage `json:"content"`
			Reasoning        json.RawMessage `json:"reasoning"`
			ReasoningContent json.RawMessage `json:"reasoning_content"`
			ReasoningDetails json.RawMessage `json:"reasoning_details"`
			ToolCalls        []struct {
				ID       json.RawMessage `json:"id"`
				Type     json.RawMessage `json:"type"`
				Function struct {
					Name      json.RawMessage `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
				Custom struct {
					Name  json.RawMessage `json:"name"`
					Input json.RawMessage `json:"input"`
				} `json:"custom"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason json.RawMessage `json:"finish_reason"`
		// Logprobs is read (logprobsAcc) only when the client asked for
		// them.
		Logprobs json.RawMessage `json:"logprobs"`
	} `json:"choices"`
	Usage struct {
		PromptTokens        flexInt `json:"prompt_tokens"`
		CompletionTokens    flexInt `json:"completion_tokens"`
		TotalTokens         flexInt `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens flexInt `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails struct {
			ReasoningTokens flexInt `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
}

// flexInt is a token count: a JSON number (a whole float included); any
// other value reads as 0.
type flexInt int64

func (n *flexInt) UnmarshalJSON(b []byte) error {
	if v, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		*n = flexInt(v)
	} else if f, err := strconv.ParseFloat(string(b), 64); err == nil {
		*n = flexInt(f)
	}
	return nil
}

// parseReply reads a chat completion's JSON into a Response.
func (c *client) parseReply(body []byte) (Response, error) {
	var r chatReply
	if err := json.Unmarshal(body, &r); err != nil {
		return Response{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if len(r.Choices) == 0 {
		return Response{}, fmt.Errorf("%w: reply has no choices", ErrMalformed)
	}
	ch := &r.Choices[0]
	m := &ch.Message
	parts := []string{rawString(string(m.Reasoning)), rawString(string(m.ReasoningContent))}
	parts = append(parts, detailsText(string(m.ReasoningDetails))...)
	msg := schemas.Message{Role: "assistant", Content: rawString(string(m.Content)), Reasoning: joinReasoning(parts...)}
	for _, tc := range m.ToolCalls {
		call := schemas.ToolCall{ID: rawString(string(tc.ID)), Type: "function"}
		if rawString(string(tc.Type)) == "custom" {
			call.Function = schemas.FunctionCall{Name: rawString(string(tc.Custom.Name)), Arguments: rawString(string(tc.Custom.Input))}
		} else {
			call.Function = schemas.FunctionCall{Name: rawString(string(tc.Function.Name)), Arguments: rawString(string(tc.Function.Arguments))}
		}
		msg.ToolCalls = append(msg.ToolCalls, call)
	}
	var lp *schemas.TurnLogprobs
	if c.opts.Sampling.Logprobs {
		var entries struct {
			Content []openai.ChatCompletionTokenLogprob `json:"content"`
		}
		_ = json.Unmarshal(ch.Logprobs, &entries) // absent or malformed: none kept, and counted by the caller
		var acc logprobsAcc
		acc.add(entries.Content)
		lp = c.logprobsOf(&acc, &msg)
	}
	c.finishMessage(&msg)
	u := &r.Usage
	return Response{
		Message:      msg,
		FinishReason: rawString(string(ch.FinishReason)),
		Usage: schemas.Usage{
			PromptTokens:       int64(u.PromptTokens),
			CompletionTokens:   int64(u.CompletionTokens),
			TotalTokens:        int64(u.TotalTokens),
			CachedPromptTokens: int64(u.PromptTokensDetails.CachedTokens),
			ReasoningTokens:    int64(u.CompletionTokensDetails.ReasoningTokens),
		},
		Logprobs: lp,
	}, nil
}
