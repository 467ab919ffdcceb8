package swe

import (
	"context"
	"encoding/json"
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

// TestLocalDriverWorksOnClones runs a task with the local driver: the agent
// and the grader each work on a private clone of the task's checkout, which
// stays untouched.
func TestLocalDriverWorksOnClones(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("git is not installed; CI requires the local-driver test: %v", err)
		}
		t.Skip("git not installed")
	}
	repo := filepath.Join(t.TempDir(), "sh-wc")
	if out, err := exec.Command("cp", "-r", filepath.Join(suiteDir(), "repos", "sh-wc"), repo).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@localhost", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@localhost")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "base")
	head := git("rev-parse", "HEAD")

	all, err := ReadTasks(filepath.Join(suiteDir(), "tasks.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var line []byte
	for _, tk := range all {
		if tk.InstanceID == "swe-mini__sh-wc" {
			line, _ = json.Marshal(map[string]any{"instance_id": tk.InstanceID, "problem_statement": tk.ProblemStatement, "image": "none",
				"cwd": repo, "base_commit": head, "test_patch": tk.TestPatch, "test_cmd": tk.TestCmd, "FAIL_TO_PASS": tk.FailToPass, "PASS_TO_PASS": tk.PassToPass})
		}
	}
	tasks := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(tasks, append(line, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := local.New(sandbox.Config{Local: sandbox.LocalConfig{BaseDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	_, base := startFake(t)
	res, err := Run(context.Background(), Options{
		RunConfig: pipeline.RunConfig{Out: filepath.Join(t.TempDir(), "out"), Workers: 1, CommitInterval: 10 * time.Millisecond},
		Tasks:     TaskSource{File: tasks},
		Rollout:   rollout.Options{Client: client(t, base), Model: "fake", Driver: d},
		Grade:     GradeOptions{TestTimeout: time.Minute, Clone: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	in := res.Report.Instances["swe-mini__sh-wc"]
	if in.Outcome != string(OutcomeResolved) {
		t.Fatalf("outcome %s: %s\n%+v", in.Outcome, in.Reason, in.Grade)
	}
	if st := git("status", "--porcelain"); st != "" {
		t.Errorf("the task's checkout was modified:\n%s", st)
	}
}
