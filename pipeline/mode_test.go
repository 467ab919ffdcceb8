package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

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
