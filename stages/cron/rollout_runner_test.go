package cron

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/fake"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
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

// TestAgentJobStreamedTokensAreActivity: a reply that takes three times the
// inactivity timeout to stream, with an event every 150 ms, is progress, as
// in Hermes: the job completes.
func TestAgentJobStreamedTokensAreActivity(t *testing.T) {
	long := strings.Repeat("streamed words arrive ", 44) // about 40 events of 24 bytes
	const delay, timeout = 150 * time.Millisecond, 2 * time.Second
	// The fake sleeps delay before every event but the first, so the reply
	// takes at least this long: the test proves something only if that is
	// past the timeout.
	if least := time.Duration(len(long)/24-1) * delay; least <= timeout {
		t.Fatalf("the stream lasts at least %s, not past the %s timeout: make the reply longer", least, timeout)
	}
	url := server(t, fakellm.Config{ChunkDelay: delay}, `{"scripts": [{"match": "long", "steps": [{"content": "`+long+`"}]}]}`)
	r := &RolloutRunner{Driver: fake.New(), DefaultBaseURL: url, DefaultModel: "m"}
	res, err := r.RunAgent(context.Background(), AgentJob{JobID: "j", ExecutionID: "e", Prompt: "long answer", InactivityTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != schemas.OutcomeCompleted || res.Output != strings.TrimSpace(long) {
		t.Fatalf("result = %+v", res)
	}
}

func TestAgentJobWithoutEndpointFailsClearly(t *testing.T) {
	r := &RolloutRunner{Driver: fake.New(), BaseURLEnv: "HERMES_PIPE_BASE_URL", ModelEnv: "HERMES_PIPE_MODEL"}
	res, err := r.RunAgent(context.Background(), AgentJob{JobID: "j", Prompt: "x"})
	want := "agent job j has no base_url and no model: give the job its own (cron edit j --base-url URL --model NAME), or set HERMES_PIPE_BASE_URL and HERMES_PIPE_MODEL in the environment of cron tick, run and daemon"
	if err != nil || res.Outcome != schemas.OutcomeAPIError || res.Error != want {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	// Only what is missing is named; no flag cron tick or run lacks.
	r.DefaultModel = "m"
	res, _ = r.RunAgent(context.Background(), AgentJob{JobID: "j", Prompt: "x"})
	if !strings.Contains(res.Error, "has no base_url:") || strings.Contains(res.Error, "MODEL") || strings.Contains(res.Error, "pass --base-url") {
		t.Fatalf("model set: %q", res.Error)
	}
}

// A job's own agent settings reach the rollout: its max turns and the API
// key from its variable (named, or the provider's PROVIDER_API_KEY).
func TestAgentJobSettings(t *testing.T) {
	url := server(t, fakellm.Config{}, `{"scripts": [{"match": "report", "steps": [
	  {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo 42"}}]},
	  {"content": "The answer is 42."}]}]}`)
	var keys []string
	env := map[string]string{"OPENROUTER_API_KEY": "or-key", "TEAM_KEY": "team-key"}
	r := &RolloutRunner{Driver: fake.New(), DefaultBaseURL: url, DefaultModel: "m", APIKey: "default-key",
		Getenv: func(k string) string { return env[k] },
		NewClient: func(u, key string) (llm.Client, error) {
			keys = append(keys, key)
			return llm.New(llm.Options{BaseURL: u, APIKey: key, Model: "m"})
		}}
	job := AgentJob{JobID: "j1", ExecutionID: "e1", Prompt: "nightly report"}
	if res, _ := r.RunAgent(context.Background(), job); res.Outcome != schemas.OutcomeCompleted {
		t.Fatalf("default turns: %+v", res)
	}
	job.MaxTurns = 1
	if res, _ := r.RunAgent(context.Background(), job); res.Outcome == schemas.OutcomeCompleted {
		t.Fatalf("max turns 1 still completed two turns: %+v", res)
	}
	for _, j := range []*Job{{Provider: "openrouter"}, {Policy: Policy{APIKeyEnv: "TEAM_KEY"}, Provider: "openrouter"}} {
		job.MaxTurns, job.APIKeyEnv = 0, j.KeyEnv()
		if _, err := r.RunAgent(context.Background(), job); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(keys, ",") != "default-key,default-key,or-key,team-key" {
		t.Fatalf("keys %v", keys)
	}
	job.APIKeyEnv = "UNSET_KEY"
	if res, _ := r.RunAgent(context.Background(), job); res.Outcome != schemas.OutcomeAPIError || !strings.Contains(res.Error, "UNSET_KEY is not set") {
		t.Fatalf("unset key variable: %+v", res)
	}
}

type specDriver struct {
	sandbox.Driver
	images *[]string
}

func (d specDriver) Open(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	*d.images = append(*d.images, spec.Image)
	return d.Driver.Open(ctx, spec)
}

// A job's own sandbox opens its driver: docker with the job's image, ssh
// with its user and host (the session opens at the agent's first command);
// a bad spec is refused at add.
func TestAgentJobSandbox(t *testing.T) {
	url := server(t, fakellm.Config{}, `{"scripts": [{"steps": [
		{"tool_calls": [{"name": "terminal", "arguments": {"command": "true"}}]}, {"content": "done"}]}]}`)
	var opened []string
	var images []string
	r := &RolloutRunner{Driver: fake.New(), DefaultBaseURL: url, DefaultModel: "m",
		OpenDriver: func(scheme string, cfg sandbox.Config) (sandbox.Driver, error) {
			opened = append(opened, scheme+" image="+cfg.Docker.DefaultImage+" host="+cfg.SSH.User+"@"+cfg.SSH.Host)
			return specDriver{fake.New(), &images}, nil
		}}
	for _, sb := range []string{"docker:python:3.11-slim", "ssh:ops@build1:2222"} {
		res, err := r.RunAgent(context.Background(), AgentJob{JobID: "j", ExecutionID: "e", Prompt: "x", Sandbox: sb})
		if err != nil || res.Outcome != schemas.OutcomeCompleted {
			t.Fatalf("%s: %+v %v", sb, res, err)
		}
	}
	if strings.Join(opened, "; ") != "docker image=python:3.11-slim host=@; ssh image= host=ops@build1:2222" {
		t.Fatalf("opened %v", opened)
	}
	if len(images) != 2 || images[0] != "python:3.11-slim" || images[1] != "" {
		t.Fatalf("session images %q", images)
	}
	for _, bad := range []string{"docker", "docker:", "kubernetes:pod", "ssh:a b"} {
		if _, err := NewJob(t.TempDir(), JobSpec{Schedule: "every 1h", Timezone: "UTC", Prompt: "x", Sandbox: bad}, time.Now()); !errors.Is(err, ErrUsage) {
			t.Errorf("sandbox %q accepted: %v", bad, err)
		}
	}
}
