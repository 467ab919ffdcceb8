package export

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// testTools are the tools every test record offers.
var testTools = []schemas.Tool{
	{Type: "function", Function: schemas.FunctionSpec{Name: "terminal", Description: "Run a command.",
		Parameters: json.RawMessage(`{"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}`)}},
	{Type: "function", Function: schemas.FunctionSpec{Name: "read_file", Description: "Read a file.",
		Parameters: json.RawMessage(`{"type": "object", "properties": {"path": {"type": "string"}}}`)}},
}

// testRecord builds the record of prompt i, sample s. Its kind (i%5):
// 0 reasoning + a terminal call + an answer; 1 a plain answer; 2 a call of
// a tool not offered (a malformed call) + an answer; 3 max_turns after a
// call; 4 a reasoning-only answer. Prompts 5 and 6 have the same text and no
// id; the others have an id.
func testRecord(i, s int) *schemas.Record {
	rec, _ := testChat(i, s)
	return rec
}

// testChat is testRecord with the chat messages its conversations were
// made from.
func testChat(i, s int) (*schemas.Record, []schemas.Message) {
	prompt := fmt.Sprintf("task %d: list the files", i)
	id := fmt.Sprintf("p%02d", i)
	if i == 5 || i == 6 {
		prompt, id = "the same prompt text", ""
	}
	call := func(name, args string) schemas.ToolCall {
		return schemas.ToolCall{ID: fmt.Sprintf("call_%d_%d", i, s), Type: "function", Function: schemas.FunctionCall{Name: name, Arguments: args}}
	}
	msgs := []schemas.Message{{Role: "user", Content: prompt}}
	rec := &schemas.Record{ID: id, PromptIndex: i, Sample: s, Outcome: schemas.OutcomeCompleted, Completed: true, Model: "m-" + fmt.Sprint(i%2),
		Usage: schemas.Usage{TotalTokens: int64(100 + 10*i + (3-s)*7)}, APICalls: 2, ToolStats: map[string]schemas.ToolStat{}}
	answer := fmt.Sprintf("answer %d.%d", i, s)
	switch i % 5 {
	case 0:
		msgs = append(msgs, schemas.Message{Role: "assistant", Reasoning: "I should look.", ToolCalls: []schemas.ToolCall{call("terminal", `{"command": "ls"}`)}},
			schemas.Message{Role: "tool", ToolCallID: fmt.Sprintf("call_%d_%d", i, s), Content: `{"output": "a b", "exit_code": 0}`},
			schemas.Message{Role: "assistant", Reasoning: "Done.", Content: answer})
		rec.ToolStats["terminal"] = schemas.ToolStat{Count: 1, Success: 1}
		rec.ReasoningStats = schemas.ReasoningStats{TotalAssistantTurns: 2, TurnsWithReasoning: 2, HasAnyReasoning: true}
		c := 0.001 * float64(i+1)
		rec.CostUSD = &c
	case 1:
		msgs = append(msgs, schemas.Message{Role: "assistant", Content: answer})
		rec.APICalls = 1
	case 2:
		msgs = append(msgs, schemas.Message{Role: "assistant", ToolCalls: []schemas.ToolCall{call("nope", `{"x": 1}`)}},
			schemas.Message{Role: "tool", ToolCallID: fmt.Sprintf("call_%d_%d", i, s), Content: "Error: unknown tool 'nope'"},
			schemas.Message{Role: "assistant", Content: answer})
		rec.ToolStats["nope"] = schemas.ToolStat{Count: 1, Failure: 1}
	case 3:
		msgs = append(msgs, schemas.Message{Role: "assistant", ToolCalls: []schemas.ToolCall{call("read_file", `{"path": "x"}`)}},
			schemas.Message{Role: "tool", ToolCallID: fmt.Sprintf("call_%d_%d", i, s), Content: "x holds nothing"})
		rec.Outcome, rec.Completed = schemas.OutcomeMaxTurns, false
		rec.ToolStats["read_file"] = schemas.ToolStat{Count: 1, Success: 1}
	case 4:
		msgs = append(msgs, schemas.Message{Role: "assistant", Reasoning: "Think.", Content: answer})
		rec.ReasoningStats = schemas.ReasoningStats{TotalAssistantTurns: 1, TurnsWithReasoning: 1, HasAnyReasoning: true}
		rec.APICalls = 1
	}
	rec.Key = fmt.Sprintf("k%02d#%d", i, s)
	rec.Conversations = schemas.ToShareGPT(msgs, testTools)
	return rec, msgs
}

// testRecords are prompts 0..n-1 with samples each.
func testRecords(n, samples int) []*schemas.Record {
	var recs []*schemas.Record
	for i := range n {
		for s := range samples {
			recs = append(recs, testRecord(i, s))
		}
	}
	return recs
}

type keep struct{}

func (keep) Name() string { return "keep" }
func (keep) Process(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
	return []*schemas.Record{rec}, nil
}

// writeFolder writes recs as a finished generate output folder with the
// run id runID, in shards of at most shardRows records.
func writeFolder(t testing.TB, dir, runID, format string, shardRows int, recs []*schemas.Record) string {
	t.Helper()
	o, err := pipeline.OpenOutput(dir, pipeline.OutputOptions{Kind: "generate", Format: format, MaxShardRows: shardRows,
		Options: map[string]any{"run_id": runID}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = pipeline.Run(context.Background(), pipeline.Options{Workers: 1}, pipeline.SliceSource(recs), []pipeline.Stage{keep{}}, o)
	if cerr := o.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// testFolder is a generate folder of 8 prompts x 3 samples.
func testFolder(t testing.TB) string {
	return writeFolder(t, filepath.Join(t.TempDir(), "run"), "run-a", "", 5, testRecords(8, 3))
}

// run exports with opts, the sources being dirs (one folder each).
func run(t testing.TB, opts Options, dirs ...string) Manifest {
	t.Helper()
	for _, d := range dirs {
		opts.Sources = append(opts.Sources, Source{Path: d, Dirs: []string{d}})
	}
	man, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return man
}

// needInverse skips a test of the messages format while
// schemas.FromShareGPT cannot convert a record ToShareGPT made.
func needInverse(t testing.TB) {
	t.Helper()
	rec := testRecord(0, 0)
	if _, _, err := schemas.FromShareGPT(rec.Conversations); errors.Is(err, schemas.ErrNotInvertible) {
		t.Skip("schemas.FromShareGPT does not convert records back yet (it returns ErrNotInvertible for a record ToShareGPT made)")
	}
}

// readLines reads every line of the JSONL files, in order.
func readLines(t testing.TB, dir string, files []string) []string {
	t.Helper()
	var lines []string
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")...)
	}
	return lines
}

// treeBytes maps every file below dir to its content.
func treeBytes(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
