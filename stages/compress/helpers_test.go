package compress

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
	"github.com/hermes-pipe/hermes-pipe/stages/tokenizer"
)

var (
	tokOnce sync.Once
	tokCL   tokenizer.Tokenizer
	tokErr  error
)

// cl100k loads the cl100k_base tokenizer once for the whole package.
func cl100k(t testing.TB) tokenizer.Tokenizer {
	t.Helper()
	tokOnce.Do(func() { tokCL, tokErr = tokenizer.Load("cl100k_base") })
	if tokErr != nil {
		t.Fatal(tokErr)
	}
	return tokCL
}

var vocab = strings.Fields(`alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike
november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu file path value
result error output command directory install build test function return package module 42 7 1999`)

// text returns about n words of deterministic text.
func text(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			if i%13 == 0 {
				b.WriteString(".\n")
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(vocab[r.IntN(len(vocab))])
	}
	return b.String()
}

// trajectory builds a Hermes-shaped conversation: system, human, then steps
// tool-calling gpt turns each answered by a tool turn, and a final gpt turn.
// Each gpt and tool turn holds about words words.
func trajectory(seed uint64, steps, words int) []schemas.Turn {
	r := rand.New(rand.NewPCG(seed, 7))
	turns := []schemas.Turn{
		{From: "system", Value: "You are a function calling AI model.\n<tools>[{\"name\": \"terminal\"}]</tools>"},
		{From: "human", Value: "Task " + text(r, 20)},
	}
	for i := range steps {
		turns = append(turns,
			schemas.Turn{From: "gpt", Value: fmt.Sprintf("<think>\n%s\n</think>\n<tool_call>\n{\"name\": \"terminal\", \"arguments\": {\"command\": \"step %d\"}}\n</tool_call>", text(r, words/2), i)},
			schemas.Turn{From: "tool", Value: "<tool_response>\n" + text(r, words) + "\n</tool_response>"})
	}
	return append(turns, schemas.Turn{From: "gpt", Value: "<think>\n</think>\nDone: " + text(r, 30)})
}

// row encodes a record line with extra fields around conversations, in the
// compact style or Python's spaced style.
func row(id string, turns []schemas.Turn, spaced bool) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(struct {
		ID            string         `json:"id"`
		Conversations []schemas.Turn `json:"conversations"`
		Meta          map[string]int `json:"meta"`
	}{id, turns, map[string]int{"z": 1, "a": 2}})
	line := bytes.TrimSpace(b.Bytes())
	if spaced {
		line = spaceJSON(line)
	}
	return line
}

// writeLines writes lines as a JSONL file.
func writeLines(t testing.TB, path string, lines [][]byte) {
	t.Helper()
	var b bytes.Buffer
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fake starts fakellm on loopback; it is closed with the test.
func fake(t testing.TB, cfg fakellm.Config) (*fakellm.Server, string) {
	t.Helper()
	s := fakellm.New(cfg)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts.URL + "/v1"
}

// client returns an llm client for url with fast retries.
func client(t testing.TB, url string, timeout time.Duration, retries int) llm.Client {
	t.Helper()
	c, err := llm.New(llm.Options{BaseURL: url, RequestTimeout: timeout, MaxRetries: retries,
		BackoffBase: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond, Controller: llm.NewController(llm.ControllerOptions{Max: 16})})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testOptions are small-budget options for runs over inputs into out.
func testOptions(t testing.TB, url string, inputs []string, out string) Options {
	t.Helper()
	in, err := ExpandInputs(inputs)
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		RunConfig:  pipeline.RunConfig{Out: out, Workers: 8, CommitInterval: 10 * time.Millisecond},
		Inputs:     in,
		Tokenizer:  cl100k(t),
		Config:     Config{TargetTokens: 1500, SummaryTokens: 100, TurnOverhead: 4},
		Summary:    SummaryOptions{Client: client(t, url, time.Minute, 2), Model: "m"},
		RowTimeout: 2 * time.Minute,
	}
}

// catLines returns the live records of an output folder in Cat order.
func catLines(t testing.TB, dir string) [][]byte {
	t.Helper()
	var b bytes.Buffer
	if err := pipeline.Cat(dir, &b); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, l := range bytes.Split(bytes.TrimSuffix(b.Bytes(), []byte("\n")), []byte("\n")) {
		if len(l) > 0 {
			out = append(out, l)
		}
	}
	return out
}

// verifyOK runs pipeline.Verify and fails on any problem.
func verifyOK(t testing.TB, dir string) {
	t.Helper()
	rep, err := pipeline.Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		t.Errorf("verify: %s", p)
	}
}

// countTurns counts a conversation as the budget does.
func countTurns(tok tokenizer.Tokenizer, turns []schemas.Turn, overhead int) int {
	n := 0
	for _, t := range turns {
		n += tok.Count(t.Value) + overhead
	}
	return n
}

// decode reads the conversations and compression_metrics of a line.
type outRow struct {
	ID            string          `json:"id"`
	Key           string          `json:"key"`
	Outcome       string          `json:"outcome"`
	Conversations []schemas.Turn  `json:"conversations"`
	Metrics       json.RawMessage `json:"compression_metrics"`
}

func decode(t testing.TB, line []byte) outRow {
	t.Helper()
	var r outRow
	if err := json.Unmarshal(line, &r); err != nil {
		t.Fatalf("decode %q: %v", line, err)
	}
	return r
}

func metricsOf(t testing.TB, r outRow) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Metrics, &m); err != nil {
		t.Fatalf("metrics %s: %v", r.Metrics, err)
	}
	return m
}

func mustWrite(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

var bg = context.Background()

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 1)) }
