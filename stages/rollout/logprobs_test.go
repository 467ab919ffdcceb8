package rollout

import (
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox/fake"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// TestRolloutKeepsLogprobsAtTheirGPTTurns runs a rollout of four model
// replies (two with tool calls, one without logprobs, a final answer)
// against the fake asking for logprobs with token ids: each reply that had
// logprobs is kept at the index of its gpt turn in the conversations, with
// one entry per completion token; the one without is counted, not kept.
func TestRolloutKeepsLogprobsAtTheirGPTTurns(t *testing.T) {
	srv := httptest.NewServer(fakellm.New(fakellm.Config{Scripts: scripts(t, `{"scripts": [{"match": "^go", "steps": [
		{"reasoning": "look", "tool_calls": [{"name": "terminal", "arguments": {"command": "echo a"}}, {"name": "terminal", "arguments": {"command": "echo b"}}]},
		{"content": "again", "no_logprobs": true, "tool_calls": [{"name": "terminal", "arguments": {"command": "echo c"}}]},
		{"content": "once more", "tool_calls": [{"name": "terminal", "arguments": {"command": "echo d"}}]},
		{"content": "all done: {{last_tool}}"}]}]}`)}))
	t.Cleanup(srv.Close)
	client, err := llm.New(llm.Options{BaseURL: srv.URL + "/v1", RequestTimeout: 30 * time.Second,
		Sampling: llm.Sampling{Logprobs: true, LogprobTokenIDs: true}})
	if err != nil {
		t.Fatal(err)
	}
	var missing atomic.Int64
	rec := run(t, Options{Client: client, Model: "m", Driver: fake.New(), Toolsets: []string{"terminal"},
		SystemPrompt: "be brief", Logprobs: true, LogprobsMissing: &missing}, record("go"))
	if rec.Outcome != schemas.OutcomeCompleted || rec.APICalls != 4 {
		t.Fatalf("outcome %s after %d calls: %s", rec.Outcome, rec.APICalls, rec.Error)
	}
	if missing.Load() != 1 {
		t.Errorf("replies without logprobs counted %d, want 1", missing.Load())
	}
	var gpt []int
	for i, tn := range rec.Conversations {
		if tn.From == "gpt" {
			gpt = append(gpt, i)
		}
	}
	if len(gpt) != 4 || len(rec.Logprobs) != 3 {
		t.Fatalf("gpt turns %v, logprobs of %d turns", gpt, len(rec.Logprobs))
	}
	want := []int{gpt[0], gpt[2], gpt[3]} // the second reply sent none
	total := 0
	for i, lp := range rec.Logprobs {
		if lp.Turn != want[i] || rec.Conversations[lp.Turn].From != "gpt" {
			t.Errorf("logprobs %d at turn %d, want %d", i, lp.Turn, want[i])
		}
		if len(lp.Tokens) == 0 || len(lp.Logprobs) != len(lp.Tokens) || len(lp.TokenIDs) != len(lp.Tokens) {
			t.Errorf("turn %d: %d tokens, %d logprobs, %d ids", lp.Turn, len(lp.Tokens), len(lp.Logprobs), len(lp.TokenIDs))
		}
		total += len(lp.Tokens)
	}
	// Every completion token of the kept replies, and none of the other.
	if total >= int(rec.Usage.CompletionTokens) || total == 0 {
		t.Errorf("%d tokens kept of %d completion tokens", total, rec.Usage.CompletionTokens)
	}
}

// TestRolloutWithoutLogprobsKeepsNone: a stage not asked keeps nothing even
// from a client that gets logprobs.
func TestRolloutWithoutLogprobsKeepsNone(t *testing.T) {
	srv := httptest.NewServer(fakellm.New(fakellm.Config{}))
	t.Cleanup(srv.Close)
	client, err := llm.New(llm.Options{BaseURL: srv.URL + "/v1", Sampling: llm.Sampling{Logprobs: true}})
	if err != nil {
		t.Fatal(err)
	}
	rec := run(t, Options{Client: client, Model: "m", Driver: fake.New(), Toolsets: []string{"terminal"}}, record("hello"))
	if rec.Outcome != schemas.OutcomeCompleted || rec.Logprobs != nil {
		t.Fatalf("outcome %s, logprobs %+v", rec.Outcome, rec.Logprobs)
	}
}

// TestAlignLogprobsDropsWhatHasNoTurn: an ordinal past the messages, or of
// an assistant message written as the human turn, is dropped.
func TestAlignLogprobsDropsWhatHasNoTurn(t *testing.T) {
	msgs := []schemas.Message{{Role: "assistant", Content: "first"}, {Role: "assistant", Content: "second"}}
	rec := &schemas.Record{Logprobs: []schemas.TurnLogprobs{{Turn: 0}, {Turn: 1}, {Turn: 2}}}
	alignLogprobs(rec, msgs)
	if len(rec.Logprobs) != 1 || rec.Logprobs[0].Turn != 2 {
		t.Fatalf("aligned %+v", rec.Logprobs)
	}
}
