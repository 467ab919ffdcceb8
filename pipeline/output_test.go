package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// flakyStage completes records but gives every fourth api_error, so both the
// data and the failed folder get shards.
func flakyStage() *funcStage {
	return &funcStage{name: "flaky", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		complete(rec)
		if rec.PromptIndex%4 == 0 {
			rec.Outcome, rec.Error = schemas.OutcomeAPIError, "HTTP 502"
		}
		return []*schemas.Record{rec}, nil
	}}
}

var commitSteps = []string{stepTempCreated, stepTempWritten, stepTempSynced, stepRenamed, stepDirSynced, stepLedgerWrote, stepLedgerSynced}

// TestCrashAtEveryCommitStep snapshots the folder at each step of the commit
// protocol (what a kill -9 at that moment leaves) and resumes from the
// snapshot: every key must end up exactly once and the folder must verify.
func TestCrashAtEveryCommitStep(t *testing.T) {
	const n = 40
	for _, step := range commitSteps {
		for _, nth := range []int{1, 4} {
			for _, torn := range []bool{false, true} {
				if torn && step != stepLedgerWrote {
					continue
				}
				t.Run(fmt.Sprintf("%s/%d/torn=%v", step, nth, torn), func(t *testing.T) {
					dir, snap := t.TempDir(), t.TempDir()
					out := openOut(t, dir, ModeFresh)
					seen := 0
					out.commitHook = func(s string) error {
						if s == step {
							if seen++; seen == nth {
								copyDir(t, dir, snap)
							}
						}
						return nil
					}
					if _, err := Run(context.Background(), Options{Workers: 3}, SliceSource(records(n)), []Stage{flakyStage()}, out); err != nil {
						t.Fatal(err)
					}
					out.Close()
					if seen < nth {
						t.Fatalf("step %s reached %d times, want %d", step, seen, nth)
					}
					if torn {
						ledger := filepath.Join(snap, LedgerFile)
						fi, _ := os.Stat(ledger)
						if err := os.Truncate(ledger, fi.Size()-5); err != nil {
							t.Fatal(err)
						}
					}
					re := openOut(t, snap, ModeResume)
					wantAdopted := 0
					if step == stepRenamed || step == stepDirSynced || torn {
						wantAdopted = 1
					}
					if re.adopted != wantAdopted {
						t.Fatalf("adopted %d shards, want %d", re.adopted, wantAdopted)
					}
					before := re.Keys()
					sum, err := Run(context.Background(), Options{Workers: 3}, SliceSource(records(n)), []Stage{completeStage()}, re)
					if err != nil {
						t.Fatal(err)
					}
					re.Close()
					if sum.Skipped+sum.Processed != n {
						t.Fatalf("resume summary %+v (ledger had %d keys)", sum, before)
					}
					checkWhole(t, snap, n)
				})
			}
		}
	}
}

func TestCommitFailureIsFatalAndCleansUp(t *testing.T) {
	for _, step := range []string{stepTempWritten, stepRenamed, stepLedgerSynced} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			out := openOut(t, dir, ModeFresh)
			out.commitHook = func(s string) error {
				if s == step {
					return errors.New("injected I/O error")
				}
				return nil
			}
			_, err := Run(context.Background(), Options{Workers: 2}, SliceSource(records(30)), []Stage{completeStage()}, out)
			if err == nil || !strings.Contains(err.Error(), "injected I/O error") {
				t.Fatalf("Run error %v", err)
			}
			out.Close()
			if tmps, _ := filepath.Glob(filepath.Join(dir, DataDir, tempPrefix+"*")); len(tmps) != 0 {
				t.Fatalf("temp files left: %v", tmps)
			}
			rep, err := Verify(dir)
			if err != nil {
				t.Fatal(err)
			}
			if step == stepRenamed && !problemsContain(rep, "data/shard-00001", "not in the ledger") {
				t.Fatalf("verify should report the unjournalled shard: %v", rep.Problems)
			}
			runAll(t, dir, ModeResume, 30, completeStage())
			checkWhole(t, dir, 30)
		})
	}
}

