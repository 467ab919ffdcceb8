package pipeline

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// victim writes a JSONL file shaped like a shard (so only the confinement
// can keep it out) where the shard path rel of the folder dir really points
// (an absolute temp path when rel is ""), and returns its path, content and
// the ledger line that names it.
func victim(t *testing.T, dir, rel string) (string, []byte, *ledgerLine) {
	t.Helper()
	content := []byte(`{"key":"k00003","prompt_index":3,"sample":0,"outcome":"completed","conversations":[{"from":"human","value":"SECRET"}]}` + "\n")
	p := filepath.Join(t.TempDir(), "victimdir", "victim.jsonl")
	if rel != "" {
		p = filepath.Join(dir, filepath.FromSlash(rel))
	} else {
		rel = p
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, content, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	return p, content, &ledgerLine{Shard: rel, Bytes: int64(len(content)), SHA256: hex.EncodeToString(sum[:]),
		Rows: []ledgerRow{{Key: "k00003", Outcome: schemas.OutcomeCompleted, PromptIndex: 3, Len: int64(len(content))}}}
}

func appendRaw(t *testing.T, dir string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, LedgerFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

func sameFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s was touched: %q, %v", path, got, err)
	}
}

// TestLedgerShardOutsideFolder: a ledger line naming a shard outside the
// folder (relative with "..", absolute, or hidden behind data/..) is
// reported by verify, refused by cat and by opening the folder (resume, with
// --prune's input check too) without the named file being read or deleted,
// wherever the line is (the last line too: it is not a torn end); repair
// drops its path and marks its records lost, and --resume then redoes them.
func TestLedgerShardOutsideFolder(t *testing.T) {
	good := t.TempDir()
	runAll(t, good, ModeFresh, 20, completeStage())
	for _, c := range []struct {
		name, rel string
		last      bool
	}{
		{"parent last", "../outside.jsonl", true},
		{"two up middle", "../../victimdir/victim.jsonl", false},
		{"absolute", "", true},
		{"through data", "data/../../victimdir/victim.jsonl", true},
		{"nested", "data/sub/shard-00001.jsonl", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "a", "b", "out")
			copyDir(t, good, dir)
			vpath, content, line := victim(t, dir, c.rel)
			if c.last {
				line.Bytes++ // damaged by its size: opening used to remove it
			}
			b := appendLedgerLine(nil, line)
			if !c.last {
				b = appendLedgerLine(b, &ledgerLine{Rows: []ledgerRow{{Key: "k00099", Outcome: outdir.Filtered, PromptIndex: 99, Len: -1}}})
			}
			appendRaw(t, dir, b)

			rep, err := Verify(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !problemsContain(rep, LedgerFile, "not a shard of the output folder") {
				t.Errorf("verify: want the line reported, got %v", rep.Problems)
			}
			var out bytes.Buffer
			err = Cat(dir, &out)
			if !errors.Is(err, outdir.ErrShardPath) || !strings.Contains(err.Error(), "hermes-pipe repair") || bytes.Contains(out.Bytes(), []byte("SECRET")) {
				t.Errorf("cat: err %v, printed %q", err, out.String())
			}
			if err := EachRecord(dir, func(RecordRef, []byte) error { return nil }); !errors.Is(err, outdir.ErrShardPath) {
				t.Errorf("EachRecord (view): err %v", err)
			}
			opts := testOutOpts(ModeResume)
			opts.InputCheck = InputCheck{Enabled: true, Prune: true}
			opts.VerifyShards = true
			if o, err := OpenOutput(dir, opts); !errors.Is(err, outdir.ErrShardPath) {
				if o != nil {
					o.Close()
				}
				t.Errorf("resume: err %v, want the line refused", err)
			}
			sameFile(t, vpath, content)

			rr, err := Repair(dir)
			if err != nil || len(rr.Dropped) != 1 {
				t.Fatalf("repair: %+v, %v", rr, err)
			}
			sameFile(t, vpath, content)
			if c.name == "nested" { // inside the folder, but no shard: verify lists it
				os.RemoveAll(filepath.Join(dir, DataDir, "sub"))
			}
			mustVerify(t, dir)
			sum := runAll(t, dir, ModeResume, 20, completeStage())
			if sum.Written != 1 {
				t.Errorf("resume after repair ran %+v, want the one lost record redone", sum)
			}
			checkWhole(t, dir, 20)
			if c.name != "nested" {
				sameFile(t, vpath, content)
			}
		})
	}
}

