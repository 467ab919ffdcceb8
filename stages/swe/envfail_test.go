package swe

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/local"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout"
)

// TestLocalEnvironmentFailuresAreErrors runs tasks whose environment is
// wrong with the confined local driver (with a memory ceiling, as the CLI
// sets one: on cgroup v1 the sandbox then joins its group late, the path
// where a missing repository once ended as "the sandbox did not start:
// EOF"). Each must end error (sandbox_error, retried by --resume) with a
// reason naming the cause, never unresolved: the repository folder gone
// (the driver refuses to open a session that would mount it), a folder
// that is not a git checkout, a test script that is not in the
// repository, a test program not installed, and the suite's simple task
// without a cwd (an empty folder: its test.sh is missing). Beside them the
// same repository graded normally is resolved, and a simple task whose
// text asks for the script its test runs, which the agent never writes,
// is unresolved: the agent's failure.
func TestLocalEnvironmentFailuresAreErrors(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("git is not installed; CI requires the local environment-failure test: %v", err)
		}
		t.Skip("git not installed")
	}
	d, err := local.New(sandbox.Config{Local: sandbox.LocalConfig{BaseDir: t.TempDir(), Limits: sandbox.LocalLimits{MemoryBytes: 1 << 30, CPUWeight: 100}}})
	if err == nil && !d.Confined() {
		err = errors.New("the driver runs unconfined")
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI requires the confined local sandbox (bubblewrap): %v", err)
		}
		t.Skipf("the confined local sandbox (bubblewrap) is unavailable: %v", err)
	}
	wc := suiteTask(t, "swe-mini__sh-wc")
	repo := suiteCheckout(t, "sh-wc", wc.BaseCommit)
	plain := filepath.Join(t.TempDir(), "plain")
	if err := os.MkdirAll(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	var lines []byte
	add := func(v map[string]any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(append(lines, b...), '\n')
	}
	swe := func(id, cwd, cmd string) {
		add(map[string]any{"instance_id": id, "problem_statement": wc.ProblemStatement, "image": "none", "cwd": cwd,
			"base_commit": wc.BaseCommit, "test_patch": wc.TestPatch, "test_cmd": cmd, "FAIL_TO_PASS": wc.FailToPass, "PASS_TO_PASS": wc.PassToPass})
	}
	gone := filepath.Join(t.TempDir(), "gone")
	swe("ok", repo, wc.TestCmd)
	swe("gone", gone, wc.TestCmd)
	swe("plain", plain, wc.TestCmd)
	swe("no-script", repo, "sh tests/nothere.sh")
	swe("no-program", repo, "no-such-runner-xyz tests/run.sh")
	hello := suiteTask(t, "swe-mini__hello")
	add(map[string]any{"id": "hello", "task": hello.ProblemStatement, "test_cmd": hello.TestCmd})
	add(map[string]any{"id": "asked", "task": hello.ProblemStatement + " Then write bye.sh, which prints bye.", "test_cmd": "sh bye.sh"})
	tasks := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(tasks, lines, 0o600); err != nil {
		t.Fatal(err)
	}
	_, base := startFake(t)
	res, err := Run(context.Background(), Options{
		RunConfig: pipeline.RunConfig{Out: filepath.Join(t.TempDir(), "out"), Workers: 2, CommitInterval: 10 * time.Millisecond},
		Tasks:     TaskSource{File: tasks},
		Rollout:   rollout.Options{Client: client(t, base), Model: "fake", Driver: d, CommandTimeout: 30 * time.Second},
		Grade:     GradeOptions{TestTimeout: time.Minute, Clone: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string][]string{
		"ok":         {string(OutcomeResolved)},
		"asked":      {string(OutcomeUnresolved), "the test command exited"},
		"gone":       {CatError, "folder to read " + gone + " does not exist"},
		"plain":      {CatError, plain + " is not a git checkout"},
		"no-script":  {CatError, "the test command cannot run: it runs tests/nothere.sh, which is neither in the task's repository"},
		"no-program": {CatError, "its program no-such-runner-xyz is not installed in the sandbox"},
		"hello":      {CatError, "it runs test.sh", "the task names no cwd, so it started from an empty folder"},
	} {
		in, ok := res.Report.Instances[id]
		if !ok {
			t.Errorf("%s: not in the report", id)
			continue
		}
		if in.Outcome != want[0] {
			t.Errorf("%s: outcome %s (%s): %s; want %s", id, in.Outcome, in.Record, in.Reason, want[0])
			continue
		}
		if in.Outcome == CatError && in.Record != "sandbox_error" {
			t.Errorf("%s: record outcome %s, want sandbox_error (retried by --resume)", id, in.Record)
		}
		for _, w := range want[1:] {
			if !strings.Contains(in.Reason, w) {
				t.Errorf("%s: reason %q lacks %q", id, in.Reason, w)
			}
		}
	}
}

// suiteTask is the sample suite's task id.
func suiteTask(t *testing.T, id string) Task {
	t.Helper()
	all, err := ReadTasks(filepath.Join(suiteDir(), "tasks.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range all {
		if tk.InstanceID == id {
			return tk
		}
	}
	t.Fatalf("no task %s in the sample suite", id)
	return Task{}
}

// suiteCheckout commits the sample suite's repository name into a git
// checkout with scripts/swe-base-commit.sh, as scripts/swe-repos.sh does,
// and checks its head is base, the task's base commit.
func suiteCheckout(t *testing.T, name, base string) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("cp", "-r", filepath.Join(suiteDir(), "repos", name), repo).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	cmd := exec.Command("sh", "-e", filepath.Join(suiteDir(), "..", "..", "scripts", "swe-base-commit.sh"))
	cmd.Dir = repo
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("swe-base-commit.sh: %v", err)
	}
	if head := strings.TrimSpace(string(out)); head != base {
		t.Fatalf("%s: base commit %s, tasks.jsonl says %s", name, head, base)
	}
	return repo
}
