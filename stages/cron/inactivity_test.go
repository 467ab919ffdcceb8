package cron

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox/fake"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// The inactivity timeout's error says where the execution stalled: the
// iteration, what it waited for (the model's reply, or a tool call by
// name) and for how long, and the last activity with how long it took.
// The timeout is far above what a scripted reply or an echo takes even on a
// busy machine (a 300 ms one fired during the first reply under load), and
// only the stalled step waits for it.
func TestInactivityErrorNamesLastActivity(t *testing.T) {
	cases := []struct {
		name   string
		script string
		want   []string
	}{
		{"stalled in a tool", `{"scripts": [{"match": "run", "steps": [
		  {"tool_calls": [{"name": "terminal", "arguments": {"command": "slow"}}]},
		  {"content": "never"}]}]}`, []string{
			`^no model reply or tool result for 3s \(inactivity timeout\): `,
			`waiting for the tool call terminal of iteration 1 for \d`,
			`last activity: model reply of iteration 1 \(took \d+(\.\d+)?m?s\)`,
		}},
		{"stalled in the model", `{"scripts": [{"match": "run", "steps": [
		  {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo 1"}}]},
		  {"fault": {"kind": "hang", "hang": "10m"}, "content": "never"}]}]}`, []string{
			`waiting for the model reply of iteration 2 for \d`,
			`last activity: tool call terminal of iteration 1 \(took \d+(\.\d+)?[mµn]?s\)`,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url := server(t, fakellm.Config{}, c.script)
			d := fake.New().On("slow", fake.Response{Delay: time.Hour})
			r := &RolloutRunner{Driver: d, DefaultBaseURL: url, DefaultModel: "m"}
			res, err := r.RunAgent(context.Background(), AgentJob{JobID: "j", ExecutionID: "e", Prompt: "run it", InactivityTimeout: 3 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != schemas.OutcomeTimeout {
				t.Fatalf("result = %+v", res)
			}
			t.Log(res.Error)
			for _, w := range c.want {
				if !regexp.MustCompile(w).MatchString(res.Error) {
					t.Errorf("error %q does not match %s", res.Error, w)
				}
			}
		})
	}
}
