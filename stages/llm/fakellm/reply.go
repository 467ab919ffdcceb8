package fakellm

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// created is the fixed "created" timestamp of every reply, so bodies are
// byte-stable across runs.
const created = 1700000000

// reply is one assistant answer before it is put on the wire.
type reply struct {
	content          string
	reasoning        string
	field            string // reasoning field; "" = Config.ReasoningField
	toolCalls        []wireToolCall
	finish           string
	promptTokens     int
	completionTokens int
	cachedTokens     int  // prompt tokens of every message but the last
	noLogprobs       bool // the step withholds logprobs (Step.NoLogprobs)
}

// truncate cuts the content to max tokens (words) and reports "length", as a
// real endpoint does when max_tokens is reached.
func (r *reply) truncate(max int) {
	n := 0
	inWord := false
	for i, c := range r.content {
		space := c == ' ' || c == '\n' || c == '\t'
		if !space && !inWord {
			n++
			if n > max {
				r.content = strings.TrimRight(r.content[:i], " \n\t")
				r.finish = "length"
				r.completionTokens = max
				return
			}
		}
		inWord = !space
	}
}

// countTokens estimates completion tokens: one per word of content and
// reasoning, one per four bytes of tool-call arguments.
func countTokens(r reply) int {
	n := len(strings.Fields(r.content)) + len(strings.Fields(r.reasoning))
	for _, tc := range r.toolCalls {
		n += 1 + len(tc.Function.Arguments)/4
	}
	if n == 0 {
		n = 1
	}
	return n
}

// promptTokens estimates prompt tokens as four bytes per token plus four per
// message, the usual rule of thumb.
func promptTokens(msgs []wireMessage) int {
	n := 0
	for i := range msgs {
		n += 4 + len(msgs[i].Content)/4
		for _, tc := range msgs[i].ToolCalls {
			n += len(tc.Function.Arguments) / 4
		}
	}
	return n
}

var vocabulary = strings.Fields(`the agent ran a command and read its output then wrote
the file with care checked each step found an error fixed the test passed
summary of tool calls results were stored in the log user asked for data
model tokens context window budget middle turns compressed kept head tail
shell python script list directory search web page fetched parsed json value`)

// words returns n deterministic words drawn from the vocabulary by a PRNG
// seeded with h.
func words(h uint64, n int) string {
	var b strings.Builder
	b.Grow(n * 7)
	x := h
	for i := 0; i < n; i++ {
		x = mix(x, uint64(i))
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(vocabulary[x%uint64(len(vocabulary))])
	}
	return b.String()
}

// mix is splitmix64 over a and b: a cheap, well-spread hash.
func mix(a, b uint64) uint64 {
	z := a + b*0x9e3779b97f4a7c15 + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// unit maps a hash to [0, 1).
func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }

