package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/fake"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// env starts fakellm with the given scripts and returns a client for it.
func env(t *testing.T, cfg fakellm.Config, retries int) llm.Client {
	t.Helper()
	srv := httptest.NewServer(fakellm.New(cfg))
	t.Cleanup(srv.Close)
	c, err := llm.New(llm.Options{BaseURL: srv.URL + "/v1", MaxRetries: retries, BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond, RequestTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func scripts(t *testing.T, js string) []fakellm.Script {
	t.Helper()
	s, err := fakellm.ParseScripts([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func record(prompt string) *schemas.Record {
	return &schemas.Record{Key: "k#0", Input: &schemas.InputRow{Prompt: prompt}}
}

func run(t *testing.T, o Options, rec *schemas.Record) *schemas.Record {
	t.Helper()
	st, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	out, err := st.Process(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 {
		t.Fatalf("got %d records", len(out))
	}
	return out[0]
}

func TestRolloutRunsToolsAndRecordsTrajectory(t *testing.T) {
	client := env(t, fakellm.Config{Scripts: scripts(t, `{"scripts": [{"match": "^say", "steps": [
		{"reasoning": "run it", "tool_calls": [{"name": "terminal", "arguments": {"command": "echo hi"}}, {"name": "terminal", "arguments": {"command": "exit 3"}}]},
		{"content": "said: {{last_tool}}"}]}]}`)}, 0)
	d := fake.New()
	rec := run(t, Options{Client: client, Model: "m", Driver: d, Toolsets: []string{"terminal"}}, record("say hi"))
	if rec.Outcome != schemas.OutcomeCompleted || !rec.Completed || rec.Partial {
		t.Fatalf("outcome %s completed=%v partial=%v err=%s", rec.Outcome, rec.Completed, rec.Partial, rec.Error)
	}
	if rec.APICalls != 2 {
		t.Errorf("api_calls = %d", rec.APICalls)
	}
	froms := []string{}
	for _, turn := range rec.Conversations {
		froms = append(froms, turn.From)
	}
	if got := strings.Join(froms, ","); got != "system,human,gpt,tool,gpt" {
		t.Fatalf("turns = %s", got)
	}
	gpt := rec.Conversations[2].Value
	if !strings.HasPrefix(gpt, "<think>\nrun it\n</think>\n<tool_call>\n{\"name\": \"terminal\", \"arguments\": {\"command\": \"echo hi\"}}\n</tool_call>") {
		t.Errorf("gpt turn = %q", gpt)
	}
	tool := rec.Conversations[3].Value
	if strings.Count(tool, "<tool_response>") != 2 || !strings.Contains(tool, `"output": "hi\n", "exit_code": 0`) || !strings.Contains(tool, `"exit_code": 3`) {
		t.Errorf("tool turn = %q", tool)
	}
	if ts := rec.ToolStats["terminal"]; ts.Count != 2 || ts.Success != 2 {
		t.Errorf("tool_stats = %+v", rec.ToolStats)
	}
	if len(d.Calls()) != 2 {
		t.Errorf("sandbox calls = %d", len(d.Calls()))
	}
	if !rec.ReasoningStats.HasAnyReasoning || rec.ReasoningStats.TurnsWithReasoning != 1 {
		t.Errorf("reasoning_stats = %+v", rec.ReasoningStats)
	}
}

func TestThreeBadCallsInARowEndAsPartial(t *testing.T) {
	client := env(t, fakellm.Config{Scripts: scripts(t, `{"scripts": [{"match": "bad", "steps": [
		{"tool_calls": [{"name": "web_search", "arguments": {"q": 1}}]},
		{"tool_calls": [{"name": "terminal", "arguments": "{\"command\": \"ls"}]},
		{"tool_calls": [{"name": "terminal", "arguments": {"cmd": "missing required"}}]},
		{"content": "never reached"}]}]}`)}, 0)
	rec := run(t, Options{Client: client, Model: "m", Driver: fake.New(), Toolsets: []string{"terminal"}}, record("bad calls"))
	if rec.Outcome != schemas.OutcomePartial || !rec.Partial {
		t.Fatalf("outcome = %s (%s)", rec.Outcome, rec.Error)
	}
	last := rec.Conversations[len(rec.Conversations)-1]
	if last.From != "tool" || !strings.Contains(last.Value, "missing required") {
		t.Errorf("last turn = %+v", last)
	}
	// Unparseable arguments are recorded as {} (Hermes' rule).
	if !strings.Contains(rec.Conversations[4].Value, `"arguments": {}`) {
		t.Errorf("bad-arguments turn = %q", rec.Conversations[4].Value)
	}
	if rec.ToolStats["terminal"].Failure != 2 || rec.ToolStats["web_search"].Failure != 1 {
		t.Errorf("tool_stats = %+v", rec.ToolStats)
	}
}

func TestGoodCallResetsBadCount(t *testing.T) {
	client := env(t, fakellm.Config{Scripts: scripts(t, `{"scripts": [{"match": "mixed", "steps": [
		{"tool_calls": [{"name": "nope", "arguments": {}}]},
		{"tool_calls": [{"name": "nope", "arguments": {}}]},
		{"tool_calls": [{"name": "terminal", "arguments": {"command": "true"}}]},
		{"tool_calls": [{"name": "nope", "arguments": {}}]},
		{"content": "ok"}]}]}`)}, 0)
	rec := run(t, Options{Client: client, Model: "m", Driver: fake.New(), Toolsets: []string{"terminal"}}, record("mixed"))
	if rec.Outcome != schemas.OutcomeCompleted {
		t.Fatalf("outcome = %s (%s)", rec.Outcome, rec.Error)
	}
}

func TestMaxTurns(t *testing.T) {
	client := env(t, fakellm.Config{Scripts: scripts(t, `{"scripts": [{"match": "loop", "steps": [
		{"tool_calls": [{"name": "terminal", "arguments": {"command": "echo 1"}}]},
		{"tool_calls": [{"name": "terminal", "arguments": {"command": "echo 2"}}]},
		{"tool_calls": [{"name": "terminal", "arguments": {"command": "echo 3"}}]}]}]}`)}, 0)
	rec := run(t, Options{Client: client, Model: "m", Driver: fake.New(), Toolsets: []string{"terminal"}, MaxTurns: 2}, record("loop"))
	if rec.Outcome != schemas.OutcomeMaxTurns || rec.APICalls != 2 {
		t.Fatalf("outcome = %s, api calls %d", rec.Outcome, rec.APICalls)
	}
}

func TestEndpointFailureIsAPIError(t *testing.T) {
	client := env(t, fakellm.Config{Scripts: scripts(t, `{"scripts": [{"match": "x", "steps": [
		{"fault": {"kind": "500", "times": -1}, "content": "never"}]}]}`)}, 1)
	rec := run(t, Options{Client: client, Model: "m", Driver: fake.New()}, record("x"))
	if rec.Outcome != schemas.OutcomeAPIError || !rec.Outcome.Retryable() || rec.Error == "" {
		t.Fatalf("outcome = %s (%s)", rec.Outcome, rec.Error)
	}
}

func TestDeadlineIsTimeout(t *testing.T) {
	client := env(t, fakellm.Config{Scripts: scripts(t, `{"scripts": [{"match": "slow", "steps": [
		{"tool_calls": [{"name": "terminal", "arguments": {"command": "sleep 5"}}]}, {"content": "late"}]}]}`)}, 0)
	rec := run(t, Options{Client: client, Model: "m", Driver: fake.New(), Toolsets: []string{"terminal"}, Timeout: 300 * time.Millisecond}, record("slow"))
	if rec.Outcome != schemas.OutcomeTimeout {
		t.Fatalf("outcome = %s (%s)", rec.Outcome, rec.Error)
	}
}

func TestSandboxFailureIsSandboxError(t *testing.T) {
	client := env(t, fakellm.Config{Scripts: scripts(t, `{"scripts": [{"match": "run", "steps": [
		{"tool_calls": [{"name": "terminal", "arguments": {"command": "ls"}}]}, {"content": "done"}]}]}`)}, 0)
	d := fake.New().On("ls", fake.Response{Err: fmt.Errorf("container gone: %w", sandbox.ErrUnavailable)})
	rec := run(t, Options{Client: client, Model: "m", Driver: d, Toolsets: []string{"terminal"}}, record("run"))
	if rec.Outcome != schemas.OutcomeSandboxError || !strings.Contains(rec.Error, "container gone") {
		t.Fatalf("outcome = %s (%s)", rec.Outcome, rec.Error)
	}
}

func TestHardStopReturnsError(t *testing.T) {
	client := env(t, fakellm.Config{Latency: 2 * time.Second}, 0)
	st, _ := New(Options{Client: client, Model: "m", Driver: fake.New()})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := st.Process(ctx, record("anything"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

func TestOnTerminalEndsRollout(t *testing.T) {
	client := env(t, fakellm.Config{Scripts: scripts(t, `{"scripts": [{"match": "fin", "steps": [
		{"tool_calls": [{"name": "terminal", "arguments": {"command": "echo SENTINEL"}}]}, {"content": "not reached"}]}]}`)}, 0)
	var seen string
	rec := run(t, Options{Client: client, Model: "m", Driver: fake.New(), Toolsets: []string{"terminal"},
		OnTerminal: func(cmd string, res sandbox.Result) (schemas.Outcome, bool) {
			seen = cmd
			return "submitted", strings.HasPrefix(res.Stdout, "SENTINEL")
		}}, record("fin"))
	if rec.Outcome != "submitted" || seen != "echo SENTINEL" || rec.APICalls != 1 {
		t.Fatalf("outcome = %s, seen %q, calls %d", rec.Outcome, seen, rec.APICalls)
	}
}

func TestDistributionIsSeededPerKey(t *testing.T) {
	d := Distributions["balanced"]
	a := d.Sample(7, "row:1#0")
	for i := 0; i < 5; i++ {
		if b := d.Sample(7, "row:1#0"); strings.Join(a, ",") != strings.Join(b, ",") {
			t.Fatalf("draw changed: %v vs %v", a, b)
		}
	}
	counts := map[string]int{}
	for i := 0; i < 2000; i++ {
		for _, ts := range d.Sample(7, fmt.Sprintf("row:%d#0", i)) {
			counts[ts]++
		}
	}
	// Each toolset is included independently with p=0.5; when neither is
	// drawn (p=0.25) the most likely one, ties broken by name, is used: so
	// file ≈ 0.75 and terminal ≈ 0.5 of 2000.
	if counts["file"] < 1400 || counts["file"] > 1600 || counts["terminal"] < 900 || counts["terminal"] > 1100 {
		t.Errorf("draw counts = %v", counts)
	}
}

// TestSystemPromptIsSentButNotRecorded: --system-prompt reaches the model
// as the first message and stays out of the trajectory, as in Hermes.
func TestSystemPromptIsSentButNotRecorded(t *testing.T) {
	var first atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct{ Role, Content string } `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		if len(body.Messages) > 0 {
			first.Store(body.Messages[0].Role + ":" + body.Messages[0].Content)
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()
	c, err := llm.New(llm.Options{BaseURL: srv.URL + "/v1", MaxRetries: 0})
	if err != nil {
		t.Fatal(err)
	}
	rec := run(t, Options{Client: c, Model: "m", Driver: fake.New(), SystemPrompt: "HOUSE-RULES"}, record("hi"))
	if got, _ := first.Load().(string); got != "system:HOUSE-RULES" {
		t.Fatalf("first message sent = %q", got)
	}
	for _, turn := range rec.Conversations {
		if strings.Contains(turn.Value, "HOUSE-RULES") {
			t.Fatalf("system prompt recorded in %s turn", turn.From)
		}
	}
	if len(rec.Conversations) != 3 || rec.Conversations[1].Value != "hi" {
		t.Fatalf("conversations = %+v", rec.Conversations)
	}
}

// TestTimedOutTerminalCallsCountAsFailures: a terminal call that times out,
// by its own command timeout or cut by the rollout deadline, is one failure
// in tool_stats (count = success + failure).
func TestTimedOutTerminalCallsCountAsFailures(t *testing.T) {
	client := env(t, fakellm.Config{Scripts: scripts(t, `{"scripts": [{"match": "slow", "steps": [
		{"tool_calls": [{"name": "terminal", "arguments": {"command": "sleep 3600"}}]}, {"content": "gave up"}]}]}`)}, 0)
	for _, tc := range []struct {
		name           string
		command, whole time.Duration
		outcome        schemas.Outcome
		says           string
	}{
		{"command timeout", 50 * time.Millisecond, 0, schemas.OutcomeCompleted, "command timed out"},
		{"rollout deadline", time.Hour, 200 * time.Millisecond, schemas.OutcomeTimeout, "rollout deadline"},
	} {
		rec := run(t, Options{Client: client, Model: "m", Driver: fake.New(), Toolsets: []string{"terminal"},
			CommandTimeout: tc.command, Timeout: tc.whole}, record("slow"))
		if rec.Outcome != tc.outcome {
			t.Fatalf("%s: outcome = %s (%s)", tc.name, rec.Outcome, rec.Error)
		}
		st := rec.ToolStats["terminal"]
		if st.Count != 1 || st.Failure != 1 || st.Success != 0 || rec.ToolErrorCounts["terminal"] != 1 {
			t.Errorf("%s: terminal stats = %+v, errors %d; want 1 call, 1 failure", tc.name, st, rec.ToolErrorCounts["terminal"])
		}
		var tool string
		for _, turn := range rec.Conversations {
			if turn.From == "tool" {
				tool = turn.Value
			}
		}
		if !strings.Contains(tool, tc.says) {
			t.Errorf("%s: tool turn %q does not say %q", tc.name, tool, tc.says)
		}
	}
}
