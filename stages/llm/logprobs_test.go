package llm

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// TestLogprobsFromFake asks the fake for logprobs, with and without token
// ids, direct and streamed, through its tool-calling and its answering
// steps: every reply has one entry per completion token its usage counts,
// ids exactly when asked, and the body carries the fields only when asked.
func TestLogprobsFromFake(t *testing.T) {
	sc, err := fakellm.ParseScripts([]byte(echoScript))
	if err != nil {
		t.Fatal(err)
	}
	for _, stream := range []bool{false, true} {
		for _, ids := range []bool{false, true} {
			t.Run(fmt.Sprintf("stream=%v,ids=%v", stream, ids), func(t *testing.T) {
				srv, fake := startFake(t, fakellm.Config{Scripts: sc, KeepRequests: true})
				c, _ := newClient(t, srv.URL, Options{Stream: stream, Sampling: Sampling{Logprobs: true, LogprobTokenIDs: ids}})
				req := userReq("echo banana")
				req.Tools = []schemas.Tool{terminalTool}
				resp, err := c.Chat(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				checkLogprobs(t, "tool step", resp, ids)
				m := resp.Message
				req.Messages = append(req.Messages, m,
					schemas.Message{Role: "tool", ToolCallID: m.ToolCalls[0].ID, Content: "banana"},
					schemas.Message{Role: "tool", ToolCallID: m.ToolCalls[1].ID, Content: "error"})
				resp, err = c.Chat(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				checkLogprobs(t, "answer", resp, ids)
				if !ids && strings.Join(resp.Logprobs.Tokens, "") != "done"+resp.Message.Content {
					t.Errorf("tokens %q do not spell the reasoning and the content %q", resp.Logprobs.Tokens, resp.Message.Content)
				}
				for _, body := range fake.Requests() {
					if !strings.Contains(body, `"logprobs":true`) || strings.Contains(body, `"return_tokens_as_token_ids":true`) != ids {
						t.Errorf("body %s", body)
					}
				}
			})
		}
	}
}

func checkLogprobs(t *testing.T, what string, resp Response, ids bool) {
	t.Helper()
	lp := resp.Logprobs
	n := int(resp.Usage.CompletionTokens)
	if lp == nil || n == 0 || len(lp.Tokens) != n || len(lp.Logprobs) != n {
		t.Fatalf("%s: %d completion tokens, logprobs %+v", what, n, lp)
	}
	if ids != (len(lp.TokenIDs) == n) || (!ids && lp.TokenIDs != nil) {
		t.Fatalf("%s: token ids asked %v, got %v", what, ids, lp.TokenIDs)
	}
	for i, v := range lp.Logprobs {
		if v > 0 || v <= -4 {
			t.Fatalf("%s: logprob %d is %v", what, i, v)
		}
		if ids && lp.Tokens[i] != fmt.Sprintf("token_id:%d", lp.TokenIDs[i]) {
			t.Fatalf("%s: token %q, id %d", what, lp.Tokens[i], lp.TokenIDs[i])
		}
	}
}

// TestLogprobsOffAndWithheld: a client that does not ask sends no field
// and keeps none even when the server sends them; a server that ignores
// the field gives a reply without logprobs (nil), not an error.
func TestLogprobsOffAndWithheld(t *testing.T) {
	sc, err := fakellm.ParseScripts([]byte(`[{"match":"quiet","steps":[{"content":"no logprobs here","no_logprobs":true}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	srv, fake := startFake(t, fakellm.Config{Scripts: sc, KeepRequests: true})
	for _, stream := range []bool{false, true} {
		off, _ := newClient(t, srv.URL, Options{Stream: stream})
		resp, err := off.Chat(context.Background(), userReq("summarise this"))
		if err != nil || resp.Logprobs != nil {
			t.Fatalf("stream=%v off: %v %+v", stream, err, resp.Logprobs)
		}
		on, _ := newClient(t, srv.URL, Options{Stream: stream, Sampling: Sampling{Logprobs: true}})
		resp, err = on.Chat(context.Background(), userReq("quiet please"))
		if err != nil || resp.Logprobs != nil || resp.Message.Content != "no logprobs here" {
			t.Fatalf("stream=%v withheld: %v %+v %q", stream, err, resp.Logprobs, resp.Message.Content)
		}
	}
	if body := fake.Requests()[0]; strings.Contains(body, "logprobs") {
		t.Errorf("a client not asking sent %s", body)
	}
	// A server that sends logprobs unasked: the client keeps none.
	asked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"logprobs":{"content":[{"token":"hi","logprob":-0.5,"bytes":[104,105],"top_logprobs":[]}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	defer asked.Close()
	for _, want := range []bool{false, true} {
		c, _ := newClient(t, asked.URL, Options{Sampling: Sampling{Logprobs: want}})
		resp, err := c.Chat(context.Background(), userReq("x"))
		if err != nil || (resp.Logprobs != nil) != want {
			t.Fatalf("asked %v: %v %+v", want, err, resp.Logprobs)
		}
		if want && (resp.Logprobs.Tokens[0] != "hi" || resp.Logprobs.Logprobs[0] != -0.5 || resp.Logprobs.TokenIDs != nil) {
			t.Fatalf("parsed %+v", resp.Logprobs)
		}
	}
}

// TestLogprobTokenIDsMixed: ids are kept only when every token came as
// one, so a partly parsed list never misaligns with the tokens.
func TestLogprobTokenIDsMixed(t *testing.T) {
	var a logprobsAcc
	a.add(nil)
	if a.result() != nil {
		t.Fatal("no entries gave logprobs")
	}
	a.add(lpEntries("token_id:5", "token_id:7"))
	if got := a.result(); len(got.TokenIDs) != 2 || got.TokenIDs[1] != 7 {
		t.Fatalf("ids %+v", got)
	}
	a.add(lpEntries("plain", "token_id:9"))
	if got := a.result(); got.TokenIDs != nil || len(got.Tokens) != 4 {
		t.Fatalf("mixed %+v", got)
	}
	for _, bad := range []string{"token_id:", "token_id:-1", "token_id:x", "token_id:99999999999999999999"} {
		if _, ok := tokenID(bad); ok {
			t.Errorf("%q read as an id", bad)
		}
	}
}

// TestLogprobsSamplingChecks: token ids need logprobs, and --extra-body may
// not set either field a second time.
func TestLogprobsSamplingChecks(t *testing.T) {
	for _, s := range []Sampling{
		{LogprobTokenIDs: true},
		{Logprobs: true, Extra: map[string]any{"logprobs": false}},
		{Logprobs: true, LogprobTokenIDs: true, Extra: map[string]any{"return_tokens_as_token_ids": false}},
	} {
		if _, err := New(Options{BaseURL: "http://127.0.0.1:1/v1", Sampling: s}); err == nil {
			t.Errorf("%+v accepted", s)
		}
	}
	if _, err := New(Options{BaseURL: "http://127.0.0.1:1/v1", Sampling: Sampling{Logprobs: true, Extra: map[string]any{"top_logprobs": 5}}}); err != nil {
		t.Errorf("top_logprobs through extra: %v", err)
	}
}

func lpEntries(tokens ...string) []openai.ChatCompletionTokenLogprob {
	out := make([]openai.ChatCompletionTokenLogprob, len(tokens))
	for i, t := range tokens {
		out[i] = openai.ChatCompletionTokenLogprob{Token: t, Logprob: -1}
	}
	return out
}

// TestLogprobsOfASecretDropped: a reply that echoes the API key keeps no
// logprobs, since its tokens would spell the key the redacted content
// hides; other replies keep theirs.
func TestLogprobsOfASecretDropped(t *testing.T) {
	const key = "sk-test-0123456789abcdef"
	sc, err := fakellm.ParseScripts([]byte(`[{"match":"^leak","steps":[{"content":"the key is ` + key + `"}]},{"match":"^fine","steps":[{"content":"nothing secret"}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := startFake(t, fakellm.Config{Scripts: sc})
	for _, stream := range []bool{false, true} {
		c, _ := newClient(t, srv.URL, Options{APIKey: key, Stream: stream, Sampling: Sampling{Logprobs: true}})
		resp, err := c.Chat(context.Background(), userReq("leak it"))
		if err != nil || resp.Logprobs != nil || strings.Contains(resp.Message.Content, key) {
			t.Fatalf("stream=%v: %v, logprobs %+v, content %q", stream, err, resp.Logprobs, resp.Message.Content)
		}
		resp, err = c.Chat(context.Background(), userReq("fine"))
		if err != nil || resp.Logprobs == nil {
			t.Fatalf("stream=%v: a reply without a secret lost its logprobs: %v", stream, err)
		}
	}
}

// BenchmarkChatLogprobs is one direct call for a 64-token reply against the
// fake, without and with logprobs (with token ids): what asking for them
// costs a call, server and client together, in time and allocations.
func BenchmarkChatLogprobs(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("logprobs=%v", on), func(b *testing.B) {
			srv := httptest.NewServer(fakellm.New(fakellm.Config{SummaryWords: 64}))
			defer srv.Close()
			c, err := New(Options{BaseURL: srv.URL + "/v1", Model: "bench", Sampling: Sampling{Logprobs: on, LogprobTokenIDs: on}})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				resp, err := c.Chat(context.Background(), userReq(fmt.Sprintf("summarise %d", i)))
				if err != nil {
					b.Fatal(err)
				}
				if on != (resp.Logprobs != nil && len(resp.Logprobs.TokenIDs) == 64) {
					b.Fatalf("logprobs %v: %+v", on, resp.Logprobs)
				}
			}
		})
	}
}
