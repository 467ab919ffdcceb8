// Command mkrun writes a finished generate output folder for a prompts file
// without calling a model: every (row, sample) gets a small completed record.
// The resume benchmark uses it to build a 1,000,000-row run in seconds.
//
// With --agent each record is an agent rollout in Hermes' form instead: the
// system turn with one tool, the prompt, a reasoned tool call, its result
// and a reasoned answer (every tenth record ends max_turns after the tool
// result), so readers of the folder (the export benchmark) see the shapes
// they convert. --samples writes that many records per prompt.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/generate/prompts"
)

type doneStage struct{}

func (doneStage) Name() string { return "done" }

func (doneStage) Process(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
	rec.Outcome = schemas.OutcomeCompleted
	rec.Completed = true
	rec.Conversations = []schemas.Turn{{From: "human", Value: rec.Input.Prompt}, {From: "gpt", Value: "<think>\n</think>\ndone"}}
	rec.APICalls = 1
	return []*schemas.Record{rec}, nil
}

// agentStage writes each record as a short agent rollout.
type agentStage struct {
	system string
}

var agentTools = []schemas.Tool{{Type: "function", Function: schemas.FunctionSpec{
	Name:        "terminal",
	Description: "Run a shell command in the sandbox and return its output.",
	Parameters:  json.RawMessage(`{"type": "object", "properties": {"command": {"type": "string", "description": "the command"}, "timeout": {"type": "integer", "description": "seconds"}}, "required": ["command"]}`),
}}}

func (agentStage) Name() string { return "agent" }

func (s agentStage) Process(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
	n := strconv.Itoa(rec.PromptIndex)
	call := schemas.ToolCall{ID: "call_" + n + "_" + strconv.Itoa(rec.Sample), Type: "function",
		Function: schemas.FunctionCall{Name: "terminal", Arguments: `{"command": "grep -c answer notes-` + n + `.txt", "timeout": 30}`}}
	msgs := []schemas.Message{
		{Role: "user", Content: rec.Input.Prompt},
		{Role: "assistant", Reasoning: "I should count the matching lines first, then answer.", ToolCalls: []schemas.ToolCall{call}},
		{Role: "tool", ToolCallID: call.ID, Name: "terminal", Content: `{"output": "` + n + `\n", "exit_code": 0, "error": null}`},
	}
	rec.Outcome, rec.Completed, rec.Partial, rec.APICalls = schemas.OutcomeMaxTurns, false, true, 1
	rec.ReasoningStats = schemas.ReasoningStats{TotalAssistantTurns: 1, TurnsWithReasoning: 1, HasAnyReasoning: true}
	if (rec.PromptIndex+rec.Sample)%10 != 9 {
		msgs = append(msgs, schemas.Message{Role: "assistant", Reasoning: "The tool printed the count.",
			Content: "notes-" + n + ".txt has " + n + " lines with the word answer."})
		rec.Outcome, rec.Completed, rec.Partial, rec.APICalls = schemas.OutcomeCompleted, true, false, 2
		rec.ReasoningStats.TotalAssistantTurns, rec.ReasoningStats.TurnsWithReasoning = 2, 2
	}
	rec.Conversations = schemas.ToShareGPTWithSystem(s.system, msgs)
	rec.ToolsetsUsed = []string{"terminal"}
	rec.Model = "bench"
	return []*schemas.Record{rec}, nil
}

func main() {
	in := flag.String("prompts", "", "prompts file")
	out := flag.String("out", "", "output folder to create")
	samples := flag.Int("samples", 1, "records per prompt")
	agent := flag.Bool("agent", false, "agent rollouts with a tool call and reasoning instead of one-line answers")
	flag.Parse()
	if err := run(*in, *out, *samples, *agent); err != nil {
		fmt.Fprintln(os.Stderr, "mkrun:", err)
		os.Exit(1)
	}
}

func run(in, out string, samples int, agent bool) error {
	o, err := pipeline.OpenOutput(out, pipeline.OutputOptions{Kind: "generate", MaxShardRows: 100000})
	if err != nil {
		return err
	}
	src, err := prompts.Open(in, prompts.Options{Samples: samples, Reject: o.AddReject})
	if err != nil {
		return err
	}
	defer src.Close()
	var stage pipeline.Stage = doneStage{}
	if agent {
		stage = agentStage{system: schemas.HermesSystemPrompt(agentTools)}
	}
	sum, err := pipeline.Run(context.Background(), pipeline.Options{Workers: 4}, src, []pipeline.Stage{stage}, o)
	if cerr := o.Close(); err == nil {
		err = cerr
	}
	fmt.Printf("mkrun: %d records written to %s\n", sum.Written, out)
	return err
}
