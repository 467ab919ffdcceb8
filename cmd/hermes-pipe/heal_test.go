package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// healRun generates 12 records in shards of at most 3 and returns the
// output folder, the generate arguments (for --resume) and its data shards.
func healRun(t *testing.T) (string, []string, []string) {
	t.Helper()
	url := startFake(t, fakellm.Config{}, echoScript)
	var lines []string
	for i := range 12 {
		lines = append(lines, fmt.Sprintf(`{"prompt": "echo row%d"}`, i))
	}
	prompts := writePrompts(t, lines...)
	out := filepath.Join(t.TempDir(), "out")
	args := []string{"generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none", "--shard-rows", "3"}
	if code, _, errs := hp(t, args...); code != 0 {
		t.Fatalf("generate exit %d: %s", code, errs)
	}
	shards, err := filepath.Glob(filepath.Join(out, "data", "shard-*.jsonl"))
	if err != nil || len(shards) < 4 {
		t.Fatalf("want at least 4 shards, got %v %v", shards, err)
	}
	slices.Sort(shards)
	return out, args, shards
}

// catKeys returns the keys cat prints, checking that none repeats.
func catKeys(t *testing.T, dir string) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	for _, r := range catRecords(t, dir) {
		k := r["key"].(string)
		if keys[k] {
			t.Errorf("key %s printed twice", k)
		}
		keys[k] = true
	}
	return keys
}

