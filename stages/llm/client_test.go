package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// sleepRecorder is the Sleep seam: it records waits instead of sleeping.
type sleepRecorder struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *sleepRecorder) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleepRecorder) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

func newClient(t *testing.T, url string, o Options) (Client, *sleepRecorder) {
	t.Helper()
	rec := &sleepRecorder{}
	o.BaseURL = url + "/v1"
	if o.Model == "" {
		o.Model = "test-model"
	}
	if o.Sleep == nil {
		o.Sleep = rec.sleep
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c, rec
}

func userReq(text string) Request {
	return Request{Messages: []schemas.Message{{Role: "user", Content: text}}}
}

var terminalTool = schemas.Tool{Type: "function", Function: schemas.FunctionSpec{
	Name: "terminal", Description: "run a command",
	Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`),
}}

const echoScript = `[{"name":"echo","match":"^echo (\\w+)","steps":[
  {"reasoning":"I will echo {{m1}}.","tool_calls":[{"name":"terminal","arguments":{"command":"echo {{m1}}"}},{"name":"terminal","arguments":"{\"command\": \"broken"}]},
  {"content":"It printed {{last_tool}}","reasoning":"done","reasoning_field":"reasoning"}
]}]`

func startFake(t *testing.T, cfg fakellm.Config) (*httptest.Server, *fakellm.Server) {
	t.Helper()
	s := fakellm.New(cfg)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, s
}

func TestChatToolLoopAgainstFake(t *testing.T) {
	sc, err := fakellm.ParseScripts([]byte(echoScript))
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := startFake(t, fakellm.Config{Scripts: sc})
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			c, _ := newClient(t, srv.URL, Options{Stream: stream})
			req := userReq("echo banana")
			req.Tools = []schemas.Tool{terminalTool}
			resp, err := c.Chat(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			m := resp.Message
			if m.Role != "assistant" || m.Reasoning != "I will echo banana." || resp.FinishReason != "tool_calls" || resp.Attempts != 1 {
				t.Fatalf("step 0: %+v", resp)
			}
			if len(m.ToolCalls) != 2 || m.ToolCalls[0].Function.Name != "terminal" ||
				m.ToolCalls[0].Function.Arguments != `{"command":"echo banana"}` ||
				m.ToolCalls[1].Function.Arguments != `{"command": "broken` || m.ToolCalls[0].ID == "" || m.ToolCalls[0].ID == m.ToolCalls[1].ID {
				t.Fatalf("tool calls: %+v", m.ToolCalls)
			}
			if resp.Usage.TotalTokens == 0 || resp.Usage.TotalTokens != resp.Usage.PromptTokens+resp.Usage.CompletionTokens {
				t.Fatalf("usage: %+v", resp.Usage)
			}
			req.Messages = append(req.Messages, m,
				schemas.Message{Role: "tool", ToolCallID: m.ToolCalls[0].ID, Content: "banana"},
				schemas.Message{Role: "tool", ToolCallID: m.ToolCalls[1].ID, Content: "error: invalid JSON"})
			resp, err = c.Chat(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Message.Content != "It printed error: invalid JSON" || resp.Message.Reasoning != "done" || resp.FinishReason != "stop" {
				t.Fatalf("step 1: %+v", resp)
			}
		})
	}
}

func TestReasoningCapture(t *testing.T) {
	sc := []fakellm.Script{{Match: "think", Steps: []fakellm.Step{{Content: "Answer.", Reasoning: "Because."}}}}
	for _, field := range []string{"reasoning", "reasoning_content", "think"} {
		srv, _ := startFake(t, fakellm.Config{Scripts: sc, ReasoningField: field})
		for _, stream := range []bool{false, true} {
			for _, move := range []bool{false, true} {
				c, _ := newClient(t, srv.URL, Options{Stream: stream, ThinkToReasoning: move})
				resp, err := c.Chat(context.Background(), userReq("think"))
				if err != nil {
					t.Fatal(err)
				}
				m := resp.Message
				wantR, wantC := "Because.", "Answer."
				if field == "think" && !move {
					// Hermes keeps an inline think block in the content.
					wantR, wantC = "", "<think>\nBecause.\n</think>\nAnswer."
				}
				if m.Reasoning != wantR || m.Content != wantC {
					t.Errorf("field=%s stream=%v move=%v: reasoning %q content %q", field, stream, move, m.Reasoning, m.Content)
				}
			}
		}
	}
}

