package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/cluster"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/generate/prompts"
)

// echoStage answers every prompt deterministically; outcome per prompt text:
// "fail" gives api_error (retryable).
type echoStage struct{}

func (echoStage) Name() string { return "echo" }

func (echoStage) Process(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
	rec.Conversations = []schemas.Turn{{From: "human", Value: rec.Input.Prompt}, {From: "gpt", Value: "echo " + rec.Input.Prompt}}
	rec.Outcome, rec.Completed = schemas.OutcomeCompleted, true
	if rec.Input.Prompt == "fail" {
		rec.Outcome, rec.Completed = schemas.OutcomeAPIError, false
	}
	rec.DurationMS = int64(10 * (rec.PromptIndex + 1))
	rec.APICalls = 1
	return []*schemas.Record{rec}, nil
}

func writePrompts(t *testing.T, n int, special map[int]string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < n; i++ {
		p := fmt.Sprintf("prompt %d", i%(n/2+1)) // duplicated prompts are distinct rows
		if s, ok := special[i]; ok {
			p = s
		}
		fmt.Fprintf(&b, "{\"prompt\": %q}\n", p)
	}
	b.WriteString("not json\n") // a reject: not a key
	path := filepath.Join(t.TempDir(), "prompts.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runShard runs shard sp of the input into out, as generate does: the
// prompts source skips rows the shard does not own. limit > 0 stops after
// that many records (a shard that did not finish).
func runShard(t *testing.T, out, path string, sp cluster.Spec, samples int, filter func(*schemas.Record) bool) pipeline.Summary {
	t.Helper()
	dir, err := cluster.Prepare(out, sp)
	if err != nil {
		t.Fatal(err)
	}
	o, err := pipeline.OpenOutput(dir, pipeline.OutputOptions{Mode: pipeline.ModeResume, Kind: "generate", MaxShardRows: 7,
		Options: map[string]any{"prompts": path, "samples": samples}})
	if err != nil {
		t.Fatal(err)
	}
	if filter == nil {
		filter = func(r *schemas.Record) bool { return sp.Owns(r.Key) }
	}
	src, err := prompts.Open(path, prompts.Options{Samples: samples, Reject: o.AddReject, Filter: filter})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	sum, err := pipeline.Run(context.Background(), pipeline.Options{Workers: 3, Now: fixedNow}, src, []pipeline.Stage{echoStage{}}, o)
	if cerr := o.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func catAll(t *testing.T, out string) []byte {
	t.Helper()
	dirs, err := cluster.ShardDirs(out)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := cluster.CatAll(dirs, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestOneShardAndSevenShardsAgree: the same input as 1 shard and as 7 gives
// the same records in the same order, every key in exactly one shard, and a
// complete merge.
func TestOneShardAndSevenShardsAgree(t *testing.T) {
	path := writePrompts(t, 120, nil)
	one, seven := t.TempDir(), t.TempDir()
	runShard(t, one, path, cluster.Spec{Index: 0, Count: 1}, 2, nil)
	written := 0
	for i := 6; i >= 0; i-- { // any order
		sum := runShard(t, seven, path, cluster.Spec{Index: i, Count: 7}, 2, nil)
		if sum.Written == 0 || sum.Written > 60 {
			t.Errorf("shard %d wrote %d of 240 records", i, sum.Written)
		}
		written += sum.Written
	}
	if written != 240 {
		t.Fatalf("shards wrote %d records, want 240", written)
	}
	a, b := catAll(t, one), catAll(t, seven)
	if n := bytes.Count(a, []byte("\n")); n != 240 {
		t.Fatalf("one shard: %d records", n)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("1 shard and 7 shards differ:\n%.400s\n----\n%.400s", a, b)
	}
	var prev [2]int
	for i, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var r schemas.Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		if i > 0 && (r.PromptIndex < prev[0] || r.PromptIndex == prev[0] && r.Sample <= prev[1]) {
			t.Fatalf("line %d out of order: %d/%d after %v", i, r.PromptIndex, r.Sample, prev)
		}
		prev = [2]int{r.PromptIndex, r.Sample}
	}
	for _, out := range []string{one, seven} {
		m, err := cluster.Merge(context.Background(), out, cluster.MergeOptions{InputKeys: prompts.EachKey})
		if err != nil {
			t.Fatal(err)
		}
		if m.Records != 240 || m.Keys != 240 || m.OK != 240 || m.Input == nil || m.Input.Keys != 240 {
			t.Fatalf("merged %+v input %+v", m, m.Input)
		}
		var st pipeline.Statistics
		readJSON(t, filepath.Join(out, pipeline.StatisticsFile), &st)
		if st.Records != 240 || st.Outcomes[schemas.OutcomeCompleted] != 240 || st.APICalls != 240 || st.Duration.MaxMS != 10*120 {
			t.Fatalf("merged statistics: %+v", st)
		}
		var onDisk cluster.Merged
		readJSON(t, filepath.Join(out, cluster.MergedFile), &onDisk)
		if onDisk.ShardCount != m.ShardCount || len(onDisk.Shards) != m.ShardCount || onDisk.Hash != cluster.HashName {
			t.Fatalf("merged.json: %+v", onDisk)
		}
	}
	one1, _ := cluster.Merge(context.Background(), one, cluster.MergeOptions{InputKeys: prompts.EachKey})
	seven1, _ := cluster.Merge(context.Background(), seven, cluster.MergeOptions{InputKeys: prompts.EachKey})
	var s1, s7 pipeline.Statistics
	readJSON(t, filepath.Join(one, pipeline.StatisticsFile), &s1)
	readJSON(t, filepath.Join(seven, pipeline.StatisticsFile), &s7)
	s1.Duration.P50MS, s1.Duration.P95MS, s7.Duration.P50MS, s7.Duration.P95MS = 0, 0, 0, 0
	j1, _ := json.Marshal(s1)
	j7, _ := json.Marshal(s7)
	if !bytes.Equal(j1, j7) || one1.Records != seven1.Records {
		t.Fatalf("statistics differ beyond percentiles:\n%s\n%s", j1, j7)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func mustIncomplete(t *testing.T, out string, opts cluster.MergeOptions, want ...string) {
	t.Helper()
	opts.InputKeys = prompts.EachKey
	_, err := cluster.Merge(context.Background(), out, opts)
	var inc *cluster.IncompleteError
	if !errors.As(err, &inc) {
		t.Fatalf("merge: %v, want an incomplete run", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("merge error lacks %q:\n%v", w, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, cluster.MergedFile)); !os.IsNotExist(err) {
		t.Errorf("incomplete merge left %s: %v", cluster.MergedFile, err)
	}
}

func TestMergeFindsEveryKindOfGap(t *testing.T) {
	path := writePrompts(t, 60, map[int]string{17: "fail"})
	out := t.TempDir()
	for i := 0; i < 3; i++ {
		runShard(t, out, path, cluster.Spec{Index: i, Count: 4}, 1, nil)
	}
	mustIncomplete(t, out, cluster.MergeOptions{InputKeys: prompts.EachKey}, "shard-3-of-4: missing")

	runShard(t, out, path, cluster.Spec{Index: 3, Count: 4}, 1, nil)
	failing := cluster.Of(mustKey(t, path, 17), 4)
	mustIncomplete(t, out, cluster.MergeOptions{InputKeys: prompts.EachKey}, fmt.Sprintf("shard-%d-of-4: 1 rows await a retry (api_error ×1): run index %d again", failing, failing))
	if m, err := cluster.Merge(context.Background(), out, cluster.MergeOptions{InputKeys: prompts.EachKey, AllowRetryable: true}); err != nil || m.Retryable != 1 || m.Keys != 59 {
		t.Fatalf("allow retryable: %+v, %v", m, err)
	}

	// An input that grew: the new rows are missing from their shards.
	grown := writePrompts(t, 64, map[int]string{17: "fail"})
	mustIncomplete(t, out, cluster.MergeOptions{InputKeys: prompts.EachKey, Prompts: grown, AllowRetryable: true}, "input keys missing (e.g. row:")
	if _, err := cluster.Merge(context.Background(), out, cluster.MergeOptions{InputKeys: prompts.EachKey, Prompts: grown, AllowRetryable: true, NoInput: true}); err != nil {
		t.Fatalf("no-input: %v", err)
	}

	// A shard folder written without its filter holds keys of other shards.
	bad := t.TempDir()
	for i := 0; i < 2; i++ {
		filter := func(*schemas.Record) bool { return true }
		if i == 0 {
			filter = nil
		}
		runShard(t, bad, path, cluster.Spec{Index: i, Count: 2}, 1, filter)
	}
	mustIncomplete(t, bad, cluster.MergeOptions{InputKeys: prompts.EachKey, AllowRetryable: true}, "shard-1-of-2: holds keys another shard owns")

	// A damaged shard fails verify.
	dirs, err := cluster.ShardDirs(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dirs[2], "stray.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustIncomplete(t, out, cluster.MergeOptions{InputKeys: prompts.EachKey, AllowRetryable: true}, "shard-2-of-4: verify found")
}

func mustKey(t *testing.T, path string, index int) string {
	t.Helper()
	src, err := prompts.Open(path, prompts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for {
		rec, err := src.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if rec.PromptIndex == index {
			return rec.Key
		}
	}
}

func TestStatusCountsDoneFailedRemaining(t *testing.T) {
	path := writePrompts(t, 40, map[int]string{3: "fail"})
	out := t.TempDir()
	runShard(t, out, path, cluster.Spec{Index: 1, Count: 3}, 1, nil)
	now := time.Now()
	sts, err := cluster.Status(context.Background(), out, cluster.StatusOptions{InputKeys: prompts.EachKey, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if len(sts) != 3 || sts[0].Started || !sts[1].Started {
		t.Fatalf("status: %+v", sts)
	}
	total := 0
	for _, s := range sts {
		total += s.Expected
	}
	if total != 40 {
		t.Fatalf("expected keys sum to %d, want 40: %+v", total, sts)
	}
	s := sts[1]
	failShard := cluster.Of(mustKey(t, path, 3), 3)
	wantRetry := 0
	if failShard == 1 {
		wantRetry = 1
	}
	if s.Done != s.Expected-wantRetry || s.Retryable != wantRetry || s.Remaining != wantRetry || s.Rate <= 0 || s.LastCommit.IsZero() {
		t.Fatalf("shard 1: %+v", s)
	}
	if sts[0].Remaining != sts[0].Expected || sts[0].Done != 0 {
		t.Fatalf("shard 0: %+v", sts[0])
	}
	var b bytes.Buffer
	if err := cluster.WriteStatus(&b, sts, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "not started") || !strings.Contains(b.String(), "total") {
		t.Fatalf("table:\n%s", b.String())
	}
}

// TestMergeRefusesShardWithoutLedger: a shard folder whose ledger was
// removed while its shards remain makes merge incomplete, naming the repair
// command, instead of merging it as empty; after repair the merge is whole.
func TestMergeRefusesShardWithoutLedger(t *testing.T) {
	path := writePrompts(t, 40, nil)
	out := t.TempDir()
	for i := 0; i < 2; i++ {
		runShard(t, out, path, cluster.Spec{Index: i, Count: 2}, 1, nil)
	}
	dirs, err := cluster.ShardDirs(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dirs[1], pipeline.LedgerFile)); err != nil {
		t.Fatal(err)
	}
	mustIncomplete(t, out, cluster.MergeOptions{}, "shard-1-of-2: verify found", "hermes-pipe repair "+dirs[1])
	if _, err := pipeline.Repair(dirs[1]); err != nil {
		t.Fatal(err)
	}
	if m, err := cluster.Merge(context.Background(), out, cluster.MergeOptions{InputKeys: prompts.EachKey}); err != nil || m.Keys != 40 {
		t.Fatalf("merge after repair: %+v, %v", m, err)
	}
}

// fixedNow is the clock of the records' metadata.timestamp, so runs of the
// same input compare byte for byte.
func fixedNow() time.Time { return time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC) }
