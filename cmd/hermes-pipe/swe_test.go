package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox/docker/dockertest"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// hpSWE runs the CLI in-process with the swe command present (also before
// main wires it into the app) and returns the exit code and output.
func hpSWE(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	app := newApp(&out, &errb)
	if app.Command("swe") == nil {
		c := sweCommand()
		setUsageHandler(c, "")
		app.Commands = append(app.Commands, c)
	}
	err := app.Run(append([]string{"hermes-pipe"}, args...))
	code := exitCode(err)
	var st *exitStatus
	if err != nil && (!errors.As(err, &st) || st.msg != "") {
		fmt.Fprintf(&errb, "hermes-pipe: %v\n", err)
	}
	return code, out.String(), errb.String()
}

func sweSuite() string { return filepath.Join("..", "..", "datasets", "swe-mini") }

// sweSuiteModel builds the sample suite's images (once, cached after) and
// starts its scripted fake model; it returns the model's base URL.
func sweSuiteModel(t *testing.T) string {
	t.Helper()
	dockertest.Require(t)
	if out, err := exec.Command(filepath.Join("..", "..", "scripts", "swe-images.sh")).CombinedOutput(); err != nil {
		t.Fatalf("swe-images.sh: %v\n%s", err, out)
	}
	scripts, err := fakellm.LoadScripts(filepath.Join(sweSuite(), "fakellm-scripts.json"))
	if err != nil {
		t.Fatal(err)
	}
	base := startFake(t, fakellm.Config{Scripts: scripts}, "")
	return base
}

func TestSWEUsageErrorsExit2(t *testing.T) {
	bad := writePrompts(t, `{"instance_id": "a", "problem_statement": "x"}`)
	tasks := filepath.Join(sweSuite(), "tasks.jsonl")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"bad task", []string{"--tasks", bad}, "test_cmd: missing"},
		{"no image", []string{"--task", "x", "--sandbox", "docker", "--default-image", ""}, "image: missing"},
		{"both", []string{"--tasks", tasks, "--task", "x"}, "not both"},
		{"neither", nil, "give --tasks FILE or --task TEXT"},
		{"empty task", []string{"--task", " "}, "--task is empty"},
		{"rate", []string{"--tasks", tasks, "--min-resolved", "1.5"}, "--min-resolved"},
		// --task: the suite's tasks name /testbed, refused as a local cwd first.
		{"baseline", []string{"--task", "x", "--baseline", filepath.Join(t.TempDir(), "none.json")}, "--baseline"},
		{"tasks file", []string{"--tasks", filepath.Join(t.TempDir(), "none.jsonl")}, "--tasks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"swe", "--out", filepath.Join(t.TempDir(), "o"), "--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--sandbox", "local"}, tc.args...)
			code, _, errs := hpSWE(t, args...)
			if code != exitUsage || !strings.Contains(errs, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 mentioning %q", code, errs, tc.want)
			}
		})
	}
}

