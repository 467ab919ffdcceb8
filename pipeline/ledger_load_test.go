package pipeline

import (
	"fmt"
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
