package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// mergeOpts are the options of the merge tests: a row limit well above a
// commit, so commits leave small shards.
func mergeOpts(format string, mode Mode, rows int) OutputOptions {
	return OutputOptions{Mode: mode, Kind: "test", Format: format, ToolVersion: "test", MaxShardRows: rows}
}

// commitSmall commits the records [from, to) as one shard of sub (data/ for
// completed records, failed/ for api_error ones), each costing 0.25.
func commitSmall(t *testing.T, out *Output, from, to int, oc schemas.Outcome) {
	t.Helper()
	sub := DataDir
	if oc.Retryable() {
		sub = FailedDir
	}
	b := &batch{sub: sub}
	for i := from; i < to; i++ {
		rec := &schemas.Record{Key: fmt.Sprintf("k%05d", i), PromptIndex: i}
		complete(rec)
		rec.Outcome = oc
		c := 0.25
		rec.CostUSD = &c
		line, err := EncodeRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		b.rows = append(b.rows, pending{key: rec.Key, outcome: oc, pi: int64(i), rec: rec, line: line})
	}
	if err := out.commit(b); err != nil {
		t.Fatal(err)
	}
}

// smallShards makes a folder whose data/ holds shards of sizes (records
// k00000… in order) and one failed/ shard of two records after them, and
// returns the open output.
func smallShards(t *testing.T, dir, format string, limit int, sizes ...int) *Output {
	t.Helper()
	out, err := OpenOutput(dir, mergeOpts(format, ModeFresh, limit))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	n := 0
	for _, s := range sizes {
		commitSmall(t, out, n, n+s, schemas.OutcomeCompleted)
		n += s
	}
	commitSmall(t, out, n, n+2, schemas.OutcomeAPIError)
	return out
}

func catBytes(t *testing.T, dir string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Cat(dir, &b); err != nil {
		t.Fatalf("cat: %v", err)
	}
	return b.Bytes()
}

func shardCount(t *testing.T, dir, sub string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, sub, "shard-*"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

func mustStats(t *testing.T, dir string) Statistics {
	t.Helper()
	st, err := Stats(dir)
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	return st
}

func spentOf(t *testing.T, dir string) float64 {
	t.Helper()
	ld, err := loadLedger(filepath.Join(dir, LedgerFile))
	if err != nil {
		t.Fatal(err)
	}
	return ld.ix.cost
}

// folderState is what a merge must not change: cat's bytes, the statistics
// and what the ledger says was spent.
type folderState struct {
	cat   []byte
	stats Statistics
	spent float64
}

func stateOf(t *testing.T, dir string) folderState {
	t.Helper()
	return folderState{catBytes(t, dir), mustStats(t, dir), spentOf(t, dir)}
}

func sameState(t *testing.T, what string, got, want folderState) {
	t.Helper()
	if !bytes.Equal(got.cat, want.cat) {
		t.Fatalf("%s: cat prints %d bytes, want the %d bytes before the merge", what, len(got.cat), len(want.cat))
	}
	if !reflect.DeepEqual(got.stats, want.stats) {
		t.Fatalf("%s: statistics %+v, want %+v", what, got.stats, want.stats)
	}
	if got.spent != want.spent {
		t.Fatalf("%s: the ledger says %v was spent, want %v", what, got.spent, want.spent)
	}
}

func TestMergeSmallShards(t *testing.T) {
	for _, format := range []string{FormatJSONL, FormatParquet} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			// 200 records in 9 commits, with a limit of 50: two full shards
			// stay, the 100 records of the 7 others become 2 shards.
			out := smallShards(t, dir, format, 50, 10, 50, 30, 5, 50, 20, 15, 10, 10)
			want := stateOf(t, dir)
			st, err := out.mergeShards(nil)
			if err != nil {
				t.Fatal(err)
			}
			if st.Sources != 7 || st.Written != 2 || st.Records != 100 {
				t.Fatalf("merge %+v, want 7 shards of 100 records into 2", st)
			}
			if n := shardCount(t, dir, DataDir); n != 4 {
				t.Fatalf("data/ holds %d shards, want 4", n)
			}
			if n := shardCount(t, dir, FailedDir); n != 1 {
				t.Fatalf("failed/ holds %d shards, want its 1 untouched", n)
			}
			mustVerify(t, dir)
			sameState(t, "after the merge", stateOf(t, dir), want)
			// Merging again finds nothing to do.
			if st, err := out.mergeShards(nil); err != nil || st != (mergeStats{}) {
				t.Fatalf("second merge %+v, %v: want nothing", st, err)
			}
			// The folder resumes: every key done, nothing redone.
			out.Close()
			re, err := OpenOutput(dir, mergeOpts(format, ModeResume, 50))
			if err != nil {
				t.Fatal(err)
			}
			defer re.Close()
			for i := range 200 {
				if !re.Done(fmt.Sprintf("k%05d", i)) {
					t.Fatalf("key k%05d is not done after the merge", i)
				}
			}
			if re.adopted != 0 || re.lost != 0 {
				t.Fatalf("reopening adopted %d and lost %d records", re.adopted, re.lost)
			}
		})
	}
}

