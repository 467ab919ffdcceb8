package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
	"github.com/hermes-pipe/hermes-pipe/stages/swe"
)

// requireLocalSuite skips (fails under CI, where the tools must be
// present) unless this machine has what README's sample suite with
// --sandbox local needs: bash and git to prepare the checkouts, python3 to
// write the tasks file, confinement (bubblewrap), and git and python3 in
// the system folders the confined sandbox shows (a python3 of your home,
// such as pyenv's, is hidden there). It prepares the suite with
// scripts/swe-repos.sh and returns its folder.
func requireLocalSuite(t *testing.T) string {
	t.Helper()
	lack := func(format string, a ...any) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf("CI requires the local sample suite: "+format, a...)
		}
		t.Skipf(format, a...)
	}
	for _, p := range []string{"bash", "git", "python3"} {
		if _, err := exec.LookPath(p); err != nil {
			lack("the local sample suite needs %s: %v", p, err)
		}
	}
	for _, p := range []string{"git", "python3"} {
		if !inSystemFolders(p) {
			lack("the local sample suite needs %s in /usr/bin, /usr/local/bin or /bin (the confined sandbox hides your home)", p)
		}
	}
	if err := confine.Check(context.Background()); err != nil {
		lack("the local sample suite needs bubblewrap confinement: %v", err)
	}
	dir := t.TempDir()
	if out, err := exec.Command(filepath.Join("..", "..", "scripts", "swe-repos.sh"), dir).CombinedOutput(); err != nil {
		t.Fatalf("swe-repos.sh: %v\n%s", err, out)
	}
	return dir
}

func inSystemFolders(name string) bool {
	for _, d := range []string{"/usr/bin", "/usr/local/bin", "/bin"} {
		if fi, err := os.Stat(filepath.Join(d, name)); err == nil && fi.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}

// TestSWESampleSuiteLocal runs README's sample suite with --sandbox local
// (checkouts from scripts/swe-repos.sh): every task ends as with docker
// (6 of 9 resolved, the gate at 0.6 passes) and the closing summary on
// stderr gives this run's tasks by category and the run's block.
func TestSWESampleSuiteLocal(t *testing.T) {
	dir := requireLocalSuite(t)
	scripts, err := fakellm.LoadScripts(filepath.Join(sweSuite(), "fakellm-scripts.json"))
	if err != nil {
		t.Fatal(err)
	}
	base := startFake(t, fakellm.Config{Scripts: scripts}, "")
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, errs := hpSWE(t, "swe", "--tasks", filepath.Join(dir, "tasks.jsonl"), "--out", out, "--base-url", base, "--model", "fake",
		"--sandbox", "local", "--cwd-root", dir, "--min-resolved", "0.6", "--progress", "none")
	if code != exitOK {
		t.Fatalf("exit %d, want 0\n%s\n%s", code, stdout, errs)
	}
	rep, _, err := swe.LoadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"swe-mini__py-calc": "resolved", "swe-mini__py-slug": "resolved", "swe-mini__sh-wc": "resolved",
		"swe-mini__sh-rev": "resolved", "swe-mini__sh-upper": "resolved", "swe-mini__hello": "resolved",
		"swe-mini__py-fizz": "unresolved", "swe-mini__sh-greet": "unresolved", "swe-mini__py-median": "empty_patch",
	}
	if len(rep.Instances) != len(want) {
		t.Errorf("%d instances in the report, want %d", len(rep.Instances), len(want))
	}
	for id, w := range want {
		in, ok := rep.Instances[id]
		switch {
		case !ok:
			t.Errorf("%s: not in the report", id)
		case in.Outcome != w:
			t.Errorf("%s: %s (%s), want %s", id, in.Outcome, in.Reason, w)
		}
	}
	if in := rep.Instances["swe-mini__py-fizz"]; in != nil && !strings.Contains(in.Reason, "FAIL_TO_PASS") {
		t.Errorf("py-fizz: reason %q, want the failing FAIL_TO_PASS test", in.Reason)
	}
	if in := rep.Instances["swe-mini__sh-greet"]; in != nil && !strings.Contains(in.Reason, "PASS_TO_PASS") {
		t.Errorf("sh-greet: reason %q, want the failing PASS_TO_PASS test", in.Reason)
	}
	if !strings.Contains(stdout, "resolved rate: 66.7% (6/9)") || !strings.Contains(stdout, "gate: PASS") {
		t.Errorf("stdout summary:\n%s", stdout)
	}
	for _, w := range []string{
		out + ": 9 run (6 resolved, 2 unresolved, 1 empty_patch, 0 error), 0 already done, in ",
		"\n  outcomes: 6 resolved, 2 unresolved, 1 empty_patch\n",
		"\n  tokens: ",
		"\n  retries: none\n",
	} {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errs)
		}
	}
	if strings.Contains(errs, "failed rows:") {
		t.Errorf("stderr names failed rows, but none failed:\n%s", errs)
	}
	mustVerify(t, out)
}

