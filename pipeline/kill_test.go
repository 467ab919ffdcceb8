package pipeline

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

const (
	kill9Env       = "PIPELINE_KILL9_DIR"
	kill9FormatEnv = "PIPELINE_KILL9_FORMAT"
)

// TestKill9Resume re-executes the test binary as a child that runs a slow
// pipeline on a shared output folder and SIGKILLs it at random moments, then
// finishes the run in-process: every key must appear exactly once and the
// folder must verify. A kill moment is a random number of stage calls into the
// child's run (the child reports each call on a pipe), not a wall-clock delay,
// so a loaded machine that starts the child slowly still kills it mid-run.
func TestKill9Resume(t *testing.T) {
	const n = 1000
	if dir := os.Getenv(kill9Env); dir != "" {
		kill9Child(t, dir, n)
		return
	}
	if testing.Short() {
		t.Skip("spawns subprocesses")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 9))
	finalKeys := func() int {
		ld, err := loadLedger(filepath.Join(dir, LedgerFile))
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, e := range ld.ix.entries {
			if !ld.ix.outcomes[e.outcome].Retryable() {
				done++
			}
		}
		return done
	}
	kills, midRun := 0, 0
	for i := range 10 {
		progress, progressW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestKill9Resume$", "-test.count=1")
		cmd.Env = append(os.Environ(), kill9Env+"="+dir, kill9FormatEnv+"="+testFormat)
		cmd.ExtraFiles = []*os.File{progressW} // the child's fd 3
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		progressW.Close()
		// Kill after a random number of stage calls (or when the child ends
		// on its own and closes the pipe), then a random few hundred µs more.
		calls := 20 + rng.IntN(100)
		_, readErr := io.CopyN(io.Discard, progress, int64(calls))
		time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
		if readErr == nil && cmd.Process.Signal(syscall.SIGKILL) == nil {
			kills++
		}
		err = cmd.Wait()
		progress.Close()
		done := finalKeys()
		if done < n {
			midRun++
		}
		t.Logf("child %d: %v; %d keys done", i, err, done)
	}
	if kills == 0 {
		t.Fatal("no child was killed")
	}
	ledgerKeys := func() int {
		ld, err := loadLedger(filepath.Join(dir, LedgerFile))
		if err != nil {
			t.Fatal(err)
		}
		return ld.ix.len()
	}
	if ledgerKeys() == 0 || midRun < 3 {
		t.Fatalf("only %d kills hit a run in progress: kill times do not test anything", midRun)
	}
	sum := runAll(t, dir, ModeResume, n, completeStage())
	t.Logf("final run: %+v", sum)
	checkWhole(t, dir, n)
}

func kill9Child(t *testing.T, dir string, n int) {
	opts := OutputOptions{Mode: ModeResume, Kind: "test", Format: os.Getenv(kill9FormatEnv), MaxShardRows: 5, CommitInterval: 5 * time.Millisecond}
	out, err := OpenOutput(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	progress := os.NewFile(3, "progress") // one byte per stage call for the parent
	stage := &funcStage{name: "slow", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		progress.Write([]byte{'.'})
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		complete(rec)
		if rand.IntN(5) == 0 {
			rec.Outcome, rec.Error = schemas.OutcomeAPIError, "HTTP 429"
		}
		return []*schemas.Record{rec}, nil
	}}
	recs := make([]*schemas.Record, n)
	for i := range recs {
		recs[i] = &schemas.Record{Key: fmt.Sprintf("k%05d", i), PromptIndex: i}
	}
	if _, err := Run(context.Background(), Options{Workers: 4}, SliceSource(recs), []Stage{stage}, out); err != nil {
		t.Fatal(err)
	}
}
