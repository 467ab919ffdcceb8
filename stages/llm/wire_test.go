package llm

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// TestChatBodyMatchesSDK: the hand-written body of a direct call is, as
// JSON, what the SDK's encoder makes of the same request (the streamed path
// still goes through the SDK), for every role, names, tool calls, text
// that needs escaping, the sampling parameters and extra fields.
func TestChatBodyMatchesSDK(t *testing.T) {
	temp, topP, seed := 0.7, 0.95, int64(-3)
	extra, err := DecodeExtraBody([]byte(`{"top_k": 20, "min_p": 1.05, "chat_template_kwargs": {"enable_thinking": false, "x": "<&>"}}`))
	if err != nil {
		t.Fatal(err)
	}
	tricky := "quote \" backslash \\ tab \t nl \n cr \r bell \a nul \x00 html <a&b> ls \u2028 ps \u2029 emoji 😀 bad \xff end"
	req := Request{
		Messages: []schemas.Message{
			{Role: "system", Content: "sys " + tricky},
			{Role: "developer", Content: "dev"},
			{Role: "user", Content: tricky, Name: "alice"},
			{Role: "assistant", Content: "", ToolCalls: []schemas.ToolCall{
				{ID: "c1", Type: "function", Function: schemas.FunctionCall{Name: "terminal", Arguments: `{"command":"echo \"hi\""}`}},
				{ID: "c2", Function: schemas.FunctionCall{Name: "read_file", Arguments: tricky}},
			}},
			{Role: "tool", Content: "out " + tricky, ToolCallID: "c1", Name: "terminal"},
			{Role: "assistant", Content: "thinking aloud", Name: "bot", ToolCalls: []schemas.ToolCall{{ID: "c3", Function: schemas.FunctionCall{Name: "x", Arguments: "{}"}}}},
			{Role: "assistant", Content: ""},
		},
		Tools: []schemas.Tool{terminalTool, {Function: schemas.FunctionSpec{Name: "bare"}},
			{Type: "function", Function: schemas.FunctionSpec{Name: "spaced", Description: tricky, Parameters: json.RawMessage(`{ "type" : "object", "properties" : {} }`)}}},
		MaxTokens: 77,
	}
	for _, s := range []Sampling{{}, {Temperature: &temp, TopP: &topP, Seed: &seed, MaxTokens: 12, Extra: extra, Logprobs: true, LogprobTokenIDs: true}} {
		c := &client{opts: Options{Model: "m", Sampling: s}}
		body, err := c.chatBody(req)
		if err != nil {
			t.Fatal(err)
		}
		p, err := c.params(req)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(p); err != nil {
			t.Fatal(err)
		}
		var got, want any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("body is not JSON: %v\n%s", err, body)
		}
		if err := json.Unmarshal(buf.Bytes(), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("sampling %+v:\n hand-written %s\n SDK          %s", s, body, buf.Bytes())
		}
	}
}

// TestParseReplyLenient: a reply's members of an unexpected type read as
// absent (as the SDK's decoder read them), whole-float token counts as
// numbers, and only a reply that is not JSON or has no choices is malformed.
func TestParseReplyLenient(t *testing.T) {
	c := &client{red: NewRedactor("", "")}
	r, err := c.parseReply([]byte(`{"choices":[{"message":{"content":null,"reasoning_content":"why","tool_calls":[
		{"id":"a","type":"function","function":{"name":"t","arguments":{"k":1}}},
		{"id":"b","type":"custom","custom":{"name":"u","input":"raw"}}]},"finish_reason":"tool_calls"}],
		"usage":{"prompt_tokens":12.0,"completion_tokens":"7","total_tokens":19,"prompt_tokens_details":{"cached_tokens":4}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Response{FinishReason: "tool_calls", Message: schemas.Message{Role: "assistant", Reasoning: "why", ToolCalls: []schemas.ToolCall{
		{ID: "a", Type: "function", Function: schemas.FunctionCall{Name: "t"}},
		{ID: "b", Type: "function", Function: schemas.FunctionCall{Name: "u", Arguments: "raw"}}}},
		Usage: schemas.Usage{PromptTokens: 12, TotalTokens: 19, CachedPromptTokens: 4}}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got %+v\nwant %+v", r, want)
	}
	for _, bad := range []string{``, `not json`, `{"choices":[]}`, `{"choices":{}}`, `{}`} {
		if _, err := c.parseReply([]byte(bad)); err == nil || !errorsIs(err, ErrMalformed) {
			t.Errorf("%q: got %v, want ErrMalformed", bad, err)
		}
	}
}