func TestTornLedgerLineTruncatedOnOpen(t *testing.T) {
	dir := t.TempDir()
	runAll(t, dir, ModeFresh, 20, completeStage())
	ledger := filepath.Join(dir, LedgerFile)
	good, _ := os.ReadFile(ledger)
	f, _ := os.OpenFile(ledger, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"shard":"data/shard-00099.jsonl","bytes":12,"rows":[["k0`)
	f.Close()
	rep, _ := Verify(dir)
	if !problemsContain(rep, LedgerFile, "torn last line") {
		t.Fatalf("verify missed the torn line: %v", rep.Problems)
	}
	if err := Cat(dir, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	out := openOut(t, dir, ModeResume)
	out.Close()
	if now, _ := os.ReadFile(ledger); !bytes.Equal(now, good) {
		t.Fatalf("ledger not truncated to its last good line")
	}
	checkWhole(t, dir, 20)
}

func TestCorruptLedgerMiddleLineRefused(t *testing.T) {
	dir := t.TempDir()
	runAll(t, dir, ModeFresh, 20, completeStage())
	ledger := filepath.Join(dir, LedgerFile)
	data, _ := os.ReadFile(ledger)
	data = append([]byte("garbage\n"), data...)
	os.WriteFile(ledger, data, 0o644)
	_, err := OpenOutput(dir, testOutOpts(ModeResume))
	if err == nil || !strings.Contains(err.Error(), "ledger line 1") {
		t.Fatalf("OpenOutput error %v", err)
	}
	rep, _ := Verify(dir)
	if !problemsContain(rep, LedgerFile, "unparsable") {
		t.Fatalf("verify: %v", rep.Problems)
	}
}

func TestOrphanShardAdopted(t *testing.T) {
	dir := t.TempDir()
	runAll(t, dir, ModeFresh, 10, completeStage())
	// Drop the last ledger line: its shard becomes an orphan, as after a
	// crash between rename and ledger write.
	ledger := filepath.Join(dir, LedgerFile)
	data, _ := os.ReadFile(ledger)
	lines := strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
	last := lines[len(lines)-1]
	os.WriteFile(ledger, []byte(strings.Join(lines[:len(lines)-1], "")), 0o644)
	// An unadoptable orphan (a line without a key) is removed instead.
	bad := filepath.Join(dir, DataDir, "shard-00050.jsonl")
	os.WriteFile(bad, []byte("{\"no\":\"key\"}\n"), 0o644)

	out := openOut(t, dir, ModeResume)
	if out.adopted != 1 {
		t.Fatalf("adopted %d", out.adopted)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Fatalf("unadoptable orphan kept: %v", err)
	}
	var l1, l2 ledgerLine
	now, _ := os.ReadFile(ledger)
	nowLines := strings.Split(strings.TrimSpace(string(now)), "\n")
	if err := parseLedgerLine(strings.TrimSpace(last), &l1); err != nil {
		t.Fatal(err)
	}
	if err := parseLedgerLine(nowLines[len(nowLines)-1], &l2); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(l1, l2) {
		t.Fatalf("adopted entry differs from the lost one:\n%+v\n%+v", l2, l1)
	}
	calls := 0
	counting := &funcStage{name: "count", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		calls++
		complete(rec)
		return []*schemas.Record{rec}, nil
	}}
	if _, err := Run(context.Background(), Options{Workers: 1}, SliceSource(records(10)), []Stage{counting}, out); err != nil {
		t.Fatal(err)
	}
	out.Close()
	if calls != 0 {
		t.Fatalf("adopted keys were processed again (%d calls)", calls)
	}
	checkWhole(t, dir, 10)
}

func TestOpenModes(t *testing.T) {
	dir := t.TempDir()
	runAll(t, dir, ModeFresh, 5, completeStage())

	_, err := OpenOutput(dir, testOutOpts(ModeFresh))
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "--resume") || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("fresh on a used folder: %v", err)
	}

	o := testOutOpts(ModeResume)
	o.Kind = "compress"
	if _, err := OpenOutput(dir, o); err == nil || !strings.Contains(err.Error(), "test run, not compress") {
		t.Fatalf("resume with another kind: %v", err)
	}
	o = testOutOpts(ModeResume)
	o.Format = "parquet"
	if _, err := OpenOutput(dir, o); err == nil || !strings.Contains(err.Error(), "parquet") {
		t.Fatalf("unknown format: %v", err)
	}
	man, _, _ := readManifest(dir)
	man.Format = "parquet"
	data, _ := json.Marshal(man)
	mdir := t.TempDir()
	os.WriteFile(filepath.Join(mdir, ManifestFile), data, 0o644)
	if _, err := OpenOutput(mdir, testOutOpts(ModeResume)); err == nil || !strings.Contains(err.Error(), "written as parquet") {
		t.Fatalf("resume with another format: %v", err)
	}

	held := openOut(t, dir, ModeResume)
	if _, err := OpenOutput(dir, testOutOpts(ModeResume)); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second open: %v", err)
	}
	held.Close()

	sum := runAll(t, dir, ModeOverwrite, 3, completeStage())
	if sum.Skipped != 0 || sum.Written != 3 {
		t.Fatalf("overwrite summary %+v", sum)
	}
	checkWhole(t, dir, 3)
	man, _, _ = readManifest(dir)
	var opts bytes.Buffer
	json.Compact(&opts, man.Options)
	if man.Runs != 1 || man.Kind != "test" || man.Format != "jsonl" || opts.String() != `{"workers":4}` || man.CreatedAt.IsZero() {
		t.Fatalf("manifest %+v", man)
	}

	foreign := t.TempDir()
	os.WriteFile(filepath.Join(foreign, "thesis.tex"), []byte("x"), 0o644)
	for _, m := range []Mode{ModeOverwrite, ModeResume} {
		if _, err := OpenOutput(foreign, testOutOpts(m)); err == nil || !strings.Contains(err.Error(), "no run.json") {
			t.Fatalf("mode %d on a foreign folder: %v", m, err)
		}
	}
	if _, err := os.Stat(filepath.Join(foreign, "thesis.tex")); err != nil {
		t.Fatal("foreign file removed")
	}

	// Resume in a missing folder starts a run.
	sum = runAll(t, filepath.Join(t.TempDir(), "new"), ModeResume, 2, completeStage())
	if sum.Written != 2 {
		t.Fatalf("%+v", sum)
	}
}