func TestReasoningBothFieldsAndDetails(t *testing.T) {
	body := `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"hi","reasoning":"A","reasoning_content":"B","reasoning_details":[{"type":"reasoning.summary","summary":"C"},{"type":"reasoning.text","text":"A"}]}}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}))
	defer srv.Close()
	c, _ := newClient(t, srv.URL, Options{})
	resp, err := c.Chat(context.Background(), userReq("x"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Reasoning != "A\n\nB\n\nC" {
		t.Fatalf("reasoning %q", resp.Message.Reasoning)
	}
}

func TestSplitThink(t *testing.T) {
	for in, want := range map[string][3]string{
		"<think>\n a \n</think>\n\nrest": {"a", "rest", "true"},
		"  <think></think>x":             {"", "x", "true"},
		"no think":                       {"", "no think", "false"},
		"<think>open":                    {"", "<think>open", "false"},
		"x <think>a</think>":             {"", "x <think>a</think>", "false"},
	} {
		th, rest, ok := SplitThink(in)
		if th != want[0] || rest != want[1] || fmt.Sprint(ok) != want[2] {
			t.Errorf("SplitThink(%q) = %q, %q, %v", in, th, rest, ok)
		}
	}
}

// scripted is a tiny server that answers attempt n with handlers[n] (the last
// one repeats) and counts attempts.
type scripted struct {
	handlers []http.HandlerFunc
	n        atomic.Int32
	bodies   []string
	mu       sync.Mutex
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.bodies = append(s.bodies, string(b))
	s.mu.Unlock()
	i := int(s.n.Add(1)) - 1
	if i >= len(s.handlers) {
		i = len(s.handlers) - 1
	}
	s.handlers[i](w, r)
}

func okReply(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
}

func status(code int, hdr ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":{"message":"status %d from test","type":"x"}}`, code)
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name string
		hdr  []string
		want time.Duration
	}{
		{"seconds", []string{"Retry-After", "7"}, 7 * time.Second},
		{"http-date", []string{"Retry-After", now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second},
		{"ms wins", []string{"Retry-After", "7", "retry-after-ms", "1250"}, 1250 * time.Millisecond},
		{"capped", []string{"Retry-After", "100000"}, 5 * time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &scripted{handlers: []http.HandlerFunc{status(429, tc.hdr...), okReply}}
			srv := httptest.NewServer(s)
			defer srv.Close()
			c, rec := newClient(t, srv.URL, Options{Now: func() time.Time { return now }})
			resp, err := c.Chat(context.Background(), userReq("x"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Attempts != 2 || resp.Message.Content != "ok" || resp.Usage.TotalTokens != 4 {
				t.Fatalf("resp %+v", resp)
			}
			if w := rec.all(); len(w) != 1 || w[0] != tc.want {
				t.Fatalf("waits %v, want [%v]", w, tc.want)
			}
		})
	}
}

func TestBackoffOn5xxAndConnectionErrors(t *testing.T) {
	s := &scripted{handlers: []http.HandlerFunc{status(500), status(502), status(503), okReply}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, rec := newClient(t, srv.URL, Options{BackoffBase: 100 * time.Millisecond, BackoffMax: 300 * time.Millisecond, Seed: 1})
	resp, err := c.Chat(context.Background(), userReq("x"))
	if err != nil || resp.Attempts != 4 {
		t.Fatalf("resp %+v err %v", resp, err)
	}
	w := rec.all()
	bounds := [][2]time.Duration{{50, 100}, {100, 200}, {150, 300}}
	for i, b := range bounds {
		if w[i] < b[0]*time.Millisecond || w[i] > b[1]*time.Millisecond {
			t.Fatalf("wait %d = %v, want in [%vms, %vms]", i, w[i], b[0], b[1])
		}
	}

	// A closed port is a connection error: retried, then reported.
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	c, rec = newClient(t, url, Options{MaxRetries: 2})
	_, err = c.Chat(context.Background(), userReq("x"))
	var e *Error
	if !errors.As(err, &e) || e.Attempts != 3 || e.Status != 0 || !IsRetryable(err) || len(rec.all()) != 2 {
		t.Fatalf("connection error: %v (%+v)", err, e)
	}
	if !strings.Contains(err.Error(), "llm chat completions: no response after 3 attempts") {
		t.Fatalf("message %q", err)
	}
}

func TestNonRetryableStatus(t *testing.T) {
	for _, code := range []int{400, 401, 404, 422} {
		s := &scripted{handlers: []http.HandlerFunc{status(code), okReply}}
		srv := httptest.NewServer(s)
		c, rec := newClient(t, srv.URL, Options{})
		_, err := c.Chat(context.Background(), userReq("x"))
		srv.Close()
		var e *Error
		if !errors.As(err, &e) || e.Status != code || e.Attempts != 1 || IsRetryable(err) || len(rec.all()) != 0 {
			t.Fatalf("%d: %v", code, err)
		}
		want := fmt.Sprintf("llm chat completions: status %d after 1 attempt: http %d: status %d from test", code, code, code)
		if err.Error() != want {
			t.Fatalf("message %q, want %q", err, want)
		}
	}
	for _, code := range []int{408, 409} {
		s := &scripted{handlers: []http.HandlerFunc{status(code), okReply}}
		srv := httptest.NewServer(s)
		c, _ := newClient(t, srv.URL, Options{})
		resp, err := c.Chat(context.Background(), userReq("x"))
		srv.Close()
		if err != nil || resp.Attempts != 2 {
			t.Fatalf("%d should be retried: %v", code, err)
		}
	}
}

func TestRetriesExhausted(t *testing.T) {
	s := &scripted{handlers: []http.HandlerFunc{status(500)}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, rec := newClient(t, srv.URL, Options{MaxRetries: 2})
	resp, err := c.Chat(context.Background(), userReq("x"))
	if resp.Attempts != 3 || s.n.Load() != 3 || len(rec.all()) != 2 || !IsRetryable(err) {
		t.Fatalf("attempts %d/%d err %v", resp.Attempts, s.n.Load(), err)
	}
	if !strings.Contains(err.Error(), "status 500 after 3 attempts") {
		t.Fatalf("message %q", err)
	}
	c, _ = newClient(t, srv.URL, Options{MaxRetries: -1})
	if _, err := c.Chat(context.Background(), userReq("x")); !strings.Contains(fmt.Sprint(err), "after 1 attempt:") {
		t.Fatalf("MaxRetries<0 should not retry: %v", err)
	}
}

func TestHangBecomesTimeoutThenRetry(t *testing.T) {
	sc := []fakellm.Script{{Match: "slow", Steps: []fakellm.Step{{
		Fault: &fakellm.Fault{Kind: fakellm.FaultHang, Hang: fakellm.Duration(time.Hour)}, Content: "finally",
	}}}}
	srv, fs := startFake(t, fakellm.Config{Scripts: sc})
	for _, stream := range []bool{false, true} {
		// The timeout is long enough for the second, answered attempt on a
		// loaded machine; the first one hangs for an hour.
		c, rec := newClient(t, srv.URL, Options{RequestTimeout: 2 * time.Second, Stream: stream})
		start := time.Now()
		resp, err := c.Chat(context.Background(), userReq(fmt.Sprintf("slow %v", stream)))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Attempts != 2 || resp.Message.Content != "finally" || len(rec.all()) != 1 {
			t.Fatalf("resp %+v waits %v", resp, rec.all())
		}
		if d := time.Since(start); d > 5*time.Minute {
			t.Fatalf("took %v: the request timeout did not cut the hour-long hang", d)
		}
	}
	if st := fs.Stats(); st.Faults["hang"] != 2 {
		t.Fatalf("stats %+v", st)
	}

	// When every attempt hangs the error says it timed out.
	sc[0].Steps[0].Fault.Times = -1
	srv2, _ := startFake(t, fakellm.Config{Scripts: sc})
	c, _ := newClient(t, srv2.URL, Options{RequestTimeout: 50 * time.Millisecond, MaxRetries: 1})
	_, err := c.Chat(context.Background(), userReq("slow"))
	if !errors.Is(err, ErrTimeout) || !IsRetryable(err) || !strings.Contains(err.Error(), "after 2 attempts") {
		t.Fatalf("err %v", err)
	}
}

func TestMalformedRepliesRetried(t *testing.T) {
	for _, kind := range []string{fakellm.FaultMalformed, fakellm.FaultEmpty, fakellm.FaultCutStream} {
		for _, stream := range []bool{false, true} {
			sc := []fakellm.Script{{Match: "m", Steps: []fakellm.Step{{
				Fault: &fakellm.Fault{Kind: kind, Times: 2}, Content: "good",
				ToolCalls: []fakellm.ToolCallSpec{{Name: "t", Arguments: json.RawMessage(`{"a":"0123456789012345678901234567890123456789"}`)}},
			}}}}
			srv, _ := startFake(t, fakellm.Config{Scripts: sc})
			c, _ := newClient(t, srv.URL, Options{Stream: stream})
			resp, err := c.Chat(context.Background(), userReq("m"))
			if err != nil {
				t.Fatalf("%s stream=%v: %v", kind, stream, err)
			}
			if resp.Attempts != 3 || resp.Message.Content != "good" || len(resp.Message.ToolCalls) != 1 ||
				resp.Message.ToolCalls[0].Function.Arguments != `{"a":"0123456789012345678901234567890123456789"}` {
				t.Fatalf("%s stream=%v: %+v", kind, stream, resp)
			}
		}
	}
	// Always malformed: the error is ErrMalformed and retryable.
	s := &scripted{handlers: []http.HandlerFunc{func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices": [`)
	}}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, _ := newClient(t, srv.URL, Options{MaxRetries: 1})
	_, err := c.Chat(context.Background(), userReq("x"))
	if !IsRetryable(err) || !errors.Is(err, ErrMalformed) {
		t.Fatalf("err %v", err)
	}
}

// sseServer answers with the given data events.
func sseServer(events ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			fmt.Fprintf(w, "data: %s\n\n", e)
		}
	}
}

func TestStreamingToolCallAssembly(t *testing.T) {
	ch := func(delta string, finish string) string {
		f := "null"
		if finish != "" {
			f = `"` + finish + `"`
		}
		return `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}]}`
	}
	events := []string{
		ch(`{"role":"assistant","content":null,"reasoning_content":"Let me "}`, ""),
		ch(`{"reasoning_content":"think."}`, ""),
		ch(`{"content":"Calling "}`, ""),
		ch(`{"content":"both."}`, ""),
		ch(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read_file","arguments":""}}]}`, ""),
		ch(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"terminal","arguments":"{\"comm"}}]}`, ""),
		ch(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]}`, ""),
		ch(`{"tool_calls":[{"index":1,"function":{"arguments":"and\":\"ls\"}"}}]}`, ""),
		ch(`{"tool_calls":[{"index":0,"function":{"arguments":"\"a.txt\"}"}}]}`, ""),
		ch(`{}`, "tool_calls"),
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`,
		`[DONE]`,
	}
	s := &scripted{handlers: []http.HandlerFunc{sseServer(events...)}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, _ := newClient(t, srv.URL, Options{Stream: true})
	resp, err := c.Chat(context.Background(), userReq("x"))
	if err != nil {
		t.Fatal(err)
	}
	m := resp.Message
	want := []schemas.ToolCall{
		{ID: "call_a", Type: "function", Function: schemas.FunctionCall{Name: "read_file", Arguments: `{"path":"a.txt"}`}},
		{ID: "call_b", Type: "function", Function: schemas.FunctionCall{Name: "terminal", Arguments: `{"command":"ls"}`}},
	}
	if m.Content != "Calling both." || m.Reasoning != "Let me think." || resp.FinishReason != "tool_calls" ||
		fmt.Sprint(m.ToolCalls) != fmt.Sprint(want) || resp.Usage != (schemas.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}) {
		t.Fatalf("assembled %+v", resp)
	}
	if !strings.Contains(s.bodies[0], `"stream":true`) || !strings.Contains(s.bodies[0], `"include_usage":true`) {
		t.Fatalf("request %s", s.bodies[0])
	}

	// Deltas without an index (some servers) start a new call on a new id.
	events = []string{
		ch(`{"tool_calls":[{"id":"a","function":{"name":"x","arguments":"{}"}}]}`, ""),
		ch(`{"tool_calls":[{"id":"b","function":{"name":"y","arguments":"{"}}]}`, ""),
		ch(`{"tool_calls":[{"function":{"arguments":"}"}}]}`, ""),
		ch(`{}`, "tool_calls"), `[DONE]`,
	}
	s2 := &scripted{handlers: []http.HandlerFunc{sseServer(events...)}}
	srv2 := httptest.NewServer(s2)
	defer srv2.Close()
	c, _ = newClient(t, srv2.URL, Options{Stream: true})
	resp, err = c.Chat(context.Background(), userReq("x"))
	if err != nil || len(resp.Message.ToolCalls) != 2 || resp.Message.ToolCalls[1].Function.Arguments != "{}" || resp.Message.ToolCalls[1].Function.Name != "y" {
		t.Fatalf("no-index deltas: %+v %v", resp, err)
	}

	// A stream that stops before its finish reason is retried.
	s3 := &scripted{handlers: []http.HandlerFunc{sseServer(events[0], `[DONE]`), sseServer(events...)}}
	srv3 := httptest.NewServer(s3)
	defer srv3.Close()
	c, _ = newClient(t, srv3.URL, Options{Stream: true})
	resp, err = c.Chat(context.Background(), userReq("x"))
	if err != nil || resp.Attempts != 2 {
		t.Fatalf("truncated stream: %+v %v", resp, err)
	}
}

func TestRequestOnTheWire(t *testing.T) {
	var got map[string]any
	var raw string
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		raw = string(b)
		auth = r.Header.Get("Authorization")
		_ = json.Unmarshal(b, &got)
		if r.URL.Path != "/v1/chat/completions" {
			w.WriteHeader(404)
			return
		}
		okReply(w, r)
	}))
	defer srv.Close()
	temp := 0.5
	c, _ := newClient(t, srv.URL, Options{APIKey: "k-123"})
	_, err := c.Chat(context.Background(), Request{
		Model: "other-model", MaxTokens: 99, Temperature: &temp,
		Tools: []schemas.Tool{terminalTool},
		Messages: []schemas.Message{
			{Role: "system", Content: "sys"},
			{Role: "user", Content: "hi"},
			{Role: "assistant", Reasoning: "secret", ToolCalls: []schemas.ToolCall{{ID: "c1", Type: "function", Function: schemas.FunctionCall{Name: "terminal", Arguments: `{"command": "ls"`}}}},
			{Role: "tool", ToolCallID: "c1", Content: "out"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if auth != "Bearer k-123" {
		t.Errorf("auth %q", auth)
	}
	if got["model"] != "other-model" || got["max_tokens"] != 99.0 || got["temperature"] != 0.5 || got["stream"] != nil {
		t.Errorf("params: %s", raw)
	}
	if !strings.Contains(raw, `"parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`) {
		t.Errorf("tool schema key order lost: %s", raw)
	}
	if !strings.Contains(raw, `"arguments":"{\"command\": \"ls\""`) || strings.Contains(raw, "secret") {
		t.Errorf("assistant turn: %s", raw)
	}
	msgs := got["messages"].([]any)
	if len(msgs) != 4 || msgs[3].(map[string]any)["tool_call_id"] != "c1" || msgs[0].(map[string]any)["role"] != "system" {
		t.Errorf("messages: %s", raw)
	}

	if _, err := New(Options{BaseURL: "localhost:80"}); err == nil {
		t.Error("bad base URL accepted")
	}
	c, _ = newClient(t, srv.URL, Options{})
	c.(*client).opts.Model = ""
	if _, err := c.Chat(context.Background(), userReq("x")); err == nil || IsRetryable(err) {
		t.Errorf("missing model: %v", err)
	}
	if _, err := c.Chat(context.Background(), Request{Model: "m", Messages: []schemas.Message{{Role: "wizard"}}}); err == nil {
		t.Error("unknown role accepted")
	}
}

