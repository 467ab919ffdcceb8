package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// TestPassAtK holds the product form to 1 - C(n-c,k)/C(n,k) computed with
// exact binomials.
func TestPassAtK(t *testing.T) {
	for n := 1; n <= 30; n++ {
		for c := 0; c <= n; c++ {
			for k := 1; k <= n; k++ {
				num, den := new(big.Int).Binomial(int64(n-c), int64(k)), new(big.Int).Binomial(int64(n), int64(k))
				ratio, _ := new(big.Rat).SetFrac(num, den).Float64()
				if got, want := PassAtK(n, c, k), 1-ratio; math.Abs(got-want) > 1e-12 {
					t.Fatalf("PassAtK(%d, %d, %d) = %v, want %v", n, c, k, got, want)
				}
			}
		}
	}
	if got := PassAtK(4, 1, 1); got != 0.25 {
		t.Fatalf("pass@1 of 1 in 4 = %v", got)
	}
}

// gradedRecords are 5 prompts of 4 samples, graded by gradeStage.
func gradedRecords() []*schemas.Record {
	var recs []*schemas.Record
	for p := range 5 {
		for s := range 4 {
			recs = append(recs, &schemas.Record{Key: fmt.Sprintf("p%d#%d", p, s), PromptIndex: p, Sample: s})
		}
	}
	return recs
}

// gradeStage grades the records of gradedRecords: prompt 0 passes samples 0
// and 1 (reward 1, else 0); prompt 1 passes all; prompt 2 none, reward 0.25
// each; prompt 3 passes sample 0, its grader fails on sample 1 (reward
// null), and sample 3 ends max_turns; prompt 4 is not graded.
func gradeStage() *funcStage {
	return &funcStage{name: "grade", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		complete(rec)
		p, s := rec.PromptIndex, rec.Sample
		grade := func(passed bool, reward float64) {
			rec.Reward = &reward
			rec.Grade = &schemas.Grade{Grader: "cmd", Passed: &passed, Value: &reward, DurationMS: 7}
		}
		switch {
		case p == 0:
			grade(s < 2, map[bool]float64{true: 1, false: 0}[s < 2])
		case p == 1:
			grade(true, 1)
		case p == 2:
			grade(false, 0.25)
		case p == 3 && s == 1:
			rec.Grade = &schemas.Grade{Grader: "cmd", Error: "verify timed out after 5m", DurationMS: 300000}
		case p == 3:
			grade(s == 0, map[bool]float64{true: 1, false: 0}[s == 0])
		}
		if p == 3 && s == 3 {
			rec.Outcome, rec.Completed = schemas.OutcomeMaxTurns, false
		}
		return []*schemas.Record{rec}, nil
	}}
}