func TestManifestTimesAndRuns(t *testing.T) {
	dir := t.TempDir()
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	opts := testOutOpts(ModeFresh)
	opts.Now = func() time.Time { return clock }
	out, err := OpenOutput(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	Run(context.Background(), Options{}, SliceSource(records(2)), []Stage{completeStage()}, out)
	out.Close()
	clock = clock.Add(time.Hour)
	opts.Mode = ModeResume
	out, _ = OpenOutput(dir, opts)
	Run(context.Background(), Options{}, SliceSource(records(2)), []Stage{completeStage()}, out)
	out.Close()
	man, _, _ := readManifest(dir)
	if man.Runs != 2 || !man.CreatedAt.Equal(clock.Add(-time.Hour)) || !man.UpdatedAt.Equal(clock) {
		t.Fatalf("manifest %+v", man)
	}
}

// addShard writes a shard with the given lines and journals it correctly, so
// only the content can be wrong.
func addShard(t *testing.T, dir, rel string, lines []string, rows []ledgerRow) {
	t.Helper()
	content := strings.Join(lines, "\n") + "\n"
	os.WriteFile(filepath.Join(dir, rel), []byte(content), 0o644)
	sum := sha256.Sum256([]byte(content))
	for i := range rows {
		rows[i].Len = int64(len(lines[i]) + 1)
	}
	l := &ledgerLine{Shard: rel, Bytes: int64(len(content)), SHA256: hex.EncodeToString(sum[:]), Rows: rows}
	f, _ := os.OpenFile(filepath.Join(dir, LedgerFile), os.O_APPEND|os.O_WRONLY, 0)
	f.Write(appendLedgerLine(nil, l))
	f.Close()
}

func TestVerifyCatchesCorruption(t *testing.T) {
	good := t.TempDir()
	runAll(t, good, ModeFresh, 20, flakyStage())
	mustVerify(t, good)
	dataShards, _ := filepath.Glob(filepath.Join(good, DataDir, "shard-*.jsonl"))
	failedShards, _ := filepath.Glob(filepath.Join(good, FailedDir, "shard-*.jsonl"))
	if len(dataShards) == 0 || len(failedShards) == 0 {
		t.Fatal("want shards in both folders")
	}
	firstData := DataDir + "/" + filepath.Base(dataShards[0])
	firstFailed := FailedDir + "/" + filepath.Base(failedShards[0])
	first, _ := os.ReadFile(dataShards[0])
	firstLine := strings.SplitN(string(first), "\n", 2)[0]
	var head recordHead
	json.Unmarshal([]byte(firstLine), &head)

	cases := []struct {
		name    string
		corrupt func(dir string)
		file    string
		want    string
	}{
		{"duplicate key", func(dir string) {
			// Other bytes of the same key (the same bytes are a merge's
			// copy: TestMergeCrashAtEveryStep).
			addShard(t, dir, "data/shard-00090.jsonl", []string{`{"again":true,` + firstLine[1:]},
				[]ledgerRow{{Key: head.Key, Outcome: head.Outcome, PromptIndex: head.PromptIndex}})
		}, "data/shard-00090.jsonl", "duplicate live key " + head.Key},
		{"torn shard", func(dir string) {
			p := filepath.Join(dir, firstData)
			fi, _ := os.Stat(p)
			os.Truncate(p, fi.Size()-1)
		}, firstData, "torn last line"},
		{"changed shard", func(dir string) {
			p := filepath.Join(dir, firstData)
			data, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(data, []byte("answer"), []byte("ANSWER"), 1), 0o644)
		}, firstData, "SHA-256 differs"},
		{"bad role", func(dir string) {
			addShard(t, dir, "data/shard-00091.jsonl",
				[]string{`{"key":"zz","prompt_index":99,"sample":0,"outcome":"completed","conversations":[{"from":"robot","value":"x"}]}`},
				[]ledgerRow{{Key: "zz", Outcome: "completed", PromptIndex: 99}})
		}, "data/shard-00091.jsonl", `invalid role "robot"`},
		{"unknown outcome", func(dir string) {
			addShard(t, dir, "data/shard-00092.jsonl",
				[]string{`{"key":"zy","prompt_index":98,"sample":0,"outcome":"weird","conversations":[]}`},
				[]ledgerRow{{Key: "zy", Outcome: "weird", PromptIndex: 98}})
		}, "data/shard-00092.jsonl", `unknown outcome "weird"`},
		{"missing fields", func(dir string) {
			addShard(t, dir, "data/shard-00093.jsonl", []string{`{"key":"zx","outcome":"completed"}`},
				[]ledgerRow{{Key: "zx", Outcome: "completed"}})
		}, "data/shard-00093.jsonl", "missing prompt_index"},
		{"not json", func(dir string) {
			addShard(t, dir, "data/shard-00094.jsonl", []string{`{"key":`}, []ledgerRow{{Key: "zw", Outcome: "completed"}})
		}, "data/shard-00094.jsonl", "not a JSON object"},
		{"retryable in data", func(dir string) {
			addShard(t, dir, "data/shard-00095.jsonl",
				[]string{`{"key":"zv","prompt_index":97,"sample":0,"outcome":"timeout","conversations":null}`},
				[]ledgerRow{{Key: "zv", Outcome: "timeout", PromptIndex: 97}})
		}, "data/shard-00095.jsonl", "does not belong in data/"},
		{"ledger key mismatch", func(dir string) {
			p := filepath.Join(dir, LedgerFile)
			data, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(data, []byte(`["`+head.Key+`"`), []byte(`["other"`), 1), 0o644)
		}, firstData, "ledger says other"},
		{"ledger length mismatch", func(dir string) {
			addShard(t, dir, "data/shard-00096.jsonl",
				[]string{`{"key":"zu","prompt_index":96,"sample":0,"outcome":"completed","conversations":[]}`, `{"key":"zt","prompt_index":95,"sample":0,"outcome":"completed","conversations":[]}`},
				[]ledgerRow{{Key: "zu", Outcome: "completed", PromptIndex: 96}})
		}, "data/shard-00096.jsonl", "not listed in ledger line"},
		{"missing shard", func(dir string) {
			os.Remove(filepath.Join(dir, firstFailed))
		}, firstFailed, "unreadable"},
		{"stray temp", func(dir string) {
			os.WriteFile(filepath.Join(dir, DataDir, ".tmp-shard-00007.jsonl-123"), []byte("x"), 0o644)
		}, "data/.tmp-shard-00007.jsonl-123", "stray temp file"},
		{"unjournalled shard", func(dir string) {
			os.WriteFile(filepath.Join(dir, DataDir, "shard-00077.jsonl"), []byte("{}\n"), 0o644)
		}, "data/shard-00077.jsonl", "not in the ledger"},
		{"unknown file", func(dir string) {
			os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644)
		}, "notes.txt", "unexpected file"},
		{"torn ledger", func(dir string) {
			f, _ := os.OpenFile(filepath.Join(dir, LedgerFile), os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString(`{"shard":"da`)
			f.Close()
		}, LedgerFile, "torn last line"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, good, dir)
			c.corrupt(dir)
			rep, err := Verify(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !problemsContain(rep, c.file, c.want) {
				t.Fatalf("want a problem in %s containing %q, got %v", c.file, c.want, rep.Problems)
			}
		})
	}
}