func TestContextCancelStopsRetries(t *testing.T) {
	s := &scripted{handlers: []http.HandlerFunc{status(503)}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	c, _ := newClient(t, srv.URL, Options{Sleep: func(context.Context, time.Duration) error {
		cancel()
		return context.Canceled
	}})
	_, err := c.Chat(ctx, userReq("x"))
	if !errors.Is(err, context.Canceled) || IsRetryable(err) || s.n.Load() != 1 {
		t.Fatalf("err %v after %d attempts", err, s.n.Load())
	}
	// Real sleeps honour the context too.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if err := sleepCtx(ctx2, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("sleepCtx: %v", err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		hdr  map[string]string
		want time.Duration
	}{
		{map[string]string{}, -1},
		{map[string]string{"Retry-After": "0"}, 0},
		{map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{map[string]string{"Retry-After": "-3"}, -1},
		{map[string]string{"Retry-After": "soon"}, -1},
		{map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}, 0},
		{map[string]string{"retry-after-ms": "20", "Retry-After": "9"}, 20 * time.Millisecond},
		{map[string]string{"retry-after-ms": "x", "Retry-After": "9"}, 9 * time.Second},
	} {
		h := http.Header{}
		for k, v := range tc.hdr {
			h.Set(k, v)
		}
		if got := parseRetryAfter(h, now); got != tc.want {
			t.Errorf("%v: got %v want %v", tc.hdr, got, tc.want)
		}
	}
}

