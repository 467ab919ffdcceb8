package rollout

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/cost"
	"github.com/hermes-pipe/hermes-pipe/sandbox/fake"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// TestProjection: a rollout's first call is projected from the whole
// request (tool definitions included) at one token per three bytes plus
// four a message, and a completion of --max-tokens or 256 tokens; a later
// call from the last reply's prompt and completion plus the messages added
// since, and the largest completion the stage has had, at most
// --max-tokens.
func TestProjection(t *testing.T) {
	tokens := func(u schemas.Usage) float64 { return float64(u.PromptTokens) + 1000*float64(u.CompletionTokens) }
	var largest atomic.Int64
	p := &projector{price: tokens, largest: &largest}
	msgs := []schemas.Message{{Role: "user", Content: "abcdefg"}} // 7 bytes: 3 tokens + 4
	if got := p.projected(msgs); got != 7+1000*projectCompletionTokens {
		t.Errorf("first call %v", got)
	}
	s := &Stage{o: Options{Price: &cost.Price{}}}
	withTools := s.newProjector([]schemas.Tool{toolSpecs["terminal"]})
	withTools.price = tokens
	if withTools.tools < 100 || withTools.projected(msgs) != float64(withTools.tools)+7+1000*projectCompletionTokens {
		t.Errorf("the tool definitions are not projected: %d tokens", withTools.tools)
	}
	capped := &projector{price: tokens, largest: &largest, maxTokens: 50}
	if got := capped.projected(msgs); got != 7+1000*50 {
		t.Errorf("first call with max_tokens 50: %v", got)
	}

	p.answered(1, schemas.Usage{PromptTokens: 40, CompletionTokens: 90})
	msgs = append(msgs, schemas.Message{Role: "assistant", ToolCalls: []schemas.ToolCall{{ID: "c", Function: schemas.FunctionCall{Name: "terminal", Arguments: `{"x":1}`}}}},
		schemas.Message{Role: "tool", Content: "out", ToolCallID: "c", Name: "terminal"})
	// 40 + 90 + (4 + ceil(16/3)) + (4 + ceil(12/3)) = 148
	if got := p.projected(msgs); got != 148+1000*90 {
		t.Errorf("second call %v, want the last reply's 130 tokens plus 18 for the new messages and a completion of 90", got)
	}
	if got := capped.projected(msgs[:1]); got != 7+1000*50 {
		t.Errorf("another rollout's first call with max_tokens 50: %v (the largest completion is 90: capped)", got)
	}
	p.answered(3, schemas.Usage{PromptTokens: 200, CompletionTokens: 10})
	if got := p.projected(msgs); got != 210+1000*90 { // no message since
		t.Errorf("third call %v: the largest completion stays 90", got)
	}
}

// lineJournal keeps a budget's journal lines, safe for the fake's handler
// to read while the rollout writes.
type lineJournal struct {
	mu    sync.Mutex
	lines []string
	usd   []float64
}

func (j *lineJournal) Reserved(key string, call int, res int64, usd float64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lines = append(j.lines, fmt.Sprintf("reserve %d call %d", res, call))
	j.usd = append(j.usd, usd)
	return nil
}

func (j *lineJournal) Capped(float64) {}

func (j *lineJournal) Charged(key string, call int, _ string, res int64, usd float64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lines = append(j.lines, fmt.Sprintf("settle %d call %d", res, call))
	j.usd = append(j.usd, usd)
}

func (j *lineJournal) last() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.lines) == 0 {
		return ""
	}
	return j.lines[len(j.lines)-1]
}

