package cluster_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/stages/generate/prompts"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/cluster"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// plainStage gives every record a short conversation.
type plainStage struct{}

func (plainStage) Name() string { return "plain" }

func (plainStage) Process(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
	rec.Conversations = []schemas.Turn{{From: "human", Value: "question " + strconv.Itoa(rec.PromptIndex)}, {From: "gpt", Value: "<think>\n</think>\nanswer"}}
	rec.Outcome, rec.Completed, rec.APICalls, rec.DurationMS = schemas.OutcomeCompleted, true, 1, int64(rec.PromptIndex%997)
	return []*schemas.Record{rec}, nil
}

// benchRun builds (once, in dir) a run of shards × rows records: a prompts
// file and one shard folder per index, as generate would write them.
func benchRun(b *testing.B, dir string, shards, rows int) string {
	out := filepath.Join(dir, "out")
	if _, err := os.Stat(filepath.Join(dir, "done")); err == nil {
		return out
	}
	path := filepath.Join(dir, "prompts.jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	parts := make([][]*schemas.Record, shards)
	for i := 0; i < shards*rows; i++ {
		line := fmt.Sprintf(`{"prompt": "question %d"}`, i)
		fmt.Fprintln(w, line)
		rec := &schemas.Record{Key: schemas.RowKey(i, "", []byte(line), 0), PromptIndex: i}
		s := cluster.Of(rec.Key, shards)
		parts[s] = append(parts[s], rec)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	for s, recs := range parts {
		d, err := cluster.Prepare(out, cluster.Spec{Index: s, Count: shards})
		if err != nil {
			b.Fatal(err)
		}
		o, err := pipeline.OpenOutput(d, pipeline.OutputOptions{Mode: pipeline.ModeOverwrite, Kind: "generate", MaxShardRows: 5000,
			Options: map[string]any{"prompts": path}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := pipeline.Run(context.Background(), pipeline.Options{Workers: 2}, pipeline.SliceSource(recs), []pipeline.Stage{plainStage{}}, o); err != nil {
			b.Fatal(err)
		}
		if err := o.Close(); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "done"), nil, 0o600); err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkMerge8x125k merges 8 shards of 125,000 rows each, checked against
// the 1,000,000-line prompts file. The fixture is kept in
// HERMES_PIPE_BENCH_DIR when set (built on the first run), else a temp dir.
//
//	HERMES_PIPE_BENCH_DIR=/tmp/merge-bench go test -run '^$' -bench Merge8x125k -benchtime 1x ./pipeline/cluster/
func BenchmarkMerge8x125k(b *testing.B) {
	dir := os.Getenv("HERMES_PIPE_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	out := benchRun(b, dir, 8, 125000)
	runtime.GC()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m, err := cluster.Merge(context.Background(), out, cluster.MergeOptions{InputKeys: prompts.EachKey})
		if err != nil {
			b.Fatal(err)
		}
		if m.Records != 1000000 || m.Input == nil || m.Input.Keys != 1000000 {
			b.Fatalf("merged %+v", m)
		}
	}
	b.StopTimer()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.Sys)/(1<<20), "MB-sys")
}
