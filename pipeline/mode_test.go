package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// okStage completes every record.
type okStage struct{}

func (okStage) Name() string { return "ok" }
func (okStage) Process(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
	rec.Outcome = schemas.OutcomeCompleted
	return []*schemas.Record{rec}, nil
}

func modeSpec(n int, finished *int) ModeSpec {
	return ModeSpec{
		Kind: "test",
		Open: func(_ context.Context, out *Output) (Source, []Stage, error) {
			recs := make([]*schemas.Record, n)
			for i := range recs {
				recs[i] = &schemas.Record{Key: fmt.Sprintf("k%d", i), PromptIndex: i}
			}
			return SliceSource(recs), []Stage{okStage{}}, nil
		},
		Finish: func(out *Output, sum Summary) error {
			// The output is still open: every record of this run is done.
			for i := 0; i < n; i++ {
				if !out.Done(fmt.Sprintf("k%d", i)) {
					return fmt.Errorf("k%d not done when Finish ran", i)
				}
			}
			*finished++
			return nil
		},
	}
}

func TestRunModeRunsFinishesAndResumes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	finished := 0
	res, err := RunMode(context.Background(), RunConfig{Out: dir, Workers: 2}, modeSpec(5, &finished))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Opened || res.NothingToDo || res.Summary.Written != 5 || res.PreviouslyDone != 0 || finished != 1 {
		t.Fatalf("first run: %+v, finished %d", res, finished)
	}
	if rep, err := Verify(dir); err != nil || !rep.OK() {
		t.Fatalf("verify: %+v %v", rep.Problems, err)
	}
	res, err = RunMode(context.Background(), RunConfig{Out: dir, Mode: ModeResume}, modeSpec(5, &finished))
	if err != nil {
		t.Fatal(err)
	}
	if !res.NothingToDo || res.PreviouslyDone != 5 || finished != 2 {
		t.Fatalf("resume: %+v, finished %d", res, finished)
	}
}

func TestRunModeRefusesAFolderInUse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	finished := 0
	if _, err := RunMode(context.Background(), RunConfig{Out: dir}, modeSpec(1, &finished)); err != nil {
		t.Fatal(err)
	}
	res, err := RunMode(context.Background(), RunConfig{Out: dir}, modeSpec(1, &finished))
	if !errors.Is(err, ErrRefused) || res.Opened {
		t.Fatalf("fresh run into a used folder: %v (opened %v)", err, res.Opened)
	}
	other := modeSpec(1, &finished)
	other.Kind = "other"
	if _, err := RunMode(context.Background(), RunConfig{Out: dir, Mode: ModeResume}, other); !errors.Is(err, ErrRefused) {
		t.Fatalf("resume as another kind: %v", err)
	}
	if finished != 1 {
		t.Fatalf("Finish ran %d times, want once", finished)
	}
}

func TestRunModeReportsFinishAndOpenErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	spec := modeSpec(1, new(int))
	spec.Finish = func(*Output, Summary) error { return errors.New("metrics unwritable") }
	if _, err := RunMode(context.Background(), RunConfig{Out: dir}, spec); err == nil || err.Error() != "test: metrics unwritable" {
		t.Fatalf("Finish error: %v", err)
	}
	spec.Open = func(context.Context, *Output) (Source, []Stage, error) { return nil, nil, errors.New("no input") }
	res, err := RunMode(context.Background(), RunConfig{Out: filepath.Join(t.TempDir(), "o2")}, spec)
	if err == nil || err.Error() != "test: no input" || !res.Opened {
		t.Fatalf("Open error: %v", err)
	}
}

// TestRunModeRecordsRetriesAcrossResumes: each run's retries (RunConfig.Retries)
// are added to run.json's; statistics.json, Stats and its text report the sum;
// a run without the hook leaves them as they were.
func TestRunModeRecordsRetriesAcrossResumes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	finished := 0
	first := func() outdir.Retries { return outdir.Retries{RateLimited: 3, Server: 1} }
	if _, err := RunMode(context.Background(), RunConfig{Out: dir, Retries: first}, modeSpec(2, &finished)); err != nil {
		t.Fatal(err)
	}
	second := func() outdir.Retries { return outdir.Retries{RateLimited: 2, Timeout: 4} }
	if _, err := RunMode(context.Background(), RunConfig{Out: dir, Mode: ModeResume, Retries: second}, modeSpec(3, &finished)); err != nil {
		t.Fatal(err)
	}
	if _, err := RunMode(context.Background(), RunConfig{Out: dir, Mode: ModeResume}, modeSpec(3, &finished)); err != nil {
		t.Fatal(err)
	}
	want := outdir.Retries{RateLimited: 5, Server: 1, Timeout: 4}
	man, _, err := outdir.ReadManifest(dir)
	if err != nil || man.Retries == nil || *man.Retries != want {
		t.Fatalf("run.json retries = %+v (%v), want %+v", man.Retries, err, want)
	}
	data, err := os.ReadFile(filepath.Join(dir, StatisticsFile))
	if err != nil {
		t.Fatal(err)
	}
	var file Statistics
	if err := json.Unmarshal(data, &file); err != nil || file.Retries == nil || *file.Retries != want {
		t.Fatalf("statistics.json retries = %+v (%v), want %+v", file.Retries, err, want)
	}
	st, err := Stats(dir)
	if err != nil || st.Retries == nil || *st.Retries != want {
		t.Fatalf("Stats retries = %+v (%v), want %+v", st.Retries, err, want)
	}
	var text strings.Builder
	if err := st.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^retries +10 \(5 429 rate-limited, 1 5xx server error, 4 timeout\)$`).MatchString(text.String()) {
		t.Errorf("stats text:\n%s", text.String())
	}
	sum := NewStatistics()
	sum.Add(st)
	sum.Add(st)
	if sum.Retries == nil || sum.Retries.Total() != 20 {
		t.Errorf("Add of two folders' retries = %+v", sum.Retries)
	}
}

// TestRunModeWithoutRetriesReadsAsBefore: a folder whose run.json has no
// retries (older versions, modes without a model) reads as it did: none in
// run.json, statistics.json or the text; a later run with the hook starts
// counting from there.
func TestRunModeWithoutRetriesReadsAsBefore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	finished := 0
	if _, err := RunMode(context.Background(), RunConfig{Out: dir}, modeSpec(2, &finished)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{outdir.ManifestFile, StatisticsFile} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "retries") {
			t.Errorf("%s names retries:\n%s", name, data)
		}
	}
	st, err := Stats(dir)
	if err != nil || st.Retries != nil {
		t.Fatalf("Stats retries = %+v (%v)", st.Retries, err)
	}
	var text strings.Builder
	if err := st.WriteText(&text); err != nil || strings.Contains(text.String(), "retries") {
		t.Errorf("stats text (%v):\n%s", err, text.String())
	}
	more := func() outdir.Retries { return outdir.Retries{Malformed: 2} }
	if _, err := RunMode(context.Background(), RunConfig{Out: dir, Mode: ModeResume, Retries: more}, modeSpec(3, &finished)); err != nil {
		t.Fatal(err)
	}
	if st, err = Stats(dir); err != nil || st.Retries == nil || *st.Retries != (outdir.Retries{Malformed: 2}) {
		t.Fatalf("after a run with the hook: %+v (%v)", st.Retries, err)
	}
}