// TestRolloutReservesEachCallBeforeSending: with a run budget and a price,
// every model call's projection is in the budget's journal before the
// endpoint receives the call, and the reply's real cost settles it; against
// the fake every projection covers the real cost. A cap the first call's
// projection does not fit makes no call: the rollout pauses.
func TestRolloutReservesEachCallBeforeSending(t *testing.T) {
	j := &lineJournal{}
	var seen []string
	var mu sync.Mutex
	fk := fakellm.New(fakellm.Config{Scripts: scripts(t, `{"scripts": [{"match": "^go", "steps": [
		{"tool_calls": [{"name": "terminal", "arguments": {"command": "echo one"}}]},
		{"tool_calls": [{"name": "terminal", "arguments": {"command": "seq 1 200"}}]},
		{"content": "done"}]}]}`)})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			mu.Lock()
			seen = append(seen, j.last())
			mu.Unlock()
		}
		fk.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	client, err := llm.New(llm.Options{BaseURL: srv.URL + "/v1", RequestTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	price := &cost.Price{Input: 1e-6, Output: 2e-6}
	st, err := New(Options{Client: client, Model: "m", Driver: fake.New(), Toolsets: []string{"terminal"}, Price: price})
	if err != nil {
		t.Fatal(err)
	}
	b := cost.NewBudget(100, 0)
	b.Keep(j, nil)
	st.UseBudget(b)
	out, err := st.Process(context.Background(), record("go"))
	if err != nil || out[0].Outcome != schemas.OutcomeCompleted || out[0].APICalls != 3 {
		t.Fatalf("rollout: %v %+v", err, out)
	}
	want := []string{"reserve 1 call 1", "settle 1 call 1", "reserve 2 call 2", "settle 2 call 2", "reserve 3 call 3", "settle 3 call 3"}
	if got := fmt.Sprint(j.lines); got != fmt.Sprint(want) {
		t.Fatalf("journal %s, want %s", got, want)
	}
	if got := fmt.Sprint(seen); got != "[reserve 1 call 1 reserve 2 call 2 reserve 3 call 3]" {
		t.Errorf("the endpoint received the calls after %s; want each after its reservation", got)
	}
	total := 0.0
	for i := 0; i < len(j.usd); i += 2 {
		if j.usd[i+1] > j.usd[i] {
			t.Errorf("call %d cost $%g, more than its projection $%g", i/2+1, j.usd[i+1], j.usd[i])
		}
		total += j.usd[i+1]
	}
	if c := *out[0].CostUSD; math.Abs(b.Spent()-total) > 1e-15 || math.Abs(c-total) > 1e-15 {
		t.Errorf("spent $%g, record $%g, calls $%g", b.Spent(), c, total)
	}

	// A cap below the first projection: no call goes out.
	mu.Lock()
	seen = nil
	mu.Unlock()
	st, err = New(Options{Client: client, Model: "m", Driver: fake.New(), Toolsets: []string{"terminal"}, Price: price})
	if err != nil {
		t.Fatal(err)
	}
	st.UseBudget(cost.NewBudget(1e-4, 0))
	out, err = st.Process(context.Background(), record("go"))
	if err != nil || out[0].Outcome != schemas.OutcomeBudgetPaused || !strings.Contains(out[0].Error, "the next call may cost") {
		t.Fatalf("a cap below the first projection: %v %+v", err, out)
	}
	if len(seen) != 0 {
		t.Errorf("the endpoint received %d calls past the cap", len(seen))
	}
}

// TestRolloutCallCutInFlightCountsItsProjection: a model call cut by the
// rollout's deadline while the endpoint works on it may be billed: its
// reservation is settled at its projection, as after a kill, not at 0.
func TestRolloutCallCutInFlightCountsItsProjection(t *testing.T) {
	client := env(t, fakellm.Config{Hang: 1}, 0)
	st, err := New(Options{Client: client, Model: "m", Driver: fake.New(), Toolsets: []string{"terminal"},
		Price: &cost.Price{Input: 1e-6, Output: 2e-6}, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	j := &lineJournal{}
	b := cost.NewBudget(100, 0)
	b.Keep(j, nil)
	st.UseBudget(b)
	out, err := st.Process(context.Background(), record("go"))
	if err != nil || out[0].Outcome != schemas.OutcomeTimeout {
		t.Fatalf("rollout: %v %+v", err, out)
	}
	if got := fmt.Sprint(j.lines); got != "[reserve 1 call 1 settle 1 call 1]" || j.usd[0] <= 0 || j.usd[1] != j.usd[0] || b.Spent() != j.usd[0] {
		t.Errorf("journal %s %v, spent %v: want the cut call settled at its projection", got, j.usd, b.Spent())
	}
}
