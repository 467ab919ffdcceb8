package pipeline

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestVerifyTornEndIsOutdirs: verify names a whole but unparsable last
// ledger line a torn end (outdir.TornEnd: cat leaves it out), the same line
// before the last one unparsable (cat refuses it); its live keys are cat's
// records.
func TestVerifyTornEndIsOutdirs(t *testing.T) {
	dir := t.TempDir()
	runAll(t, dir, ModeFresh, 12, completeStage())
	ledger := filepath.Join(dir, LedgerFile)
	good, err := os.ReadFile(ledger)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(dir)
	if err != nil || !rep.OK() || rep.LiveKeys != 12 {
		t.Fatalf("whole folder: %v %+v", err, rep)
	}
	bad := `{"shard":"data/shard-00099.jsonl","rows":[["k"]]}` + "\n"
	if err := os.WriteFile(ledger, append(append([]byte{}, good...), bad...), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, _ = Verify(dir)
	if !problemsContain(rep, LedgerFile, "torn last line (unparsable") || rep.LiveKeys != 12 {
		t.Errorf("unparsable last line: %+v", rep)
	}
	var out bytes.Buffer
	if err := Cat(dir, &out); err != nil || bytes.Count(out.Bytes(), []byte("\n")) != 12 {
		t.Errorf("cat over a torn end: %v, %d lines", err, bytes.Count(out.Bytes(), []byte("\n")))
	}
	if err := os.WriteFile(ledger, append([]byte(bad), good...), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, _ = Verify(dir)
	if problemsContain(rep, LedgerFile, "torn last line") || !problemsContain(rep, LedgerFile, "unparsable") {
		t.Errorf("unparsable first line: %+v", rep)
	}
	if err := Cat(dir, &bytes.Buffer{}); err == nil {
		t.Error("cat read a ledger with an unparsable first line")
	}
}