func TestControllerLearnsFromFake429(t *testing.T) {
	srv, _ := startFake(t, fakellm.Config{Fail429: 1, MaxFaults: 1})
	ctl := NewController(ControllerOptions{Max: 16})
	c, _ := newClient(t, srv.URL, Options{Controller: ctl})
	resp, err := c.Chat(context.Background(), userReq("x"))
	if err != nil || resp.Attempts != 2 {
		t.Fatalf("%+v %v", resp, err)
	}
	if ctl.Limit() != 8 || ctl.InFlight() != 0 || ctl.Cuts() != 1 {
		t.Fatalf("limit %d inflight %d cuts %d", ctl.Limit(), ctl.InFlight(), ctl.Cuts())
	}
}

// TestThousandCallsInFlight sends 1,000 calls through one client and one
// controller to a fake with latency and 429s. Concurrency is proved by a
// condition, not a clock: the server holds every request until a few hundred
// are in flight at once, which a client that serialised its calls would never
// reach (the gate then opens at a generous deadline and the peak assertion
// fails).
func TestThousandCallsInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 2,000 loopback sockets")
	}
	const target = 300
	fs := fakellm.New(fakellm.Config{Latency: 300 * time.Millisecond, Fail429: 0.05})
	var inFlight, peak atomic.Int64
	gate := make(chan struct{})
	var openGate sync.Once
	gateTimer := time.AfterFunc(2*time.Minute, func() { openGate.Do(func() { close(gate) }) })
	defer gateTimer.Stop()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		if n >= target {
			openGate.Do(func() { close(gate) })
		}
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		fs.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ctl := NewController(ControllerOptions{Max: 1000})
	c, _ := newClient(t, srv.URL, Options{Controller: ctl})
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for i := 0; i < 1000; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Chat(context.Background(), userReq(fmt.Sprintf("prompt %d", i))); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if peak.Load() < target {
		t.Fatalf("peak in flight at the server %d, want at least %d: calls are not concurrent", peak.Load(), target)
	}
	if ctl.InFlight() != 0 || fs.Stats().ByStatus["200"] != 1000 {
		t.Fatalf("controller %d in flight; stats %+v", ctl.InFlight(), fs.Stats())
	}
	t.Logf("peak %d in flight, limit now %d after %d cuts", peak.Load(), ctl.Limit(), ctl.Cuts())
}

// writeCounter counts the writes made to the connections it dialled.
type writeCounter struct {
	net.Conn
	n *atomic.Int64
}

func (w writeCounter) Write(p []byte) (int, error) {
	w.n.Add(1)
	return w.Conn.Write(p)
}

// A call goes out in one write, its headers and body together, streamed
// or not: the transport must see the body as one in memory (inMemoryBody),
// or it flushes the headers on their own, and every call costs a second
// write here and a second read at the server.
func TestCallIsOneWrite(t *testing.T) {
	srv, _ := startFake(t, fakellm.Config{})
	for _, stream := range []bool{false, true} {
		var writes atomic.Int64
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return writeCounter{c, &writes}, nil
		}
		c, _ := newClient(t, srv.URL, Options{Stream: stream, HTTPClient: &http.Client{Transport: tr}})
		for i := range 3 {
			if _, err := c.Chat(context.Background(), userReq(strings.Repeat("a long prompt ", 100))); err != nil {
				t.Fatal(err)
			}
			if got := writes.Load(); got != int64(i+1) {
				t.Fatalf("stream=%v: %d writes for %d calls", stream, got, i+1)
			}
		}
	}
}
