package cron

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/llm/fakellm"
	"github.com/hermes-pipe/hermes-pipe/sandbox/fake"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

func server(t *testing.T, cfg fakellm.Config, js string) string {
	t.Helper()
	s, err := fakellm.ParseScripts([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Scripts = s
	srv := httptest.NewServer(fakellm.New(cfg))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func TestAgentJobRunsRolloutAndReturnsFinalAnswer(t *testing.T) {
	url := server(t, fakellm.Config{}, `{"scripts": [{"match": "report", "steps": [
	  {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo 42"}}]},
	  {"reasoning": "done", "content": "The answer is 42."}]}]}`)
	d := fake.New()
	r := &RolloutRunner{Driver: d, DefaultBaseURL: url, DefaultModel: "m"}
	res, err := r.RunAgent(context.Background(), AgentJob{JobID: "j1", ExecutionID: "e1", Prompt: "nightly report", Toolsets: []string{"terminal"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != schemas.OutcomeCompleted || res.Output != "The answer is 42." {
		t.Fatalf("result = %+v", res)
	}
	if calls := d.Calls(); len(calls) != 1 || calls[0].Command != "echo 42" {
		t.Fatalf("sandbox calls = %+v", calls)
	}
}

func TestAgentJobInactivityTimeout(t *testing.T) {
	// The model would answer after ten minutes: only the inactivity timeout
	// can end the job, and the outcome says which one did.
	url := server(t, fakellm.Config{Latency: 10 * time.Minute}, `{"scripts": []}`)
	r := &RolloutRunner{Driver: fake.New(), DefaultBaseURL: url, DefaultModel: "m"}
	res, err := r.RunAgent(context.Background(), AgentJob{JobID: "j", ExecutionID: "e", Prompt: "slow", InactivityTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != schemas.OutcomeTimeout {
		t.Fatalf("result = %+v", res)
	}
}

func TestAgentJobWithoutEndpointFailsClearly(t *testing.T) {
	r := &RolloutRunner{Driver: fake.New()}
	res, err := r.RunAgent(context.Background(), AgentJob{JobID: "j", Prompt: "x"})
	if err != nil || res.Outcome != schemas.OutcomeAPIError || res.Error == "" {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
}
