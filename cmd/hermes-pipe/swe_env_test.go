package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox/docker/dockertest"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// sweEnvRun runs `swe --tasks` over one task line with no --sandbox (plus
// extra flags) against a model that submits at once; it returns the exit
// code, stderr and the output folder.
func sweEnvRun(t *testing.T, line string, extra ...string) (int, string, string) {
	t.Helper()
	sp := filepath.Join(t.TempDir(), "scripts.json")
	script := `{"scripts": [{"name": "hello", "steps": [
 {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo hi > hello.txt; echo MINI_SWE_AGENT_FINAL_OUTPUT; echo done"}}]}]}]}`
	if err := os.WriteFile(sp, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	scripts, err := fakellm.LoadScripts(sp)
	if err != nil {
		t.Fatal(err)
	}
	base := startFake(t, fakellm.Config{Scripts: scripts}, "")
	tasks := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(tasks, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	args := append([]string{"swe", "--tasks", tasks, "--out", out, "--base-url", base, "--model", "fake", "--progress", "none"}, extra...)
	code, stdout, errs := hpSWE(t, args...)
	return code, stdout + errs, out
}

// recordedSandbox is the --sandbox run.json records for the run.
func recordedSandbox(t *testing.T, out string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Options map[string]any `json:"options"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	s, _ := m.Options["sandbox"].(string)
	return s
}

// Hermes' task form {"task", "env": "local"} runs under `swe --tasks` in
// the local sandbox (the tasks choose it when --sandbox is not given); a
// backend the run has not configured, or one hermes-pipe lacks, is exit 2
// naming file, line and field.
func TestSWETaskEnvLocal(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	code, msg, out := sweEnvRun(t, `{"task": "Create hello.txt", "env": "local"}`)
	if code != 0 || recordedSandbox(t, out) != "local" {
		t.Fatalf("exit %d, sandbox %q\n%s", code, recordedSandbox(t, out), msg)
	}
	if recs := catRecords(t, out); len(recs) != 1 || recs[0]["outcome"] != "resolved" {
		t.Fatalf("records %v\n%s", recs, msg)
	}
	code, msg, out = sweEnvRun(t, `{"task": "Create hello.txt", "env": "docker", "image": "python:3.11-slim"}`, "--sandbox", "local")
	if code != 2 || !strings.Contains(msg, "tasks.jsonl") || !strings.Contains(msg, "line 1: env: asks for the docker backend, but this run's sandbox is local") {
		t.Fatalf("docker task under --sandbox local: exit %d\n%s", code, msg)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused tasks file left an output folder: %v", err)
	}
	code, msg, _ = sweEnvRun(t, `{"task": "Create hello.txt", "env": "modal", "image": "python:3.11-slim"}`)
	if code != 2 || !strings.Contains(msg, `line 1: env: "modal" is not a backend hermes-pipe runs`) {
		t.Fatalf("modal: exit %d\n%s", code, msg)
	}
}

// Hermes' seed line {"task", "env": "docker", "image": "python:3.11-slim"}
// runs in a container of the task's image, chosen by the task (no
// --sandbox). Nothing is pulled: when the daemon has no python:3.11-slim,
// the bash test image (like the real one: a shell, no git) is tagged so.
func TestSWETaskEnvDocker(t *testing.T) {
	dockertest.Require(t)
	const image = "python:3.11-slim"
	if exec.Command("docker", "image", "inspect", image).Run() != nil {
		if out, err := exec.Command("docker", "tag", dockertest.BashImage(), image).CombinedOutput(); err != nil {
			t.Fatalf("docker tag %s %s: %v\n%s", dockertest.BashImage(), image, err, out)
		}
	}
	code, msg, out := sweEnvRun(t, `{"task": "Create hello.txt", "env": "docker", "image": "python:3.11-slim"}`)
	if code != 0 || recordedSandbox(t, out) != "docker" || !strings.Contains(msg, "--sandbox docker") {
		t.Fatalf("exit %d, sandbox %q\n%s", code, recordedSandbox(t, out), msg)
	}
	recs := catRecords(t, out)
	if len(recs) != 1 || recs[0]["outcome"] != "resolved" {
		t.Fatalf("records %v\n%s", recs, msg)
	}
}