// TestShardSymlinkNotFollowed: a shard that is a symbolic link to a file
// outside the folder, even one with the shard's exact bytes, is never read:
// cat and verify say so; opening the folder treats it as damaged, removes
// the link (not its target) and redoes its records; a link planted as an
// orphan shard is not adopted; data/ itself as a link is refused.
func TestShardSymlinkNotFollowed(t *testing.T) {
	good := t.TempDir()
	runAll(t, good, ModeFresh, 20, completeStage())
	shards, _ := filepath.Glob(filepath.Join(good, DataDir, "shard-*.jsonl"))
	if len(shards) < 2 {
		t.Fatalf("want several shards, got %v", shards)
	}
	name := filepath.Base(shards[0])

	t.Run("ledger shard", func(t *testing.T) {
		dir := t.TempDir()
		copyDir(t, good, dir)
		p := filepath.Join(dir, DataDir, name)
		content, _ := os.ReadFile(p)
		outside := filepath.Join(t.TempDir(), "copy.jsonl")
		os.WriteFile(outside, content, 0o644)
		os.Remove(p)
		if err := os.Symlink(outside, p); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := Cat(dir, &out); !errors.Is(err, outdir.ErrShardLink) {
			t.Errorf("cat: err %v", err)
		}
		rep, err := Verify(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !problemsContain(rep, DataDir+"/"+name, "symbolic link") {
			t.Errorf("verify: %v", rep.Problems)
		}
		sum := runAll(t, dir, ModeResume, 20, completeStage())
		if sum.Written != 7 { // MaxShardRows: the linked shard's records
			t.Errorf("resume: %+v, want the shard's 7 records redone", sum)
		}
		checkWhole(t, dir, 20)
		sameFile(t, outside, content)
	})

	t.Run("orphan", func(t *testing.T) {
		dir := t.TempDir()
		copyDir(t, good, dir)
		// A valid shard of keys not in the folder yet, outside, linked in.
		outside := filepath.Join(t.TempDir(), "orphan.jsonl")
		content := []byte(`{"key":"k00030","prompt_index":30,"sample":0,"outcome":"completed","conversations":[]}` + "\n")
		os.WriteFile(outside, content, 0o644)
		link := filepath.Join(dir, DataDir, "shard-00099.jsonl")
		if err := os.Symlink(outside, link); err != nil {
			t.Fatal(err)
		}
		o := openOut(t, dir, ModeResume)
		if o.Done("k00030") {
			t.Error("the linked orphan was adopted")
		}
		o.Close()
		if _, err := os.Lstat(link); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the link was kept: %v", err)
		}
		sameFile(t, outside, content)
	})

	t.Run("data folder", func(t *testing.T) {
		dir := t.TempDir()
		copyDir(t, good, dir)
		elsewhere := filepath.Join(t.TempDir(), "data")
		if err := os.Rename(filepath.Join(dir, DataDir), elsewhere); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(elsewhere, filepath.Join(dir, DataDir)); err != nil {
			t.Fatal(err)
		}
		if err := Cat(dir, &bytes.Buffer{}); err == nil {
			t.Error("cat read shards through a linked data/")
		}
		if o, err := OpenOutput(dir, testOutOpts(ModeResume)); !errors.Is(err, ErrRefused) {
			if o != nil {
				o.Close()
			}
			t.Errorf("resume: err %v, want refused", err)
		}
	})
}

// TestRepairDropKeepsOtherLines: repair rewrites only the lines naming a
// path outside the folder; every other byte of the ledger stays.
func TestRepairDropKeepsOtherLines(t *testing.T) {
	dir := t.TempDir()
	runAll(t, dir, ModeFresh, 10, completeStage())
	before, _ := os.ReadFile(filepath.Join(dir, LedgerFile))
	_, _, line := victim(t, dir, "../x.jsonl")
	line.CostUSD = 0.25
	appendRaw(t, dir, appendLedgerLine(nil, line))
	rr, err := Repair(dir)
	if err != nil || len(rr.Dropped) != 1 || rr.Dropped[0].Line != bytes.Count(before, []byte("\n"))+1 {
		t.Fatalf("repair: %+v, %v", rr, err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, LedgerFile))
	if !bytes.HasPrefix(after, before) {
		t.Fatal("repair changed the good lines")
	}
	var l ledgerLine
	if err := parseLedgerLine(strings.TrimSuffix(string(after[len(before):]), "\n"), &l); err != nil {
		t.Fatal(err)
	}
	if l.Shard != "" || l.CostUSD != 0.25 || len(l.Rows) != 1 || l.Rows[0].Outcome != schemas.OutcomeLost || !l.Rows[0].Marker() {
		t.Errorf("rewritten line %+v", l)
	}
	// A healthy ledger is still refused.
	if _, err := Repair(dir); err == nil || !strings.Contains(err.Error(), "repair only rebuilds") {
		t.Errorf("second repair: %v", err)
	}
}