// TestMergeLeavesFullAndKeptShards: a single small shard is not rewritten,
// a KeepShards output is not merged, a shard holding a record the mode runs
// again (OutputOptions.Retry) stays.
func TestMergeLeavesFullAndKeptShards(t *testing.T) {
	t.Run("one small shard", func(t *testing.T) {
		dir := t.TempDir()
		out := smallShards(t, dir, FormatJSONL, 50, 50, 50, 7)
		if st, err := out.mergeShards(nil); err != nil || st != (mergeStats{}) {
			t.Fatalf("merge %+v, %v: want nothing", st, err)
		}
	})
	t.Run("keep shards", func(t *testing.T) {
		dir := t.TempDir()
		out := smallShards(t, dir, FormatJSONL, 50, 5, 5, 5)
		out.opts.KeepShards = true
		if st, err := out.mergeShards(nil); err != nil || st != (mergeStats{}) {
			t.Fatalf("merge %+v, %v: want nothing", st, err)
		}
		if n := shardCount(t, dir, DataDir); n != 3 {
			t.Fatalf("data/ holds %d shards, want 3", n)
		}
	})
	t.Run("retried outcome", func(t *testing.T) {
		dir := t.TempDir()
		out := smallShards(t, dir, FormatJSONL, 50, 5, 5)
		commitSmall(t, out, 100, 103, schemas.OutcomePartial)
		out.retry[schemas.OutcomePartial] = true
		st, err := out.mergeShards(nil)
		if err != nil || st.Sources != 2 || st.Written != 1 {
			t.Fatalf("merge %+v, %v: want the 2 shards without partial records merged", st, err)
		}
		if n := shardCount(t, dir, DataDir); n != 2 {
			t.Fatalf("data/ holds %d shards, want 2", n)
		}
	})
	t.Run("changed shard", func(t *testing.T) {
		dir := t.TempDir()
		out := smallShards(t, dir, FormatJSONL, 50, 5, 5)
		p := filepath.Join(dir, DataDir, "shard-00001.jsonl")
		b, _ := os.ReadFile(p)
		b[len(b)-3] ^= 1
		os.WriteFile(p, b, 0o644)
		_, err := out.mergeShards(nil)
		if err == nil || !strings.Contains(err.Error(), "SHA-256") {
			t.Fatalf("merge of a changed shard: %v, want its SHA-256 refused", err)
		}
		if n := shardCount(t, dir, DataDir); n != 2 {
			t.Fatalf("data/ holds %d shards, want the 2 left as they were", n)
		}
	})
}

var mergeSteps = append(append([]string(nil), commitSteps...), stepMergeRemoved)

// TestMergeCrashAtEveryStep stops the merge at every step of its protocol,
// in the first and the second merged shard, both as an error (the
// protocol's own clean-up runs) and as a kill -9 (a snapshot of the folder
// at that moment): cat must print the same bytes as before, verify must
// find nothing but the leftovers a crash may leave (a temp file, a shard no
// ledger line names), and a resumed run must end with the folder merged,
// whole, and its statistics and spending unchanged.
func TestMergeCrashAtEveryStep(t *testing.T) {
	for _, format := range []string{FormatJSONL, FormatParquet} {
		for _, step := range mergeSteps {
			for _, nth := range []int{1, 2} {
				t.Run(fmt.Sprintf("%s/%s/%d", format, step, nth), func(t *testing.T) {
					crashMerge(t, format, step, nth)
				})
			}
		}
	}
}

func crashMerge(t *testing.T, format, step string, nth int) {
	dir, snap := t.TempDir(), t.TempDir()
	// 6 shards of 5 with a limit of 20: merged into 2 shards (20 + 10).
	out := smallShards(t, dir, format, 20, 5, 5, 5, 5, 5, 5)
	want := stateOf(t, dir)
	injected := errors.New("injected failure")
	seen := 0
	_, err := out.mergeShards(func(s string) error {
		if s != step {
			return nil
		}
		if seen++; seen == nth {
			copyDir(t, dir, snap)
			return injected
		}
		return nil
	})
	if !errors.Is(err, injected) {
		t.Fatalf("merge: %v, want the injected failure", err)
	}
	out.Close()
	for _, d := range []string{dir, snap} {
		got := catBytes(t, d)
		if !bytes.Equal(got, want.cat) {
			t.Fatalf("%s: cat after the crash prints %d bytes, want the %d before", d, len(got), len(want.cat))
		}
		rep, err := Verify(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range rep.Problems {
			if !strings.Contains(p.Msg, "stray temp file") && !strings.Contains(p.Msg, "not in the ledger") {
				t.Fatalf("%s: verify after the crash: %s", d, p)
			}
		}
		// The next run (a resume with nothing to do) finishes the merge.
		re, err := OpenOutput(d, mergeOpts(format, ModeResume, 20))
		if err != nil {
			t.Fatal(err)
		}
		if re.adopted != 0 || re.lost != 0 {
			t.Fatalf("%s: reopening adopted %d and lost %d records", d, re.adopted, re.lost)
		}
		// The data records only: all done, so the run commits nothing.
		sum, err := Run(context.Background(), Options{Workers: 2}, SliceSource(records(30)), []Stage{completeStage()}, re)
		if err != nil {
			t.Fatal(err)
		}
		re.Close()
		if sum.Skipped != 30 || sum.Processed != 0 {
			t.Fatalf("%s: resume skipped %d and processed %d, want 30 and 0", d, sum.Skipped, sum.Processed)
		}
		if n := shardCount(t, d, DataDir); n != 2 {
			t.Fatalf("%s: data/ holds %d shards after the resume, want 2", d, n)
		}
		mustVerify(t, d)
		sameState(t, d+" after the resume", stateOf(t, d), want)
	}
}