func TestLedgerLineRoundTrip(t *testing.T) {
	in := ledgerLine{Shard: "data/shard-00001.jsonl", Bytes: 42, SHA256: "abc", Rows: []ledgerRow{
		{Key: "plain", Outcome: "completed", PromptIndex: 3, Sample: 1, Len: 10},
		{Key: "quote\"back\\slash\nnewline\u00e9\u2028", Outcome: "api_error", PromptIndex: 1 << 40, Sample: 0, Len: 0},
		{Key: "marker", Outcome: outcomeFiltered, PromptIndex: 5, Sample: 0, Len: -1},
	}}
	b := appendLedgerLine(nil, &in)
	if !json.Valid(bytes.TrimSpace(b)) || bytes.Count(b, []byte("\n")) != 1 {
		t.Fatalf("not one JSON line: %s", b)
	}
	var out ledgerLine
	if err := parseLedgerLine(strings.TrimSuffix(string(b), "\n"), &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n%+v\n%+v", in, out)
	}
	// Whitespace and unknown fields are accepted, as any JSON writer may add them.
	var l ledgerLine
	if err := parseLedgerLine(` { "v" : {"x":[1,2]}, "rows" : [ [ "k" , "completed" , 1 , 2 , 3 ] ] , "shard":"" } `, &l); err != nil || len(l.Rows) != 1 || l.Rows[0].Len != 3 {
		t.Fatalf("%+v %v", l, err)
	}
	for _, bad := range []string{``, `{`, `{"rows":[["k","completed",1,2]]}`, `{"rows":[["","completed",1,2,3]]}`, `{"rows":[]} x`, `{"shard":"a"}`, `{"rows":[["k","c",1,2,-5]]}`} {
		if err := parseLedgerLine(bad, &l); err == nil {
			t.Errorf("parsed bad line %q", bad)
		}
	}
}