// usage is the OpenAI usage object, with the details real servers send:
// cached prompt tokens (the fake caches every message but the last, as a
// prefix cache would) and reasoning tokens (the reply's reasoning text).
type usage struct {
	PromptTokens            int           `json:"prompt_tokens"`
	CompletionTokens        int           `json:"completion_tokens"`
	TotalTokens             int           `json:"total_tokens"`
	PromptTokensDetails     *tokenDetails `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *tokenDetails `json:"completion_tokens_details,omitempty"`
}

type tokenDetails struct {
	CachedTokens    *int `json:"cached_tokens,omitempty"`
	ReasoningTokens *int `json:"reasoning_tokens,omitempty"`
}

// reasoningFields are the two fields reasoning may travel in, shared by the
// non-streaming message and the stream delta; set fills the chosen one.
type reasoningFields struct {
	Reasoning        string `json:"reasoning,omitempty"`
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// set puts text in the field named by field ("reasoning" or
// "reasoning_content"); "think" sends reasoning inside the content instead,
// so it sets nothing.
func (f *reasoningFields) set(field, text string) {
	switch field {
	case "reasoning":
		f.Reasoning = text
	case "reasoning_content":
		f.ReasoningContent = text
	}
}

// respMessage differs from chunkDelta in sending "content": null rather than
// leaving it out.
type respMessage struct {
	Role    string  `json:"role"`
	Content *string `json:"content"`
	reasoningFields
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
}

type respChoice struct {
	Index        int           `json:"index"`
	Message      respMessage   `json:"message"`
	Logprobs     *wireLogprobs `json:"logprobs,omitempty"`
	FinishReason string        `json:"finish_reason"`
}

type chatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []respChoice `json:"choices"`
	Usage   usage        `json:"usage"`
}

type chunkDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
	reasoningFields
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
}

type chunkChoice struct {
	Index        int           `json:"index"`
	Delta        chunkDelta    `json:"delta"`
	Logprobs     *wireLogprobs `json:"logprobs,omitempty"`
	FinishReason *string       `json:"finish_reason"`
}

type chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *usage        `json:"usage,omitempty"`
}

// surface applies the reasoning field choice: "think" moves the reasoning
// into a leading <think> block of the content.
func (s *Server) surface(r *reply) (content, reasoningField string) {
	field := r.field
	if field == "" {
		field = s.cfg.ReasoningField
	}
	content = r.content
	if field == "think" && r.reasoning != "" {
		content = "<think>\n" + r.reasoning + "\n</think>\n" + content
	}
	return content, field
}

// writeJSON sends a non-streaming reply (or cuts it off half-way).
func (s *Server) writeJSON(w http.ResponseWriter, p *plan) {
	body, err := s.encodeReply(p)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encode reply: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if p.fault == FaultCutStream {
		_, _ = w.Write(body[:len(body)/2])
		abort(w)
	}
	_, _ = w.Write(body)
}

// encodeReply is the non-streaming chat.completion body of p, the same for
// a direct call and a batch request.
func (s *Server) encodeReply(p *plan) ([]byte, error) {
	content, field := s.surface(&p.reply)
	msg := respMessage{Role: "assistant", ToolCalls: p.reply.toolCalls}
	if content != "" || len(p.reply.toolCalls) == 0 {
		msg.Content = &content
	}
	msg.set(field, p.reply.reasoning)
	resp := chatResponse{
		ID: p.id, Object: "chat.completion", Created: created, Model: p.model,
		Choices: []respChoice{{Message: msg, Logprobs: s.logprobs(p), FinishReason: p.reply.finish}},
		Usage:   p.reply.usage(),
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&resp); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (r *reply) usage() usage {
	u := usage{PromptTokens: r.promptTokens, CompletionTokens: r.completionTokens, TotalTokens: r.promptTokens + r.completionTokens}
	cached := min(r.cachedTokens, r.promptTokens)
	reasoning := min(len(r.reasoning)/4, r.completionTokens)
	u.PromptTokensDetails = &tokenDetails{CachedTokens: &cached}
	u.CompletionTokensDetails = &tokenDetails{ReasoningTokens: &reasoning}
	return u
}

// abort flushes what was written and drops the connection without ending the
// body, so the client sees an unexpected EOF.
func abort(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	panic(http.ErrAbortHandler)
}

// writeStream sends the reply as server-sent events: a role chunk, reasoning
// and content in pieces, each tool call as a header delta (id, name) followed
// by argument fragments, a finish chunk, an optional usage chunk and [DONE].
func (s *Server) writeStream(w http.ResponseWriter, p *plan) {
	content, field := s.surface(&p.reply)
	var events [][]byte
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	emit := func(c *chunk) {
		buf.Reset()
		buf.WriteString("data: ")
		_ = enc.Encode(c) // Encode ends with '\n'
		buf.WriteByte('\n')
		events = append(events, bytes.Clone(buf.Bytes()))
	}
	base := func() chunk {
		return chunk{ID: p.id, Object: "chat.completion.chunk", Created: created, Model: p.model}
	}
	one := func(d chunkDelta, finish *string) {
		c := base()
		c.Choices = []chunkChoice{{Delta: d, FinishReason: finish}}
		emit(&c)
	}
	empty := ""
	one(chunkDelta{Role: "assistant", Content: &empty}, nil)
	if p.reply.reasoning != "" && field != "think" {
		for _, piece := range split(p.reply.reasoning, 24) {
			var d chunkDelta
			d.set(field, piece)
			one(d, nil)
		}
	}
	for _, piece := range split(content, 24) {
		piece := piece
		one(chunkDelta{Content: &piece}, nil)
	}
	for i, tc := range p.reply.toolCalls {
		idx := i
		head := wireToolCall{Index: &idx, ID: tc.ID, Type: "function"}
		head.Function.Name = tc.Function.Name
		one(chunkDelta{ToolCalls: []wireToolCall{head}}, nil)
		for _, piece := range split(tc.Function.Arguments, 16) {
			var d wireToolCall
			d.Index = &idx
			d.Function.Arguments = piece
			one(chunkDelta{ToolCalls: []wireToolCall{d}}, nil)
		}
	}
	if lp := s.logprobs(p); lp != nil {
		// A real server sends each chunk's entries with its text; the
		// fake sends them in chunks of their own before the finish.
		for _, part := range splitLogprobs(lp, 16) {
			c := base()
			c.Choices = []chunkChoice{{Logprobs: part}}
			emit(&c)
		}
	}
	finish := p.reply.finish
	one(chunkDelta{}, &finish)
	if p.withUsage {
		c := base()
		c.Choices = []chunkChoice{}
		u := p.reply.usage()
		c.Usage = &u
		emit(&c)
	}
	events = append(events, []byte("data: [DONE]\n\n"))

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	cut := len(events)
	if p.fault == FaultCutStream {
		cut = len(events) / 2
	}
	fl, _ := w.(http.Flusher)
	for i, e := range events[:cut] {
		if i > 0 && s.cfg.ChunkDelay > 0 {
			if fl != nil {
				fl.Flush()
			}
			time.Sleep(s.cfg.ChunkDelay)
		}
		_, _ = w.Write(e)
	}
	if p.fault == FaultCutStream {
		abort(w)
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// split cuts s into pieces of about n bytes on rune boundaries.
func split(s string, n int) []string {
	if s == "" {
		return nil
	}
	var out []string
	for len(s) > n {
		i := n
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		if i == 0 {
			i = n
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return append(out, s)
}