// runRecords runs recs through stage into a fresh folder of format.
func runRecords(t *testing.T, format string, recs []*schemas.Record, stage Stage) string {
	t.Helper()
	dir := t.TempDir()
	opts := testOutOpts(ModeFresh)
	opts.Format = format
	out, err := OpenOutput(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), Options{Workers: 3, Now: testNow}, SliceSource(recs), []Stage{stage}, out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestStatsRewards: stats count the graded records, their pass rate overall
// and per outcome, pass@1 and pass@4 over the prompts and the reward
// distribution, the same from JSONL and Parquet shards, in statistics.json
// and in the text; an ungraded run shows none of it.
func TestStatsRewards(t *testing.T) {
	var got []Statistics
	for _, format := range []string{FormatJSONL, FormatParquet} {
		dir := runRecords(t, format, gradedRecords(), gradeStage())
		st, err := Stats(dir)
		if err != nil {
			t.Fatal(err)
		}
		r := st.Reward
		if r == nil || r.Graded != 16 || r.Passed != 7 || r.Failed != 8 || r.Errored != 1 || r.Rewarded != 15 ||
			r.Min != 0 || r.Max != 1 || math.Abs(r.Mean-8.0/15) > 1e-12 || r.Prompts != 4 || r.MaxSamples != 4 {
			t.Fatalf("%s: reward statistics %+v", format, r)
		}
		if st.PassRate == nil || *st.PassRate != 7.0/16 || !reflect.DeepEqual(st.PassAtK, map[string]float64{"1": 0.4375, "4": 0.75}) {
			t.Fatalf("%s: pass rate %v, pass@k %v", format, st.PassRate, st.PassAtK)
		}
		if want := map[schemas.Outcome]PassCount{schemas.OutcomeCompleted: {Graded: 15, Passed: 7, PassRate: 7.0 / 15}, schemas.OutcomeMaxTurns: {Graded: 1}}; !reflect.DeepEqual(r.ByOutcome, want) {
			t.Fatalf("%s: by outcome %+v", format, r.ByOutcome)
		}
		counts := map[string]int{}
		for _, b := range r.Histogram {
			if b.Count > 0 {
				counts[b.Range()] = b.Count
			}
		}
		if want := map[string]int{"0–0.1": 4, "0.2–0.3": 4, "0.9–1": 7}; !reflect.DeepEqual(counts, want) || len(r.Histogram) != 12 {
			t.Fatalf("%s: histogram %v", format, counts)
		}
		// statistics.json, written by the run, holds the same figures.
		b, err := os.ReadFile(filepath.Join(dir, StatisticsFile))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m["pass_rate"] != 7.0/16 || !reflect.DeepEqual(m["pass_at_k"], map[string]any{"1": 0.4375, "4": 0.75}) {
			t.Fatalf("%s: statistics.json pass_rate %v pass_at_k %v", format, m["pass_rate"], m["pass_at_k"])
		}
		var text strings.Builder
		if err := st.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		for _, re := range []string{
			`(?m)^graded +16: 7 passed, 8 failed, 1 grader errors \(reward null\)$`,
			`(?m)^pass rate +43\.8%; pass@1 43\.8%, pass@4 75\.0%$`,
			`(?m)^  completed +7 of 15 passed \(46\.7%\)$`,
			`(?m)^  max_turns +0 of 1 passed \(0\.0%\)$`,
			`(?m)^reward +mean 0\.5333, min 0, max 1 over 15 rewards$`,
			`(?m)^  histogram +0–0\.1 4, 0\.2–0\.3 4, 0\.9–1 7$`,
		} {
			if !regexp.MustCompile(re).MatchString(text.String()) {
				t.Fatalf("%s: text lacks %q:\n%s", format, re, text.String())
			}
		}
		got = append(got, st)
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Fatalf("JSONL and Parquet statistics differ:\n%+v\n%+v", got[0].Reward, got[1].Reward)
	}

	// An ungraded run: no reward block, no pass_rate or pass_at_k key.
	dir := runRecords(t, FormatJSONL, gradedRecords(), completeStage())
	st, err := Stats(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(st)
	var text strings.Builder
	st.WriteText(&text)
	if st.Reward != nil || strings.Contains(string(b), "pass_") || strings.Contains(string(b), `"reward"`) ||
		strings.Contains(text.String(), "pass") || strings.Contains(text.String(), "graded") || strings.Contains(text.String(), "reward") {
		t.Fatalf("an ungraded run shows rewards:\n%s\n%s", b, text.String())
	}
}

// TestStatsRewardsMerge: statistics of disjoint folders that share prompts
// (a sharded run's samples of one prompt lie in several shards) add up to
// those of one folder, pass@k included; statistics read back from JSON give
// pass@k as the prompt-weighted mean of the parts.
func TestStatsRewardsMerge(t *testing.T) {
	all := gradedRecords()
	var even, odd []*schemas.Record
	for _, r := range all {
		if r.Sample%2 == 0 {
			even = append(even, r)
		} else {
			odd = append(odd, r)
		}
	}
	whole, err := Stats(runRecords(t, FormatJSONL, gradedRecords(), gradeStage()))
	if err != nil {
		t.Fatal(err)
	}
	var parts []Statistics
	for _, recs := range [][]*schemas.Record{even, odd} {
		st, err := Stats(runRecords(t, FormatJSONL, recs, gradeStage()))
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, st)
	}
	if !reflect.DeepEqual(parts[0].PassAtK, map[string]float64{"1": 0.5, "2": 0.75}) {
		t.Fatalf("even samples: pass@k %v", parts[0].PassAtK)
	}
	merged := NewStatistics()
	for _, p := range parts {
		merged.Add(p)
	}
	merged.Finish()
	if !reflect.DeepEqual(merged.Reward, whole.Reward) || !reflect.DeepEqual(merged.PassAtK, whole.PassAtK) || *merged.PassRate != *whole.PassRate {
		t.Fatalf("merged %+v %v\nwhole %+v %v", merged.Reward, merged.PassAtK, whole.Reward, whole.PassAtK)
	}

	est := NewStatistics()
	for _, p := range parts {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var back Statistics
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		est.Add(back)
	}
	est.Finish()
	if est.PassAtK["1"] != whole.PassAtK["1"] || est.Reward.Graded != 16 || est.Reward.Prompts != 8 || *est.PassRate != *whole.PassRate {
		t.Fatalf("estimated from JSON: %+v %v, whole pass@k %v", est.Reward, est.PassAtK, whole.PassAtK)
	}
}
