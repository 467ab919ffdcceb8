package pipeline

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// TestLoadLedgerLongLineAndLaterRows: a line of 12,000 rows (over half a
// MB) and thousands of later one-row lines that supersede some of them
// index as a reader in file order would: the latest row of each key wins,
// every shard and cost is kept, and the torn last line is left out.
func TestLoadLedgerLongLineAndLaterRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), LedgerFile)
	const big, redone = 12000, 5000
	var buf []byte
	l := ledgerLine{Shard: "data/shard-00001.jsonl", Bytes: 1 << 20, SHA256: "aa", CostUSD: 1.5}
	for i := range big {
		l.Rows = append(l.Rows, ledgerRow{Key: fmt.Sprintf("row:%06d:%024x#0", i, i), Outcome: schemas.OutcomeCompleted, PromptIndex: int64(i), Len: 10})
	}
	buf = appendLedgerLine(buf, &l)
	if len(buf) <= 512<<10 {
		t.Fatalf("the long line is %d bytes, want more than half a MB", len(buf))
	}
	for i := range redone {
		s := ledgerLine{Shard: fmt.Sprintf("failed/shard-%05d.jsonl", i+2), Bytes: 10, SHA256: "bb", CostUSD: 0.25,
			Rows: []ledgerRow{{Key: fmt.Sprintf("row:%06d:%024x#0", i, i), Outcome: schemas.OutcomeSandboxError, PromptIndex: int64(i), Len: 10}}}
		buf = appendLedgerLine(buf, &s)
	}
	buf = append(buf, `{"shard":"data/shard-99999.jsonl","by`...) // torn
	if err := os.WriteFile(path, buf, 0o600); err != nil {
		t.Fatal(err)
	}
	ld, err := loadLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	if !ld.torn || ld.tornLine != redone+2 {
		t.Errorf("torn %v at line %d, want the last line, %d", ld.torn, ld.tornLine, redone+2)
	}
	ix := ld.ix
	if ix.len() != big {
		t.Fatalf("%d keys, want %d", ix.len(), big)
	}
	for _, i := range []int{0, 1, redone - 1, redone, big - 1} {
		want := schemas.OutcomeCompleted
		if i < redone {
			want = schemas.OutcomeSandboxError
		}
		if got, ok := ix.lookup(fmt.Sprintf("row:%06d:%024x#0", i, i)); !ok || got != want {
			t.Errorf("row %d: %q %v, want %q", i, got, ok, want)
		}
	}
	if n := len(ix.shards) - 1; n != redone+1 { // shards[0] stands for none
		t.Errorf("%d shards, want %d", n, redone+1)
	}
	if want := 1.5 + 0.25*redone; ix.cost != want {
		t.Errorf("cost %v, want %v", ix.cost, want)
	}
}

// TestLoadLedgerMatchesIncremental: loading a ledger (keys kept in an
// arena, the table sized from the file's shape) leaves the index that
// applying its lines to an empty index does: each key once, at its first
// place in ledger order, with its latest row, whether it repeats in later
// lines, in its own line or in lines that re-point keys in order, and every
// key found through the table (not only by the sequential hint), the table
// growing as keys are added after the load.
func TestLoadLedgerMatchesIncremental(t *testing.T) {
	path := filepath.Join(t.TempDir(), LedgerFile)
	rng := rand.New(rand.NewPCG(1, 2))
	var lines []ledgerLine
	var buf []byte
	for s := range 40 {
		l := ledgerLine{Shard: fmt.Sprintf("data/shard-%05d.jsonl", s+1), Bytes: 1 << 20, SHA256: "aa"}
		for range 500 {
			k := rng.IntN(6000) // about one row in three repeats a key, some thrice or more
			o := schemas.OutcomeCompleted
			if rng.IntN(3) == 0 {
				o = schemas.OutcomeSandboxError
			}
			l.Rows = append(l.Rows, ledgerRow{Key: fmt.Sprintf("row:%d:%012x#0", k, k), Outcome: o, PromptIndex: int64(k), Len: int64(1 + rng.IntN(900))})
		}
		lines = append(lines, l)
		buf = appendLedgerLine(buf, &l)
	}
	// Lines that re-point keys in the order they were first written, as
	// the merge of small shards does, with a few rows out of turn.
	for s := range 12 {
		l := ledgerLine{Shard: fmt.Sprintf("data/shard-%05d.jsonl", 100+s), Bytes: 1 << 20, SHA256: "bb"}
		for k := s * 500; k < (s+1)*500; k++ {
			key := k
			if rng.IntN(20) == 0 {
				key = rng.IntN(6000)
			}
			l.Rows = append(l.Rows, ledgerRow{Key: fmt.Sprintf("row:%d:%012x#0", key, key), Outcome: schemas.OutcomeCompleted, PromptIndex: int64(key), Len: int64(1 + rng.IntN(900))})
		}
		lines = append(lines, l)
		buf = appendLedgerLine(buf, &l)
	}
	if err := os.WriteFile(path, buf, 0o600); err != nil {
		t.Fatal(err)
	}
	ld, err := loadLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	want := newLedgerIndex(0)
	for i := range lines {
		want.apply(&lines[i])
	}
	got := ld.ix
	if got.len() != want.len() || want.len() == len(lines)*500 {
		t.Fatalf("%d keys, want %d (of %d rows)", got.len(), want.len(), len(lines)*500)
	}
	for i := range want.entries {
		g, w := got.entries[i], want.entries[i]
		if g.key != w.key || g.off != w.off || g.n != w.n || got.shards[g.shard] != want.shards[w.shard] || got.outcomes[g.outcome] != want.outcomes[w.outcome] {
			t.Fatalf("entry %d: %+v, want %+v", i, g, w)
		}
		if j, ok := got.findHashed(w.key); !ok || int(j) != i {
			t.Fatalf("key %s found at %d %v, want %d", w.key, j, ok, i)
		}
	}
	if _, ok := got.findHashed("row:6000:none#0"); ok {
		t.Error("a key the ledger lacks was found")
	}
	// The table still grows as keys are added after the load.
	for k := range 50000 {
		got.set(ledgerEntry{key: fmt.Sprintf("new:%d", k), n: 1})
	}
	for k := range 50000 {
		if _, ok := got.findHashed(fmt.Sprintf("new:%d", k)); !ok {
			t.Fatalf("key new:%d added after the load not found", k)
		}
	}
}
