package swe

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/docker"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout"
)

// helperEnv makes the test binary run one SWE run (helperMain) instead of
// the tests, so a test can kill a real run with SIGKILL.
const helperEnv = "HERMES_SWE_HELPER"

// killRunID labels the killed run's containers; it is unique per test
// process, so runs of this package beside each other on one daemon never
// collect each other's containers.
var killRunID = fmt.Sprintf("swe-kill-%d", os.Getpid())

// helperMain runs the tasks file $HERMES_SWE_TASKS into $HERMES_SWE_OUT
// against the model at $HERMES_SWE_BASE, resuming when the folder holds a
// run.
func helperMain() int {
	runID := os.Getenv("HERMES_SWE_RUNID")
	d, err := docker.New(sandbox.Config{RunID: runID})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := llm.New(llm.Options{BaseURL: os.Getenv("HERMES_SWE_BASE"), Model: "fake"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_, err = Run(context.Background(), Options{
		RunConfig:   pipeline.RunConfig{Out: os.Getenv("HERMES_SWE_OUT"), Mode: pipeline.ModeResume, Workers: 2, CommitInterval: 10 * time.Millisecond},
		Tasks:       TaskSource{File: os.Getenv("HERMES_SWE_TASKS")},
		Rollout:     rollout.Options{Client: c, Model: "fake", Driver: d, RunID: runID},
		Grade:       GradeOptions{TestTimeout: time.Minute},
		CheckImages: d.CheckImages,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// ledgerRows returns the (key, outcome) rows of an output folder's ledger.
func ledgerRows(t *testing.T, dir string) [][2]string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, pipeline.LedgerFile))
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		t.Fatal(err)
	}
	defer f.Close()
	var rows [][2]string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var l struct {
			Rows [][]any `json:"rows"` // [key, outcome, prompt_index, sample, len]
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue // a torn last line
		}
		for _, r := range l.Rows {
			k, _ := r[0].(string)
			o, _ := r[1].(string)
			rows = append(rows, [2]string{k, o})
		}
	}
	return rows
}

// TestKillNineThenResume kills a real SWE run with SIGKILL once some tasks
// are committed, resumes it, and checks that no task was graded twice (one
// final ledger row per key) and none was lost (every task final in the
// report).
func TestKillNineThenResume(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	d := requireSuite(t)
	scripts, err := fakellm.LoadScripts(filepath.Join(suiteDir(), "fakellm-scripts.json"))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(fakellm.New(fakellm.Config{Scripts: scripts, Latency: 150 * time.Millisecond}))
	defer hs.Close()
	tasks := filepath.Join(suiteDir(), "tasks.jsonl")
	out := filepath.Join(t.TempDir(), "out")

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "HERMES_SWE_TASKS="+tasks, "HERMES_SWE_OUT="+out, "HERMES_SWE_BASE="+hs.URL+"/v1", "HERMES_SWE_RUNID="+killRunID)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(5 * time.Minute)
	committed := 0
wait:
	for {
		select {
		case err := <-exited:
			t.Fatalf("the run ended before it was killed (%v): %s", err, stderr.String())
		case <-deadline:
			break wait
		case <-time.After(20 * time.Millisecond):
		}
		final := 0
		for _, r := range ledgerRows(t, out) {
			if Category(schemas.Outcome(r[1])) != CatError {
				final++
			}
		}
		if final >= 2 {
			committed = final
			break
		}
	}
	if committed == 0 {
		t.Fatal("no task was committed within 5 minutes")
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
	before := ledgerRows(t, out)
	if len(before) >= 9 {
		t.Fatalf("all %d tasks were done before the kill: the test proves nothing", len(before))
	}
	// What the killed run left running is collected by run id.
	if _, err := d.GC(context.Background(), killRunID); err != nil {
		t.Fatal(err)
	}

	fake, base := startFake(t)
	o := runOptions(t, d, base, tasks, out)
	o.Mode = pipeline.ModeResume
	// No end-of-run merge of the small shards: its ledger lines re-point
	// records already graded, which the count of final rows below would take
	// for a second grading (the merge has tests of its own).
	o.KeepShards = true
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	finals := map[string]int{}
	for _, r := range ledgerRows(t, out) {
		if Category(schemas.Outcome(r[1])) != CatError {
			finals[r[0]]++
		}
	}
	for k, n := range finals {
		if n != 1 {
			t.Errorf("task %s has %d final ledger rows: graded twice", k, n)
		}
	}
	if r := res.Report; r.Pending != 0 || r.Errors != 0 || r.Resolved != len(wantResolved) {
		t.Errorf("after resume: resolved %d, errors %v, pending %v", r.Resolved, r.ErrorIDs, r.PendingIDs)
	}
	if res.Summary.Skipped < committed {
		t.Errorf("resume skipped %d tasks, want at least the %d committed before the kill", res.Summary.Skipped, committed)
	}
	// The resumed run asked the model only about the tasks it ran.
	if st := fake.Stats(); st.Requests == 0 || res.Summary.Processed != 9-res.Summary.Skipped {
		t.Errorf("resume: %d requests, processed %d, skipped %d", st.Requests, res.Summary.Processed, res.Summary.Skipped)
	}
	mustVerify(t, out)
}