func TestStatsRecomputedFromLiveRecords(t *testing.T) {
	dir := t.TempDir()
	stage := func(retryOdd bool) *funcStage {
		return &funcStage{name: "tools", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
			complete(rec)
			rec.APICalls = 2
			rec.Usage = schemas.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}
			rec.ToolStats = map[string]schemas.ToolStat{"terminal": {Count: 3, Success: 2, Failure: 1}}
			rec.ToolErrorCounts = map[string]int{"terminal": 1}
			rec.ReasoningStats = schemas.ReasoningStats{TotalAssistantTurns: 4, TurnsWithReasoning: rec.PromptIndex % 2, TurnsWithoutReason: 4 - rec.PromptIndex%2, HasAnyReasoning: rec.PromptIndex%2 == 1}
			rec.DurationMS = int64(rec.PromptIndex+1) * 100
			if retryOdd && rec.PromptIndex%2 == 1 {
				rec.Outcome = schemas.OutcomeTimeout
			}
			if rec.PromptIndex == 0 {
				rec.Outcome, rec.Partial, rec.Completed = schemas.OutcomePartial, true, false
			}
			return []*schemas.Record{rec}, nil
		}}
	}
	runAll(t, dir, ModeFresh, 10, stage(true))
	st, err := Stats(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Records != 10 || st.Outcomes[schemas.OutcomeTimeout] != 5 || st.Outcomes[schemas.OutcomePartial] != 1 {
		t.Fatalf("first stats %+v", st)
	}
	runAll(t, dir, ModeResume, 10, stage(false))
	st, err = Stats(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := Statistics{
		Records:   10,
		Outcomes:  map[schemas.Outcome]int{schemas.OutcomeCompleted: 9, schemas.OutcomePartial: 1},
		Completed: 9,
		Partial:   1,
		CallCount: schemas.CallCount{APICalls: 20},
		Usage:     schemas.Usage{PromptTokens: 100, CompletionTokens: 50, TotalTokens: 150},
		ToolTally: schemas.ToolTally[ToolStatistics]{Tools: map[string]ToolStatistics{"terminal": {Count: 30, Success: 20, Failure: 10, SuccessRate: 20.0 / 30}},
			ToolErrors: map[string]int{"terminal": 10}},
		Reasoning: ReasoningStatistics{AssistantTurns: 40, TurnsWithReasoning: 5, TurnsWithoutReasoning: 35, TurnCoverage: 5.0 / 40, RowsWithReasoning: 5, RowsWithoutReasoning: 5},
		Duration:  DurationStatistics{TotalMS: 5500, MeanMS: 550, P50MS: 500, P95MS: 900, MaxMS: 1000},
		Cost:      CostStatistics{UnpricedRecords: 10, ByOutcomeUSD: map[schemas.Outcome]float64{}},
	}
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("stats\n got %+v\nwant %+v", st, want)
	}
	var onDisk Statistics
	data, _ := os.ReadFile(filepath.Join(dir, StatisticsFile))
	if err := json.Unmarshal(data, &onDisk); err != nil || !reflect.DeepEqual(onDisk, want) {
		t.Fatalf("statistics.json is not the cumulative statistics: %s (%v)", data, err)
	}
	var text bytes.Buffer
	st.WriteText(&text)
	for _, s := range []string{"records", "terminal", "66.7%", "5 of 40 assistant turns"} {
		if !strings.Contains(text.String(), s) {
			t.Fatalf("text stats lack %q:\n%s", s, text.String())
		}
	}
}

