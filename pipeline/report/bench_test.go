package report_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/pipeline/report"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// BenchmarkSummarize measures the Summary of agent trajectories of about
// 12 KB (what view's index build does per record); MB/s counts JSON text in.
func BenchmarkSummarize(b *testing.B) {
	text := strings.Repeat("the quick brown fox jumps over the lazy dog; ", 30)
	var lines [][]byte
	var total int64
	for i := range 2000 {
		cost := 0.001
		rec := &schemas.Record{Key: fmt.Sprintf("row:%d#0", i), PromptIndex: i, Outcome: schemas.OutcomeCompleted, Completed: true,
			APICalls: 4, Usage: schemas.Usage{PromptTokens: 900, CompletionTokens: 100, TotalTokens: 1000}, CostUSD: &cost,
			ToolsetsUsed: []string{"terminal"}, ToolStats: map[string]schemas.ToolStat{"terminal": {Count: 4, Success: 3, Failure: 1}},
			ToolErrorCounts: map[string]int{"terminal": 1}, Model: "m", DurationMS: 1200}
		rec.Conversations = []schemas.Turn{{From: "system", Value: text}, {From: "human", Value: text}}
		for range 8 {
			rec.Conversations = append(rec.Conversations, schemas.Turn{From: "gpt", Value: text}, schemas.Turn{From: "tool", Value: text})
		}
		line, err := pipeline.EncodeRecord(rec)
		if err != nil {
			b.Fatal(err)
		}
		lines = append(lines, line)
		total += int64(len(line))
	}
	man := &outdir.Manifest{Kind: "generate"}
	b.SetBytes(total)
	b.ResetTimer()
	for range b.N {
		for _, line := range lines {
			if s := report.Summarize(line, man); s.Turns != 18 {
				b.Fatal(s.Turns)
			}
		}
	}
}