// TestResumeRedoesLostShards: a shard cut short and a shard removed are
// found when --resume opens the folder; their records are redone, stderr
// says so, and cat and verify pass afterwards.
func TestResumeRedoesLostShards(t *testing.T) {
	out, args, shards := healRun(t)
	want := catKeys(t, out)
	fi, err := os.Stat(shards[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(shards[1], fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(shards[len(shards)-1]); err != nil {
		t.Fatal(err)
	}
	code, _, errs := hp(t, append(args, "--resume")...)
	if code != 0 || strings.Contains(errs, "nothing to do") || !strings.Contains(errs, "damaged") ||
		!strings.Contains(errs, filepath.Base(shards[1])) || !strings.Contains(errs, filepath.Base(shards[len(shards)-1])) {
		t.Fatalf("resume exit %d, want the damaged shards named and redone:\n%s", code, errs)
	}
	if got := catKeys(t, out); !maps.Equal(got, want) {
		t.Errorf("after resume cat has %d keys, want the %d of the first run", len(got), len(want))
	}
	mustVerify(t, out)
	// Healing is done once: the next resume has nothing to do.
	if code, _, errs := hp(t, append(args, "--resume")...); code != 0 || !strings.Contains(errs, "nothing to do") {
		t.Fatalf("second resume exit %d: %s", code, errs)
	}
}

// TestResumeVerifyShardsFindsChangedContent: a flipped byte keeps the size,
// so only --verify-shards finds it; the shard's records are then redone.
func TestResumeVerifyShardsFindsChangedContent(t *testing.T) {
	out, args, shards := healRun(t)
	want := catKeys(t, out)
	data, err := os.ReadFile(shards[0])
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(data), "row")
	data[i] = 'R'
	if err := os.WriteFile(shards[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := hp(t, append(args, "--resume")...); code != 0 || !strings.Contains(errs, "nothing to do") {
		t.Fatalf("resume without --verify-shards: exit %d: %s", code, errs)
	}
	code, _, errs := hp(t, append(args, "--resume", "--verify-shards")...)
	if code != 0 || !strings.Contains(errs, "damaged") || !strings.Contains(errs, "SHA-256") {
		t.Fatalf("resume --verify-shards exit %d, want the changed shard named:\n%s", code, errs)
	}
	if got := catKeys(t, out); !maps.Equal(got, want) {
		t.Errorf("after resume cat has %d keys, want %d", len(got), len(want))
	}
	mustVerify(t, out)
}

// TestMissingLedgerIsAnErrorUntilRepaired: with shards but no ledger (or an
// empty one) cat, stats and verify fail naming the repair command; repair
// rebuilds the ledger, after which verify passes and cat prints every record.
func TestMissingLedgerIsAnErrorUntilRepaired(t *testing.T) {
	for _, how := range []string{"removed", "emptied"} {
		t.Run(how, func(t *testing.T) {
			out, _, _ := healRun(t)
			want := catKeys(t, out)
			ledger := filepath.Join(out, "ledger.jsonl")
			var err error
			if how == "removed" {
				err = os.Remove(ledger)
			} else {
				err = os.Truncate(ledger, 0)
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, cmd := range []string{"cat", "stats", "verify"} {
				code, stdout, errs := hp(t, cmd, out)
				if code != exitFatal || !strings.Contains(stdout+errs, "hermes-pipe repair "+out) {
					t.Errorf("%s with the ledger %s: exit %d, want 1 naming repair:\n%s%s", cmd, how, code, stdout, errs)
				}
			}
			code, stdout, errs := hp(t, "repair", out)
			if code != 0 || !strings.Contains(stdout, fmt.Sprintf("%d records", len(want))) {
				t.Fatalf("repair exit %d:\n%s%s", code, stdout, errs)
			}
			mustVerify(t, out)
			if got := catKeys(t, out); !maps.Equal(got, want) {
				t.Errorf("after repair cat has %d keys, want %d", len(got), len(want))
			}
			// A ledger with lines is not rebuilt.
			if code, _, errs := hp(t, "repair", out); code != exitFatal || !strings.Contains(errs, "only rebuilds a missing or empty ledger") {
				t.Errorf("second repair: exit %d: %s", code, errs)
			}
		})
	}
}

// TestCatRefusesDamagedShards: a flipped byte or a cut-short shard makes
// cat and stats fail, saying what is wrong, with one prefix, not "the folder
// changed while it was read".
func TestCatRefusesDamagedShards(t *testing.T) {
	for _, c := range []struct{ name, want string }{{"flipped", "SHA-256"}, {"truncated", "bytes, the ledger says"}} {
		t.Run(c.name, func(t *testing.T) {
			out, _, shards := healRun(t)
			data, err := os.ReadFile(shards[1])
			if err != nil {
				t.Fatal(err)
			}
			if c.name == "flipped" {
				data[len(data)/2] ^= 0x20
			} else {
				data = data[:len(data)-len(data)/3]
			}
			if err := os.WriteFile(shards[1], data, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, cmd := range []string{"cat", "stats"} {
				code, _, errs := hp(t, cmd, out)
				said := strings.Contains(errs, c.want) || cmd == "stats" && strings.Contains(errs, "the shard is damaged")
				if code != exitFatal || !said || !strings.Contains(errs, "shard-") ||
					strings.Contains(errs, "changed while it was read") || strings.Count(errs, cmd+" "+out+":") > 1 {
					t.Errorf("%s of a %s shard: exit %d, want 1 saying %q once:\n%s", cmd, c.name, code, c.want, errs)
				}
			}
		})
	}
}

// keyedLine is trajLine as a hermes-pipe generate record: key, position and
// outcome completed.
func keyedLine(t *testing.T, id string, pi, steps int) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(trajLine(id, steps, 200)), &m); err != nil {
		t.Fatal(err)
	}
	m["key"], m["prompt_index"], m["sample"], m["outcome"] = "id:"+id+"#0", pi, 0, "completed"
	b, _ := json.Marshal(m)
	return string(b)
}

// TestCompressResumeRetriesSummaryFailed: rows whose summary failed are
// compressed again by --resume, and stats of the compress folder count the
// compress outcomes, not the input's "completed".
func TestCompressResumeRetriesSummaryFailed(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	rows := keyedLine(t, "a", 0, 12) + "\n" + keyedLine(t, "b", 1, 1) + "\n" + keyedLine(t, "c", 2, 12) + "\n"
	if err := os.WriteFile(in, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "out")
	args := []string{"compress", "--in", in, "--out", dst, "--target-tokens", "1500", "--summary-tokens", "100", "--model", "m", "--progress", "none", "--max-retries", "1"}
	_, bad := startFakeServer(t, fakellm.Config{Fail500: 1, MaxFaults: -1})
	code, _, errs := hpc(t, append(args, "--base-url", bad)...)
	if code != exitRowsFailed || !strings.Contains(errs, "2 summary failed") {
		t.Fatalf("failing run: exit %d, want 3 with 2 summary failures: %s", code, errs)
	}
	stats := func() map[string]float64 {
		t.Helper()
		code, out, errs := hp(t, "stats", "--json", dst)
		if code != 0 {
			t.Fatalf("stats exit %d: %s", code, errs)
		}
		var st struct {
			Outcomes map[string]float64 `json:"outcomes"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatal(err)
		}
		return st.Outcomes
	}
	if got := stats(); got["summary_failed"] != 2 || got["under_target"] != 1 || got["completed"] != 0 {
		t.Errorf("stats outcomes after the failing run: %v, want summary_failed 2, under_target 1", got)
	}
	fk, good := startFakeServer(t, fakellm.Config{SummaryWords: 40})
	// Another endpoint than the run's: --resume needs --allow-change.
	code, _, errs = hpc(t, append(args, "--base-url", good, "--resume", "--allow-change")...)
	if code != 0 || strings.Contains(errs, "nothing to do") || fk.Stats().Requests == 0 {
		t.Fatalf("resume: exit %d, %d requests, want the failed rows compressed: %s", code, fk.Stats().Requests, errs)
	}
	if got := stats(); got["compressed"] != 2 || got["under_target"] != 1 || len(got) != 2 {
		t.Errorf("stats outcomes after resume: %v, want compressed 2, under_target 1", got)
	}
	recs := catRecords(t, dst)
	if len(recs) != 3 {
		t.Fatalf("%d records after resume, want 3", len(recs))
	}
	mustVerify(t, dst)
	if code, _, errs := hpc(t, append(args, "--base-url", good, "--resume")...); code != 0 || !strings.Contains(errs, "nothing to do") {
		t.Errorf("second resume: exit %d: %s", code, errs)
	}
}

// TestResumeRemovesStrayShardCopy: a copy of a committed shard under a new
// shard name is not adopted (its keys are live already), so resume leaves
// one record per key and verify passes.
func TestResumeRemovesStrayShardCopy(t *testing.T) {
	out, args, shards := healRun(t)
	want := catKeys(t, out)
	data, err := os.ReadFile(shards[0])
	if err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(out, "data", "shard-00099.jsonl")
	if err := os.WriteFile(stray, data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := hp(t, append(args, "--resume")...)
	if code != 0 || !strings.Contains(errs, "shard-00099.jsonl") || !strings.Contains(errs, "already") {
		t.Fatalf("resume exit %d, want the stray copy named: %s", code, errs)
	}
	if got := catKeys(t, out); !maps.Equal(got, want) {
		t.Errorf("after resume cat has %d keys, want %d", len(got), len(want))
	}
	mustVerify(t, out)
}

// TestResumeReportsChangedAndGoneRows: after editing the prompts file, a
// row whose text changed is reported and kept (no second live record), run
// again with --redo-changed (replacing its old record); a row no longer in
// the file is reported and, with --prune, leaves the live set.
func TestResumeReportsChangedAndGoneRows(t *testing.T) {
	url := startFake(t, fakellm.Config{}, echoScript)
	lines := []string{`{"prompt": "echo a"}`, `{"prompt": "echo b"}`, `{"prompt": "echo c", "id": "c"}`, `{"prompt": "echo d"}`}
	prompts := writePrompts(t, lines...)
	out := filepath.Join(t.TempDir(), "out")
	args := []string{"generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none"}
	if code, _, errs := hp(t, args...); code != 0 {
		t.Fatalf("generate exit %d: %s", code, errs)
	}
	// Row 1 changes its text; row 3 goes away.
	lines[1], lines = `{"prompt": "echo B"}`, lines[:3]
	if err := os.WriteFile(prompts, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs := hp(t, append(args, "--resume")...)
	if code != 0 || !strings.Contains(errs, "changed") || !strings.Contains(errs, "no longer in the input") {
		t.Fatalf("resume exit %d, want the changed and the gone row reported: %s", code, errs)
	}
	if n := len(catKeys(t, out)); n != 4 {
		t.Fatalf("after a plain resume %d live records, want the 4 of the first run", n)
	}
	mustVerify(t, out)
	code, _, errs = hp(t, append(args, "--resume", "--redo-changed", "--prune")...)
	if code != 0 {
		t.Fatalf("resume --redo-changed --prune exit %d: %s", code, errs)
	}
	recs := catRecords(t, out)
	if len(recs) != 3 {
		t.Fatalf("after --redo-changed --prune %d live records, want one per row of the 3-line file", len(recs))
	}
	if conv, _ := json.Marshal(recs[1]["conversations"]); !strings.Contains(string(conv), "echo B") {
		t.Errorf("row 1 was not run again with its new text: %s", conv)
	}
	mustVerify(t, out)
	if code, _, errs := hp(t, append(args, "--resume")...); code != 0 || !strings.Contains(errs, "nothing to do") || strings.Contains(errs, "changed") {
		t.Errorf("resume after pruning: exit %d: %s", code, errs)
	}
}