func TestEncodeRecordRaw(t *testing.T) {
	rec := &schemas.Record{Key: "k", Raw: json.RawMessage("{\n  \"b\": 1,\n  \"a\": \"<x>\"\n}")}
	line, err := EncodeRecord(rec)
	if err != nil || string(line) != `{"b":1,"a":"<x>"}` {
		t.Fatalf("%s %v", line, err)
	}
	rec.Raw = json.RawMessage(`{"z":1,  "y":2}`)
	if line, _ := EncodeRecord(rec); string(line) != `{"z":1,  "y":2}` {
		t.Fatalf("single-line raw not verbatim: %s", line)
	}
	for _, bad := range []string{`[1]`, `{"a":`} {
		rec.Raw = json.RawMessage(bad)
		if _, err := EncodeRecord(rec); err == nil {
			t.Fatalf("accepted raw %s", bad)
		}
	}
}

// TestWriteShardHash: the size and SHA-256 writeShard returns, the hash now
// taken on a goroutine beside the write, are those of the file it leaves, in
// both formats, for shards of one small row and of rows larger than the
// writers' buffers, and the rows' sizes add up to the file's in JSONL.
func TestWriteShardHash(t *testing.T) {
	for _, format := range []string{FormatJSONL, FormatParquet} {
		for _, size := range []int{1, 300 << 10} {
			f, err := formatByName(format)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			var rows []pending
			for i := range 7 {
				rec := &schemas.Record{Key: fmt.Sprintf("k%d", i), PromptIndex: i, Outcome: schemas.OutcomeCompleted,
					Conversations: []schemas.Turn{{From: "human", Value: strings.Repeat(string(rune('a'+i)), size)}}}
				line, err := EncodeRecord(rec)
				if err != nil {
					t.Fatal(err)
				}
				rows = append(rows, pending{key: rec.Key, pi: int64(i), rec: rec, line: line})
			}
			n, sum, err := writeShard(f, dir, "shard-00001"+f.ext, rows, nil)
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(filepath.Join(dir, "shard-00001"+f.ext))
			if err != nil {
				t.Fatal(err)
			}
			want := sha256.Sum256(data)
			if n != int64(len(data)) || sum != hex.EncodeToString(want[:]) {
				t.Errorf("%s, rows of %d bytes: writeShard said %d bytes, %s; the file has %d, %x", format, size, n, sum, len(data), want)
			}
			if format == FormatJSONL {
				var total int64
				for _, r := range rows {
					total += r.n
				}
				if total != n {
					t.Errorf("jsonl rows of %d bytes: the rows' sizes add up to %d, the file has %d", size, total, n)
				}
			}
		}
	}
}
