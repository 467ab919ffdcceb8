package cron

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/sandbox/fake"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// An agent execution keeps its trajectory as a record in its own output
// folder, written by the same skeleton as every mode.
func TestAgentExecutionKeepsItsTrajectory(t *testing.T) {
	url := server(t, fakellm.Config{}, `{"scripts": [{"match": "report", "steps": [
	  {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo 42"}}]},
	  {"content": "The answer is 42."}]}]}`)
	dir := RunDir(t.TempDir(), "job1", "exec1")
	r := &RolloutRunner{Driver: fake.New(), DefaultBaseURL: url, DefaultModel: "m"}
	res, err := r.RunAgent(context.Background(), AgentJob{JobID: "job1", ExecutionID: "exec1", Prompt: "nightly report", OutDir: dir})
	if err != nil || res.Outcome != schemas.OutcomeCompleted {
		t.Fatalf("result %+v, %v", res, err)
	}
	if filepath.Base(filepath.Dir(dir)) != "job1" {
		t.Fatalf("run dir %s", dir)
	}
	var b bytes.Buffer
	if err := pipeline.Cat(dir, &b); err != nil {
		t.Fatal(err)
	}
	var rec schemas.Record
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil {
		t.Fatalf("cat: %v\n%s", err, b.Bytes())
	}
	if rec.Key != "exec1" || rec.Outcome != schemas.OutcomeCompleted || len(rec.Conversations) < 4 {
		t.Fatalf("record key %s outcome %s, %d turns", rec.Key, rec.Outcome, len(rec.Conversations))
	}
	if rep, err := pipeline.Verify(dir); err != nil || !rep.OK() {
		t.Fatalf("verify: %+v %v", rep.Problems, err)
	}
}
