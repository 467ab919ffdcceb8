package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline/cost"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// spendStage charges two calls of $1.5 and $0.5 for every record; records
// from k00002 on then wait for the run to be cancelled (rows in flight at
// a kill), the others complete at a cost of $2.
type spendStage struct {
	budget  *cost.Budget
	blocked chan string
}

func (s *spendStage) Name() string             { return "spend" }
func (s *spendStage) UseBudget(b *cost.Budget) { s.budget = b }
func (s *spendStage) Process(ctx context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
	s.budget.Charge(rec.Key, 1, 1.5)
	s.budget.Charge(rec.Key, 2, 0.5)
	if rec.Key >= "k00002" {
		s.blocked <- rec.Key
		<-ctx.Done()
		return nil, ctx.Err()
	}
	complete(rec)
	c := 2.0
	rec.CostUSD = &c
	return []*schemas.Record{rec}, nil
}

// TestSpendJournalCountsUncommittedCalls: every call a stage charges is in
// the folder's spend journal as it returns, committed or not, so a run cut
// short with rows in flight leaves a folder whose Spent (what the next
// run's cap starts from) counts them, though its ledger does not. verify
// accepts the journal, a torn last line included; the next run cuts that
// line, starts a run line from what was spent and adds its own calls. A
// corrupt or negative line is a defect naming the file, the line and the
// field; --overwrite starts from nothing.
func TestSpendJournalCountsUncommittedCalls(t *testing.T) {
	dir := t.TempDir()
	out := openOut(t, dir, ModeFresh)
	s := &spendStage{blocked: make(chan string, 10)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := Run(ctx, Options{Workers: 4, Budget: cost.NewBudget(100, 0)}, SliceSource(records(6)), []Stage{s}, out)
		done <- err
	}()
	for range 4 { // k00002..k00005 in flight: k00000 and k00001 are done
		<-s.blocked
	}
	cancel()
	<-done
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	sp, err := outdir.ReadSpend(dir)
	if err != nil || !sp.Found || sp.USD != 12 || sp.Calls != 12 {
		t.Fatalf("spend journal after the cut: %+v %v, want $12 over 12 calls", sp, err)
	}
	mustVerify(t, dir)

	out = openOut(t, dir, ModeResume)
	if got := out.Spent(); got != 12 {
		t.Errorf("Spent of the reopened folder $%v, want $12 (the ledger holds at most $4)", got)
	}
	out.Close()

	// A kill -9 mid-write leaves a torn last line.
	path := filepath.Join(dir, outdir.SpendFile)
	appendFile(t, path, `{"key":"k00003","call":3,"us`)
	if rep, err := Verify(dir); err != nil || !rep.OK() {
		t.Fatalf("verify with a torn spend journal: %v %+v", err, rep)
	}
	out = openOut(t, dir, ModeResume)
	b := cost.NewBudget(100, out.Spent())
	s = &spendStage{blocked: make(chan string, 10)}
	extra := []*schemas.Record{{Key: "extra", PromptIndex: 6}}
	if _, err := Run(context.Background(), Options{Workers: 1, Budget: b}, SliceSource(extra), []Stage{s}, out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), `"us`+"{") || !strings.HasSuffix(string(data), "\n") {
		t.Errorf("the torn line was not cut:\n%s", data)
	}
	if !strings.Contains(string(data), "}\n"+`{"run":2,"spent":12}`+"\n") {
		t.Errorf("no run line for the second run starting from $12:\n%s", data)
	}
	if sp, err := outdir.ReadSpend(dir); err != nil || sp.USD != 14 || sp.Calls != 2 {
		t.Errorf("after the second run: %+v %v, want $14, 2 calls since its run line", sp, err)
	}
	mustVerify(t, dir)

	for _, bad := range []struct{ line, field string }{
		{`{"key":"k9","call":1,"usd":-4}`, "field usd"},
		{`{"run":4,"spent":"x"}`, "spent"},
		{`{"call":1,"usd":1}`, "field key"},
	} {
		good := append([]byte{}, data...)
		if err := os.WriteFile(path, append(append(good, bad.line+"\n"...), `{"key":"k1","call":1,"usd":1}`+"\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
		rep, _ := Verify(dir)
		if !problemsContain(rep, outdir.SpendFile, bad.field) {
			t.Errorf("verify of a journal with %s: %+v", bad.line, rep.Problems)
		}
		if _, err := OpenOutput(dir, testOutOpts(ModeResume)); err == nil || !strings.Contains(err.Error(), bad.field) {
			t.Errorf("resume of a folder whose journal has %s: %v", bad.line, err)
		}
	}

	out = openOut(t, dir, ModeOverwrite)
	if got := out.Spent(); got != 0 {
		t.Errorf("--overwrite starts from $%v", got)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--overwrite kept the spend journal: %v", err)
	}
}

// TestSpendJournalOfALegacyFolder: a folder from before the spend journal
// counts its ledger, and its first journalled run starts from that.
func TestSpendJournalOfALegacyFolder(t *testing.T) {
	dir := t.TempDir()
	costly := &funcStage{name: "costly", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		complete(rec)
		c := 0.25
		rec.CostUSD = &c
		return []*schemas.Record{rec}, nil
	}}
	runAll(t, dir, ModeFresh, 4, costly) // no budget: no journal
	if _, err := os.Stat(filepath.Join(dir, outdir.SpendFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a run without a budget wrote a spend journal: %v", err)
	}
	out := openOut(t, dir, ModeResume)
	if got := out.Spent(); math.Abs(got-1) > 1e-12 {
		t.Fatalf("Spent $%v, want the ledger's $1", got)
	}
	s := &spendStage{blocked: make(chan string, 10)}
	recs := records(5)[4:] // k00004 blocks: cancel once it charged
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-s.blocked; cancel() }()
	_, _ = Run(ctx, Options{Workers: 1, Budget: cost.NewMeter(out.Spent())}, SliceSource(recs), []Stage{s}, out)
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if sp, err := outdir.ReadSpend(dir); err != nil || math.Abs(sp.USD-3) > 1e-12 {
		t.Errorf("journal after the first metered run: %+v %v, want the ledger's $1 + $2", sp, err)
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// reserveStage makes two calls for every record through Begin and End:
// the first projected at $1 and costing $0.4, the second projected at
// $0.9. Records from k00002 on never get the second answer (calls in
// flight at a kill: the stage waits for the run to be cancelled). Before
// each call it checks that the reservation line is already in the file on
// disk (a write(2), not a user-space buffer: what a SIGKILL keeps).
type reserveStage struct {
	t       *testing.T
	path    string
	budget  *cost.Budget
	blocked chan string
}

func (s *reserveStage) Name() string             { return "reserve" }
func (s *reserveStage) UseBudget(b *cost.Budget) { s.budget = b }
func (s *reserveStage) Process(ctx context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
	r, err := s.budget.Begin(ctx, rec.Key, 1, 1)
	if err != nil {
		return nil, err
	}
	s.sent(rec.Key, 1)
	s.budget.End(r, 0.4)
	if _, err := s.budget.Begin(ctx, rec.Key, 2, 0.9); err != nil {
		return nil, err
	}
	s.sent(rec.Key, 2)
	if rec.Key >= "k00002" {
		s.blocked <- rec.Key
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, errors.New("unreachable: only blocking records are run")
}

// sent checks that call of key is reserved in the file before it goes out.
func (s *reserveStage) sent(key string, call int) {
	data, err := os.ReadFile(s.path)
	want := fmt.Sprintf(`{"key":%q,"call":%d,"reserve":`, key, call)
	if err != nil || !strings.Contains(string(data), want) {
		s.t.Errorf("call %d of %s goes out before its reservation is written: %v\n%s", call, key, err, data)
	}
}

// TestSpendJournalCountsCallsInFlight: each call's projected cost is
// journalled before it goes out and settled by a line naming it as it
// returns, so a run cut with calls in flight (never answered, maybe billed)
// leaves a folder whose Spent counts them at their projection. The next
// run starts its run line from that, numbers its reservations from 1
// again (an earlier run's open reservation stays counted), and settles its
// own. A line settling a reservation its run did not open, or opening one
// twice, is a defect naming the file, the line and the field.
func TestSpendJournalCountsCallsInFlight(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, outdir.SpendFile)
	out := openOut(t, dir, ModeFresh)
	s := &reserveStage{t: t, path: path, blocked: make(chan string, 10)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := Run(ctx, Options{Workers: 2, Budget: cost.NewBudget(100, 0)}, SliceSource(records(4)[2:]), []Stage{s}, out)
		done <- err
	}()
	for range 2 {
		<-s.blocked
	}
	cancel()
	<-done
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	sp, err := outdir.ReadSpend(dir)
	if err != nil || sp.Open != 2 || math.Abs(sp.OpenUSD-1.8) > 1e-12 || math.Abs(sp.USD-2.6) > 1e-12 || sp.Calls != 2 {
		t.Fatalf("after the cut: %+v %v, want 2 calls of $0.4 and 2 open reservations of $0.9: $2.6", sp, err)
	}
	mustVerify(t, dir)

	out = openOut(t, dir, ModeResume)
	if got := out.Spent(); math.Abs(got-2.6) > 1e-12 {
		t.Fatalf("Spent of the reopened folder $%v, want $2.6", got)
	}
	b := cost.NewBudget(100, out.Spent())
	s = &reserveStage{t: t, path: path, blocked: make(chan string, 10)}
	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		_, err := Run(ctx, Options{Workers: 1, Budget: b}, SliceSource(records(5)[4:]), []Stage{s}, out)
		done <- err
	}()
	<-s.blocked
	cancel()
	<-done
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`{"run":2,"spent":2.6}` + "\n" + `{"key":"k00004","call":1,"reserve":1,"usd":1}`,
		`{"key":"k00004","call":1,"settles":1,"usd":0.4}`, `{"key":"k00004","call":2,"reserve":2,"usd":0.9}`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the second run's journal lacks %s:\n%s", want, data)
		}
	}
	if sp, err := outdir.ReadSpend(dir); err != nil || math.Abs(sp.USD-3.9) > 1e-12 || sp.Open != 1 || sp.Capped != 0 {
		t.Errorf("after the second cut: %+v %v, want $2.6 + $0.4 + $0.9 open", sp, err)
	}
	mustVerify(t, dir)

	// A run stopped by its cap says so; the highest cap reached counts,
	// whatever runs follow.
	appendFile(t, path, `{"capped":4.5}`+"\n"+`{"capped":4}`+"\n"+`{"run":3,"spent":3.9}`+"\n")
	if sp, err := outdir.ReadSpend(dir); err != nil || sp.Capped != 4.5 || math.Abs(sp.USD-3.9) > 1e-12 {
		t.Errorf("with capped lines: %+v %v, want capped 4.5", sp, err)
	}
	mustVerify(t, dir)
	if data, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}

	for _, bad := range []struct{ line, field string }{
		{`{"key":"k9","call":1,"settles":7,"usd":1}`, "field settles: reservation 7 is not open"},
		{`{"key":"k9","call":1,"settles":1,"usd":1}` + "\n" + `{"key":"k9","call":1,"settles":1,"usd":1}`, "field settles: reservation 1 is not open"},
		{`{"key":"k9","call":1,"reserve":5,"usd":1}` + "\n" + `{"key":"k9","call":2,"reserve":5,"usd":1}`, "field reserve: reservation 5 is already open"},
		{`{"key":"k9","call":1,"reserve":9,"settles":9,"usd":1}`, "field settles"},
		{`{"key":"k9","call":1,"reserve":-1,"usd":1}`, "field reserve"},
		{`{"capped":-2}`, "field capped"},
	} {
		good := append([]byte{}, data...)
		if err := os.WriteFile(path, append(append(good, bad.line+"\n"...), `{"key":"k1","call":1,"usd":1}`+"\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
		rep, _ := Verify(dir)
		if !problemsContain(rep, outdir.SpendFile, bad.field) {
			t.Errorf("verify of a journal with %s: %+v", bad.line, rep.Problems)
		}
		o, err := OpenOutput(dir, testOutOpts(ModeResume))
		if err == nil {
			o.Close()
		}
		if err == nil || !strings.Contains(err.Error(), bad.field) || !strings.Contains(err.Error(), "line ") {
			t.Errorf("resume of a folder whose journal has %s: %v", bad.line, err)
		}
	}
}
