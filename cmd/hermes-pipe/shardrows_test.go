package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// TestGenerateShardsFollowShardRows: 200 prompts committed every 10ms
// (several commits, so several small shards on the way) end in one data/
// shard with --shard-rows 1000 and in four with --shard-rows 50; the folder
// verifies, cat prints every row once, and a --resume leaves it as it is.
func TestGenerateShardsFollowShardRows(t *testing.T) {
	url := startFake(t, fakellm.Config{Latency: 2 * time.Millisecond},
		`{"scripts": [{"match": "^say (.*)$", "steps": [{"content": "said {{m1}}"}]}]}`)
	lines := make([]string, 200)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"prompt": "say row%d"}`, i)
	}
	prompts := writePrompts(t, lines...)
	for _, c := range []struct{ rows, shards int }{{1000, 1}, {50, 4}} {
		t.Run(fmt.Sprint(c.rows), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := []string{"generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m",
				"--progress", "none", "--workers", "4", "--commit-interval", "10ms", "--shard-rows", fmt.Sprint(c.rows)}
			if code, _, errs := hp(t, args...); code != 0 {
				t.Fatalf("generate exit %d: %s", code, errs)
			}
			ledger, err := os.ReadFile(filepath.Join(out, "ledger.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(ledger), "\n"); n <= c.shards+1 {
				t.Fatalf("the ledger has %d lines: the run did not commit several small shards, so nothing was merged", n)
			}
			data, _ := filepath.Glob(filepath.Join(out, "data", "*"))
			if len(data) != c.shards {
				t.Fatalf("data/ holds %d files %v, want %d", len(data), data, c.shards)
			}
			mustVerify(t, out)
			recs := catRecords(t, out)
			keys := map[any]bool{}
			for _, r := range recs {
				keys[r["key"]] = true
			}
			if len(recs) != 200 || len(keys) != 200 {
				t.Fatalf("cat: %d records, %d keys, want 200", len(recs), len(keys))
			}
			code, before, errs := hp(t, "stats", out)
			if code != 0 {
				t.Fatalf("stats exit %d: %s", code, errs)
			}
			if code, _, errs := hp(t, "generate", "--out", out, "--resume", "--progress", "none"); code != 0 {
				t.Fatalf("resume exit %d: %s", code, errs)
			}
			if again, _ := filepath.Glob(filepath.Join(out, "data", "*")); len(again) != c.shards {
				t.Fatalf("after --resume data/ holds %d files, want %d", len(again), c.shards)
			}
			if _, after, _ := hp(t, "stats", out); after != before {
				t.Fatalf("stats changed by --resume:\n%s\nwant\n%s", after, before)
			}
			mustVerify(t, out)
		})
	}
}
