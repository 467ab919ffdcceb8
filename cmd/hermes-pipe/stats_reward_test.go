package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

type keepStage struct{}

func (keepStage) Name() string { return "keep" }
func (keepStage) Process(_ context.Context, r *schemas.Record) ([]*schemas.Record, error) {
	return []*schemas.Record{r}, nil
}

// gradedRun writes 6 prompts of 4 samples through the runtime as a
// generate folder: prompt p's first p%5 samples pass (reward 1), the others
// fail (reward 0), and prompt 5 is not graded.
func gradedRun(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	var recs []*schemas.Record
	for p := range 6 {
		for s := range 4 {
			r := &schemas.Record{Key: fmt.Sprintf("p%d#%d", p, s), PromptIndex: p, Sample: s, Outcome: schemas.OutcomeCompleted, Completed: true,
				Conversations: []schemas.Turn{{From: "human", Value: fmt.Sprintf("task %d", p)}, {From: "gpt", Value: "done"}}}
			if p < 5 {
				passed := s < p%5
				v := map[bool]float64{true: 1, false: 0}[passed]
				r.Reward, r.Grade = &v, &schemas.Grade{Grader: "cmd", Passed: &passed, Value: &v}
			}
			recs = append(recs, r)
		}
	}
	o, err := pipeline.OpenOutput(dir, pipeline.OutputOptions{Kind: "generate", Format: pipeline.FormatParquet})
	if err != nil {
		t.Fatal(err)
	}
	_, err = pipeline.Run(context.Background(), pipeline.Options{Workers: 2}, pipeline.SliceSource(recs), []pipeline.Stage{keepStage{}}, o)
	if cerr := o.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestStatsRewardsCLI: stats --json gives pass_rate and pass_at_k (k = 1
// and the samples per prompt), the text its pass rate line, and report
// its Rewards block.
func TestStatsRewardsCLI(t *testing.T) {
	dir := gradedRun(t)
	code, out, errs := hp(t, "stats", "--json", dir)
	if code != 0 {
		t.Fatalf("stats --json exit %d: %s", code, errs)
	}
	var st struct {
		PassRate *float64           `json:"pass_rate"`
		PassAtK  map[string]float64 `json:"pass_at_k"`
		Reward   struct{ Graded, Passed int }
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	// Passes per prompt: 0, 1, 2, 3, 4 of 4 samples.
	pass1 := (0 + 0.25 + 0.5 + 0.75 + 1) / 5
	if st.PassRate == nil || *st.PassRate != 10.0/20 || len(st.PassAtK) != 2 || st.PassAtK["1"] != pass1 || st.PassAtK["4"] != 4.0/5 ||
		st.Reward.Graded != 20 || st.Reward.Passed != 10 {
		t.Fatalf("stats --json: %s", out)
	}
	code, out, errs = hp(t, "stats", dir)
	if code != 0 || !regexp.MustCompile(`(?m)^pass rate +50\.0%; pass@1 50\.0%, pass@4 80\.0%$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^graded +20: 10 passed, 10 failed, 0 grader errors \(reward null\)$`).MatchString(out) {
		t.Fatalf("stats exit %d: %s%s", code, out, errs)
	}
	html := filepath.Join(t.TempDir(), "report.html")
	if code, _, errs := hp(t, "report", "-o", html, dir); code != 0 {
		t.Fatalf("report exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `<b>80.0%</b>pass@4</div>`) || !strings.Contains(string(b), `id="pass-rate"><b>50.0%</b>`) {
		t.Fatal("report lacks the Rewards block")
	}
}