// TestSWEExitCodes runs the sample suite through the CLI once, then judges
// the same folder under several gates: pass (0), gate failed (4), a
// regression against a baseline (4), and a gate an error could flip (1).
func TestSWEExitCodes(t *testing.T) {
	base := sweSuiteModel(t)
	out := filepath.Join(t.TempDir(), "out")
	common := []string{"swe", "--out", out, "--base-url", base, "--model", "fake", "--progress", "none", "--commit-interval", "50ms"}

	tasks := filepath.Join(sweSuite(), "tasks.jsonl")
	code, stdout, errs := hpSWE(t, append(common, "--tasks", tasks, "--min-resolved", "60%")...)
	if code != exitOK {
		t.Fatalf("first run: exit %d\n%s\n%s", code, stdout, errs)
	}
	for _, want := range []string{"resolved rate: 66.7% (6/9)", "gate: PASS", "swe-mini__sh-greet", "unresolved"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	t.Logf("summary:\n%s", stdout)
	if n := strings.Count(stdout, "\n"); n > 40 {
		t.Errorf("summary is %d lines, more than a screen", n)
	}

	code, stdout, _ = hpSWE(t, append(common, "--tasks", tasks, "--resume", "--min-resolved", "0.7")...)
	if code != exitGate || !strings.Contains(stdout, "gate: FAIL") {
		t.Errorf("min 0.7: exit %d, want 4\n%s", code, stdout)
	}

	baseline := filepath.Join(t.TempDir(), "baseline.json")
	if err := os.WriteFile(baseline, []byte(`{"resolved_ids": ["swe-mini__py-calc", "swe-mini__py-fizz"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, errs = hpSWE(t, append(common, "--tasks", tasks, "--resume", "--baseline", baseline)...)
	if code != exitGate || !strings.Contains(errs, "swe-mini__py-fizz") || strings.Contains(errs, "py-calc") {
		t.Errorf("baseline: exit %d, want 4 naming py-fizz only\n%s\n%s", code, stdout, errs)
	}

	// A task whose image is missing: 6 of 10 resolved, at best 7 of 10.
	data, err := os.ReadFile(tasks)
	if err != nil {
		t.Fatal(err)
	}
	more := filepath.Join(t.TempDir(), "tasks.jsonl")
	data = append(data, `{"id": "swe-mini__missing", "task": "never built", "image": "hermes-pipe-swe/never-built:latest", "test_cmd": "true"}`+"\n"...)
	if err := os.WriteFile(more, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		min  string
		code int
	}{{"0.6", exitOK}, {"0.7", exitFatal}, {"0.8", exitGate}} {
		// Another tasks file than the run's is a change of a recorded option.
		code, stdout, errs := hpSWE(t, append(common, "--tasks", more, "--resume", "--allow-change", "--min-resolved", tc.min)...)
		if code != tc.code {
			t.Errorf("missing image, min %s: exit %d, want %d\n%s\n%s", tc.min, code, tc.code, stdout, errs)
		}
		if !strings.Contains(errs, "never-built") {
			t.Errorf("missing image, min %s: stderr does not name the image:\n%s", tc.min, errs)
		}
	}
}

// `swe --task` runs one task from the command line, with no image under the
// local sandbox, and keeps the text after the sentinel as the final result.
func TestSWEOneTaskFromTheCommandLine(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	sp := filepath.Join(t.TempDir(), "scripts.json")
	script := `{"scripts": [{"name": "hello", "match": "^Create hello.py", "steps": [
 {"tool_calls": [{"name": "terminal", "arguments": {"command": "printf 'print(1)\\n' > hello.py"}}]},
 {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo MINI_SWE_AGENT_FINAL_OUTPUT; echo created hello.py"}}]}]}]}`
	if err := os.WriteFile(sp, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	scripts, err := fakellm.LoadScripts(sp)
	if err != nil {
		t.Fatal(err)
	}
	base := startFake(t, fakellm.Config{Scripts: scripts}, "")
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, errs := hpSWE(t, "swe", "--task", "Create hello.py that prints 1", "--out", out, "--base-url", base, "--model", "fake",
		"--sandbox", "local", "--progress", "none")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, errs)
	}
	var cat bytes.Buffer
	app := newApp(&cat, &bytes.Buffer{})
	if err := app.Run([]string{"hermes-pipe", "cat", out}); err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Outcome string `json:"outcome"`
		Extra   struct {
			Final string `json:"final_result"`
			Patch string `json:"model_patch"`
		} `json:"extra"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(cat.Bytes()), &rec); err != nil {
		t.Fatalf("%v: %s", err, cat.String())
	}
	if rec.Outcome != "resolved" || rec.Extra.Final != "created hello.py" || !strings.Contains(rec.Extra.Patch, "+print(1)") {
		t.Errorf("record %+v", rec)
	}
}
