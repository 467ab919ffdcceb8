package llm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// The client's Sampling reaches the server in every body, the Batch API's
// too; a request's own MaxTokens and Temperature replace
// the client's (and an Extra field of the same name); unset, nothing is sent.
func TestSamplingOnTheWire(t *testing.T) {
	var mu sync.Mutex
	var bodies []map[string]json.RawMessage
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]json.RawMessage
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		bodies = append(bodies, m)
		mu.Unlock()
		okReply(w, r)
	}))
	defer srv.Close()
	temp, topP, seed := 0.7, 0.9, int64(-3)
	s := Sampling{Temperature: &temp, TopP: &topP, MaxTokens: 64, Seed: &seed,
		Extra: map[string]any{"top_k": 20, "chat_template_kwargs": map[string]any{"enable_thinking": false}}}
	want := map[string]string{"temperature": "0.7", "top_p": "0.9", "max_tokens": "64", "seed": "-3", "top_k": "20", "chat_template_kwargs": `{"enable_thinking":false}`}
	fields := func(m map[string]json.RawMessage) map[string]string {
		out := map[string]string{}
		for _, k := range []string{"temperature", "top_p", "max_tokens", "seed", "top_k", "chat_template_kwargs", "min_p"} {
			if v, ok := m[k]; ok {
				out[k] = string(v)
			}
		}
		return out
	}
	check := func(name string, got, want map[string]string) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: sent %v, want %v", name, got, want)
			return
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: sent %v, want %v", name, got, want)
				return
			}
		}
	}
	c, _ := newClient(t, srv.URL, Options{Sampling: s})
	if _, err := c.Chat(context.Background(), userReq("x")); err != nil {
		t.Fatal(err)
	}
	check("client sampling", fields(bodies[len(bodies)-1]), want)
	own := 0.3
	req := userReq("x")
	req.MaxTokens, req.Temperature = 10, &own
	if _, err := c.Chat(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	mine := map[string]string{}
	for k, v := range want {
		mine[k] = v
	}
	mine["max_tokens"], mine["temperature"] = "10", "0.3"
	check("request's own", fields(bodies[len(bodies)-1]), mine)

	extraOnly := Sampling{Extra: map[string]any{"max_tokens": 5, "temperature": 1}}
	c, _ = newClient(t, srv.URL, Options{Sampling: extraOnly})
	if _, err := c.Chat(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	check("request's own over Extra", fields(bodies[len(bodies)-1]), map[string]string{"max_tokens": "10", "temperature": "0.3"})

	c, _ = newClient(t, srv.URL, Options{})
	if _, err := c.Chat(context.Background(), userReq("x")); err != nil {
		t.Fatal(err)
	}
	check("unset", fields(bodies[len(bodies)-1]), map[string]string{})

	bc, err := NewBatch(Options{BaseURL: srv.URL + "/v1", Model: "m", Sampling: s})
	if err != nil {
		t.Fatal(err)
	}
	body, err := bc.Body(userReq("x"))
	if err != nil {
		t.Fatal(err)
	}
	var bm map[string]json.RawMessage
	if err := json.Unmarshal(body, &bm); err != nil {
		t.Fatal(err)
	}
	check("batch body", fields(bm), want)
}

func TestSamplingRefused(t *testing.T) {
	neg, one := -0.1, 1.0
	for name, s := range map[string]Sampling{
		"negative temperature":  {Temperature: &neg},
		"top_p 0":               {TopP: new(float64)},
		"negative max tokens":   {MaxTokens: -1},
		"extra names messages":  {Extra: map[string]any{"messages": nil}},
		"extra twice top_p":     {TopP: &one, Extra: map[string]any{"top_p": 0.5}},
		"extra names the model": {Extra: map[string]any{"model": "x"}},
	} {
		if _, err := New(Options{BaseURL: "http://127.0.0.1:1/v1", Sampling: s}); !errors.Is(err, ErrSampling) {
			t.Errorf("%s: New = %v, want ErrSampling", name, err)
		}
	}
}
