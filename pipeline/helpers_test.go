package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// funcStage is a Stage made of a function, with optional preflight and close.
type funcStage struct {
	name string
	fn   func(ctx context.Context, rec *schemas.Record) ([]*schemas.Record, error)
}

func (s *funcStage) Name() string { return s.name }
func (s *funcStage) Process(ctx context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
	return s.fn(ctx, rec)
}

// completeStage marks every record completed with one human and one gpt turn.
func completeStage() *funcStage {
	return &funcStage{name: "complete", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		complete(rec)
		return []*schemas.Record{rec}, nil
	}}
}

func complete(rec *schemas.Record) {
	rec.Outcome = schemas.OutcomeCompleted
	rec.Completed = true
	rec.Error = ""
	rec.Conversations = []schemas.Turn{{From: "human", Value: "prompt " + rec.Key}, {From: "gpt", Value: "<think>\n</think>\nanswer <b>&</b>"}}
	rec.APICalls = 1
	rec.DurationMS = int64(len(rec.Key))
}

// records returns n fresh input records with keys k00000… in input order.
func records(n int) []*schemas.Record {
	recs := make([]*schemas.Record, n)
	for i := range recs {
		recs[i] = &schemas.Record{Key: fmt.Sprintf("k%05d", i), PromptIndex: i}
	}
	return recs
}

// testFormat is the shard format of testOutOpts; TestParquetCrashAndKill9
// switches it to run the crash tests on Parquet shards.
var testFormat = FormatJSONL

func testOutOpts(mode Mode) OutputOptions {
	return OutputOptions{Mode: mode, Kind: "test", Format: testFormat, ToolVersion: "test", MaxShardRows: 7, CommitInterval: 20 * time.Millisecond,
		Options: map[string]any{"workers": 4}}
}

func openOut(t testing.TB, dir string, mode Mode) *Output {
	t.Helper()
	out, err := OpenOutput(dir, testOutOpts(mode))
	if err != nil {
		t.Fatalf("OpenOutput: %v", err)
	}
	t.Cleanup(func() { out.Close() })
	return out
}

// runAll opens dir, runs all n records through stages and closes the output.
func runAll(t testing.TB, dir string, mode Mode, n int, stages ...Stage) Summary {
	t.Helper()
	out := openOut(t, dir, mode)
	sum, err := Run(context.Background(), Options{Workers: 4}, SliceSource(records(n)), stages, out)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return sum
}

// catRecords returns the records Cat prints, decoded.
func catRecords(t testing.TB, dir string) []schemas.Record {
	t.Helper()
	var b bytes.Buffer
	if err := Cat(dir, &b); err != nil {
		t.Fatalf("Cat: %v", err)
	}
	var recs []schemas.Record
	sc := bufio.NewScanner(&b)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r schemas.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("cat line %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs
}

// checkWhole asserts that Cat shows keys k00000..k(n-1) exactly once each, in
// order, all completed, and that Verify finds nothing.
func checkWhole(t testing.TB, dir string, n int) {
	t.Helper()
	recs := catRecords(t, dir)
	if len(recs) != n {
		t.Fatalf("cat: %d records, want %d", len(recs), n)
	}
	for i, r := range recs {
		if want := fmt.Sprintf("k%05d", i); r.Key != want || r.PromptIndex != i {
			t.Fatalf("cat record %d: key %s index %d, want %s", i, r.Key, r.PromptIndex, want)
		}
		if r.Outcome != schemas.OutcomeCompleted {
			t.Fatalf("record %s: outcome %s (%s)", r.Key, r.Outcome, r.Error)
		}
	}
	mustVerify(t, dir)
}

func mustVerify(t testing.TB, dir string) VerifyReport {
	t.Helper()
	rep, err := Verify(dir)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if !rep.OK() {
		var b strings.Builder
		rep.WriteText(&b)
		t.Fatalf("Verify found problems:\n%s", b.String())
	}
	return rep
}

// copyDir copies the regular files of src into dst (a crash snapshot).
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		outF, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(outF, in); err != nil {
			outF.Close()
			return err
		}
		return outF.Close()
	})
	if err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
}

func problemsContain(rep VerifyReport, file, substr string) bool {
	for _, p := range rep.Problems {
		if strings.Contains(p.File, file) && strings.Contains(p.Msg, substr) {
			return true
		}
	}
	return false
}

// appendLedgerLine and parseLedgerLine let the tests write and read ledger
// lines by the format's one owner.
func appendLedgerLine(b []byte, l *ledgerLine) []byte { return outdir.AppendLine(b, l) }

func parseLedgerLine(line string, l *ledgerLine) error { return outdir.ParseLine(line, l) }
