package pipeline

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// statsRecord fills rec with what statistics count, varied by its prompt
// index: an outcome (some failed), a cost and a reward whose sums depend on
// their order, tools, reasoning, a duration and timings.
func statsRecord(rec *schemas.Record) {
	complete(rec)
	i := rec.PromptIndex
	if i%5 == 3 {
		rec.Outcome, rec.Completed, rec.Error = schemas.OutcomeAPIError, false, "boom"
	}
	if i%4 != 1 { // every fourth unpriced
		c := 1/float64(i+3) + float64(i%7)*1e-9
		rec.CostUSD = &c
	}
	if i%3 != 2 { // every third ungraded
		v := float64(i%10)/10 + 1/float64(i+7)
		passed := i%2 == 0
		rec.Reward = &v
		rec.Grade = &schemas.Grade{Grader: "answer", Passed: &passed, Value: &v}
	}
	rec.APICalls = 1 + i%3
	rec.Usage = schemas.Usage{PromptTokens: int64(10 * i), CompletionTokens: int64(i), TotalTokens: int64(11 * i)}
	rec.ToolStats = map[string]schemas.ToolStat{"terminal": {Count: i % 4, Success: i % 3 / 2, Failure: i%4 - i%3/2}}
	rec.ToolErrorCounts = map[string]int{"terminal": i%4 - i%3/2}
	rec.ReasoningStats = schemas.ReasoningStats{TotalAssistantTurns: 2, TurnsWithReasoning: i % 2, TurnsWithoutReason: 2 - i%2, HasAnyReasoning: i%2 == 1}
	rec.DurationMS = int64(37 * (i % 11))
	rec.Timings = &schemas.Timings{ModelMS: int64(20 * (i % 11)), ToolMS: int64(i % 5)}
}

// statsJSON is statistics.json's form of st.
func statsJSON(t *testing.T, st Statistics) string {
	t.Helper()
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// The statistics a run writes from the records it committed (runStats) are
// byte for byte those read back from the folder (Stats), though the records
// were committed out of Cat's order and the sums of their costs and rewards
// depend on it; after a resume, which reads them back, too.
func TestRunStatisticsFromCommitsMatchStats(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	const n = 120
	stage := &funcStage{name: "stats", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond) // commit order apart from input order
		statsRecord(rec)
		return []*schemas.Record{rec}, nil
	}}
	out := openOut(t, dir, ModeFresh)
	if out.runStats == nil {
		t.Fatal("a fresh folder does not count its run's commits")
	}
	if _, err := Run(context.Background(), Options{Workers: 8}, SliceSource(records(n)), []Stage{stage}, out); err != nil {
		t.Fatal(err)
	}
	// Run's finish took the commits' sums (committedStats drops them), not
	// the records read back, which would match Stats whatever they held.
	if out.runStats != nil {
		t.Fatal("the run's statistics were read back, not summed from its commits")
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		written, err := os.ReadFile(filepath.Join(dir, StatisticsFile))
		if err != nil {
			t.Fatal(err)
		}
		st, err := Stats(dir)
		if err != nil {
			t.Fatal(err)
		}
		if want := statsJSON(t, st); string(written) != want {
			t.Fatalf("%s: statistics.json differs from the folder's statistics:\n%s\nwant:\n%s", when, written, want)
		}
		if st.Records != n || st.Cost.PricedRecords == 0 || st.Reward == nil || st.Outcomes[schemas.OutcomeAPIError] == 0 {
			t.Fatalf("%s: the records do not vary as meant: %+v", when, st)
		}
	}
	check("fresh run")

	// A resume redoes the api_error records: the folder held live records
	// at open, so it reads them back.
	out = openOut(t, dir, ModeResume)
	if out.runStats != nil {
		t.Fatal("a folder with live records counts only its run's commits")
	}
	if _, err := Run(context.Background(), Options{Workers: 8}, SliceSource(records(n)), []Stage{stage}, out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	check("resume")
}

// statsAcc with deferred floats, given the lines in any order, gives the
// statistics of the lines given in Cat's order (prompt_index, sample, key),
// to the bit; summing the costs in the order given would not.
func TestStatsAccDeferredFloatsFollowCatOrder(t *testing.T) {
	type row struct {
		rec  *schemas.Record
		line []byte
	}
	var rows []row
	for _, r := range records(200) {
		statsRecord(r)
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row{r, line})
	}
	man := &Manifest{}
	add := func(acc *statsAcc, rows []row) Statistics {
		for _, r := range rows {
			if err := acc.add(man, r.line, r.rec.Outcome, int64(r.rec.PromptIndex), int64(r.rec.Sample), r.rec.Key); err != nil {
				t.Fatal(err)
			}
		}
		return acc.finish(man)
	}
	want := statsJSON(t, add(newStatsAcc(false), rows))
	shuffled := append([]row(nil), rows...)
	rng := rand.New(rand.NewPCG(1, 2))
	differs := false
	for try := range 20 {
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := statsJSON(t, add(newStatsAcc(true), shuffled)); got != want {
			t.Fatalf("shuffle %d: deferred statistics differ:\n%s\nwant:\n%s", try, got, want)
		}
		naive := 0.0
		for _, r := range shuffled {
			if r.rec.CostUSD != nil {
				naive += *r.rec.CostUSD
			}
		}
		var sorted Statistics
		_ = json.Unmarshal([]byte(want), &sorted)
		differs = differs || naive != sorted.Cost.TotalUSD
	}
	if !differs {
		t.Fatal("no shuffle changed the naive sum of the costs: the test shows nothing")
	}
}