// TestSWELocalEnvironmentErrors: through the CLI, tasks whose environment
// is wrong under --sandbox local end error, never unresolved: the suite's
// simple task without a cwd (its test.sh is not in the empty folder it
// starts from) and a task whose cwd is not a git checkout. The gate cannot
// be judged (exit 1) and the closing summary counts them as errors, lists
// their messages and says where the failed rows are.
func TestSWELocalEnvironmentErrors(t *testing.T) {
	dir := requireLocalSuite(t)
	var lines []string
	data, err := os.ReadFile(filepath.Join(sweSuite(), "tasks.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.MkdirAll(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatal(err)
		}
		switch {
		case v["id"] == "swe-mini__hello":
			delete(v, "cwd") // as in the suite's own tasks file
		case v["instance_id"] == "swe-mini__sh-wc":
			v["cwd"] = plain
		default:
			continue
		}
		b, _ := json.Marshal(v)
		lines = append(lines, string(b))
	}
	tasks := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(tasks, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	scripts, err := fakellm.LoadScripts(filepath.Join(sweSuite(), "fakellm-scripts.json"))
	if err != nil {
		t.Fatal(err)
	}
	base := startFake(t, fakellm.Config{Scripts: scripts}, "")
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, errs := hpSWE(t, "swe", "--tasks", tasks, "--out", out, "--base-url", base, "--model", "fake",
		"--sandbox", "local", "--cwd-root", dir, "--min-resolved", "0.5", "--progress", "none")
	if code != exitFatal || !strings.Contains(errs, "gate cannot be judged") {
		t.Fatalf("exit %d, want 1 (errors keep the gate from being judged)\n%s\n%s", code, stdout, errs)
	}
	rep, _, err := swe.LoadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	for id, w := range map[string]string{
		"swe-mini__hello": "the test command cannot run: it runs test.sh",
		"swe-mini__sh-wc": plain + " is not a git checkout",
	} {
		in := rep.Instances[id]
		if in == nil || in.Outcome != swe.CatError || !strings.Contains(in.Reason, w) {
			t.Errorf("%s: %+v, want error saying %q", id, in, w)
		}
	}
	for _, w := range []string{
		out + ": 2 run (0 resolved, 0 unresolved, 0 empty_patch, 2 error), 0 already done, in ",
		"\n  outcomes: 2 sandbox_error\n",
		"\n  top errors:\n    1× ",
		"is not a git checkout",
		"\n  failed rows: 2 in " + out + "/failed/",
	} {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errs)
		}
	}
}

// TestSWESampleSuiteLocalNeedsCheckouts: the suite's own tasks file with
// --sandbox local is refused before anything is made (exit 2): its cwds
// name /testbed, a folder of the task images. The error names the lines
// and says how to prepare checkouts (scripts/swe-repos.sh).
func TestSWESampleSuiteLocalNeedsCheckouts(t *testing.T) {
	if _, err := os.Stat("/testbed"); err == nil {
		t.Skip("this machine has a /testbed")
	}
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, errs := hpSWE(t, "swe", "--tasks", filepath.Join(sweSuite(), "tasks.jsonl"), "--out", out,
		"--base-url", "http://127.0.0.1:9/v1", "--model", "fake", "--sandbox", "local", "--cwd-root", t.TempDir(), "--progress", "none")
	if code != exitUsage {
		t.Fatalf("exit %d, want 2\n%s\n%s", code, stdout, errs)
	}
	for _, w := range []string{"line 1: cwd: working folder unavailable: /testbed", "scripts/swe-repos.sh DIR", "--cwd-root DIR"} {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errs)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused tasks file made %s", out)
	}
}
