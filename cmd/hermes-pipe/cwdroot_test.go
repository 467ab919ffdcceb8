package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
	"github.com/urfave/cli/v2"
)

// writeScript makes the fake model write made.txt in the shell's folder.
const writeScript = `{"scripts": [{"match": "^write$", "steps": [
  {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo made > made.txt && pwd"}}]},
  {"content": "wrote"}]}]}`

// cwdRows writes one row per cwd, each asking the model to write made.txt.
func cwdRows(t *testing.T, cwds ...string) string {
	t.Helper()
	var lines []string
	for _, cwd := range cwds {
		b, err := json.Marshal(map[string]string{"prompt": "write", "cwd": cwd})
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	return writePrompts(t, lines...)
}

// readRejects returns rejects.jsonl of out by line number.
func readRejects(t *testing.T, out string) map[int]struct{ Field, Reason string } {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(out, "rejects.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]struct{ Field, Reason string }{}
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var rj struct {
			Line          int
			Field, Reason string
		}
		if err := json.Unmarshal([]byte(l), &rj); err != nil {
			t.Fatal(err)
		}
		got[rj.Line] = struct{ Field, Reason string }{rj.Field, rj.Reason}
	}
	return got
}

// checkRejects compares the rejects of out with want (line: a piece of the
// reason); every one must name the field cwd.
func checkRejects(t *testing.T, out string, want map[int]string) {
	t.Helper()
	got := readRejects(t, out)
	var lines []int
	for line := range got {
		lines = append(lines, line)
	}
	slices.Sort(lines)
	var wantLines []int
	for line := range want {
		wantLines = append(wantLines, line)
	}
	slices.Sort(wantLines)
	if !slices.Equal(lines, wantLines) {
		t.Errorf("rejected lines %v, want %v: %v", lines, wantLines, got)
	}
	for line, piece := range want {
		rj := got[line]
		if rj.Field != "cwd" || !strings.Contains(rj.Reason, piece) {
			t.Errorf("line %d: field %q reason %q, want cwd and %q", line, rj.Field, rj.Reason, piece)
		}
	}
}

func needBash(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("bash is not installed; CI requires the local sandbox test: %v", err)
		}
		t.Skip("bash not installed")
	}
}

// realTempDir is t.TempDir through its links, as the rule reports paths.
func realTempDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRowCwdIsConfinedToCwdRoots: with the local sandbox, rows whose cwd is
// /root, /var, the output folder, its parent, the hermes-pipe home, a folder
// holding the viewer's cache or a link out of the root are rejects naming
// their line and saying what to do, and nothing is written there; a row
// whose cwd is under --cwd-root runs there and writes its file.
func TestRowCwdIsConfinedToCwdRoots(t *testing.T) {
	needBash(t)
	root := realTempDir(t)
	proj, runs, home, cache := filepath.Join(root, "proj"), filepath.Join(root, "runs"), filepath.Join(root, "home"), filepath.Join(root, "cache")
	for _, d := range []string{proj, runs, home, filepath.Join(cache, "hermes-pipe", "view")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/root", filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HERMES_PIPE_HOME", home)
	t.Setenv("XDG_CACHE_HOME", cache)
	out := filepath.Join(runs, "out")
	url := startFake(t, fakellm.Config{}, writeScript)
	prompts := cwdRows(t, "/root", "/var", out, runs, home, cache, filepath.Join(root, "escape"), proj)
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m",
		"--toolsets", "terminal", "--progress", "none", "--cwd-root", root)
	if code != exitRowsFailed {
		t.Fatalf("exit %d, want 3 (rejected rows): %s", code, errs)
	}
	checkRejects(t, out, map[int]string{
		1: "working folder refused: /root is not under a --cwd-root (" + root + "; give --cwd-root DIR to allow the folders under DIR)",
		2: "/var is not under a --cwd-root",
		3: out + " is the output folder",
		4: runs + " holds the output folder " + out,
		5: home + " is the hermes-pipe home",
		6: cache + " holds the viewer's cache",
		7: "escape (a link to /root) is not under a --cwd-root",
	})
	recs := catRecords(t, out)
	if len(recs) != 1 || recs[0]["outcome"] != "completed" {
		t.Fatalf("records = %v", recs)
	}
	if b, err := os.ReadFile(filepath.Join(proj, "made.txt")); err != nil || string(b) != "made\n" {
		t.Fatalf("the row under --cwd-root did not write its folder: %q, %v", b, err)
	}
	for _, d := range []string{"/root", "/var", out, runs, home, cache} {
		if _, err := os.Stat(filepath.Join(d, "made.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s/made.txt exists (%v)", d, err)
		}
	}
	mustVerify(t, out)
}

// TestRowCwdWithoutCwdRootIsRefused: by default no host folder may be a
// row's cwd; the reject says which flag allows one.
func TestRowCwdWithoutCwdRootIsRefused(t *testing.T) {
	dir := realTempDir(t)
	url := startFake(t, fakellm.Config{}, writeScript)
	out := filepath.Join(t.TempDir(), "out")
	const why = " is not under a --cwd-root (none given: give --cwd-root DIR to allow the folders under DIR)"
	code, _, errs := hp(t, "generate", "--prompts", cwdRows(t, dir), "--out", out, "--base-url", url, "--model", "m",
		"--toolsets", "terminal", "--progress", "none")
	// Its only row refused, nothing runs: exit 2 naming the row and why, no folder made.
	if code != exitUsage || !strings.Contains(errs, ":1: cwd: ") || !strings.Contains(errs, dir+why) {
		t.Fatalf("exit %d, want 2 naming line 1's cwd: %s", code, errs)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("output folder made (%v)", err)
	}
	// Beside a valid row, the run goes on and the row is rejected.
	rows, err := os.ReadFile(cwdRows(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	prompts := writePrompts(t, strings.TrimRight(string(rows), "\n"), `{"prompt": "a row without cwd"}`)
	code, _, errs = hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m",
		"--toolsets", "terminal", "--progress", "none")
	if code != exitRowsFailed {
		t.Fatalf("exit %d, want 3: %s", code, errs)
	}
	checkRejects(t, out, map[int]string{1: dir + why})
	if _, err := os.Stat(filepath.Join(dir, "made.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("made.txt written in the refused folder (%v)", err)
	}
}

// TestBadCwdRootIsAUsageError: a --cwd-root that is missing, or inside the
// output folder, is refused before the output folder is touched (even with
// --overwrite, which would otherwise delete it).
func TestBadCwdRootIsAUsageError(t *testing.T) {
	dir := realTempDir(t)
	out := filepath.Join(dir, "out")
	inside := filepath.Join(out, "work")
	if err := os.MkdirAll(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	prompts := writePrompts(t, `{"prompt": "write"}`)
	for root, want := range map[string]string{
		filepath.Join(dir, "missing"): "--cwd-root " + filepath.Join(dir, "missing") + ": no such folder",
		inside:                        "--cwd-root " + inside + ": inside the output folder " + out,
	} {
		code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--overwrite", "--base-url", "http://127.0.0.1:1/v1", "--model", "m",
			"--progress", "none", "--cwd-root", root)
		if code != exitUsage || !strings.Contains(errs, want) {
			t.Errorf("--cwd-root %s: exit %d, want 2 with %q: %s", root, code, want, errs)
		}
		if _, err := os.Stat(inside); err != nil {
			t.Fatalf("--out was touched: %v", err)
		}
	}
}

// cliContext parses args with cmd's flags, as the command would see them.
func cliContext(t *testing.T, cmd *cli.Command, args ...string) *cli.Context {
	t.Helper()
	set := flag.NewFlagSet(cmd.Name, flag.ContinueOnError)
	for _, f := range cmd.Flags {
		if err := f.Apply(set); err != nil {
			t.Fatal(err)
		}
	}
	if err := set.Parse(args); err != nil {
		t.Fatal(err)
	}
	return cli.NewContext(cli.NewApp(), set, nil)
}

// TestDockerCwdIsNotAHostFolder: with docker a row's cwd is a path inside
// the container, so no --cwd-root is asked for (the rule is not built).
func TestDockerCwdIsNotAHostFolder(t *testing.T) {
	for sandbox, refused := range map[string]bool{"docker": false, "local": true, "ssh": true} {
		c := cliContext(t, generateCommand(), "--sandbox", sandbox, "--out", filepath.Join(t.TempDir(), "o"))
		rule, err := cwdRule(c)
		if err != nil {
			t.Fatal(err)
		}
		if (rule != nil) != refused {
			t.Errorf("--sandbox %s: rule %v, want one: %v", sandbox, rule, refused)
		}
		if rule != nil && rule.Check("/root") == nil {
			t.Errorf("--sandbox %s: /root allowed without --cwd-root", sandbox)
		}
	}
}

// TestSWETaskCwdIsConfinedToCwdRoots: a tasks file is untrusted too: with
// --sandbox local a task whose cwd is not under --cwd-root makes the file a
// usage error naming the line and field, before any output folder exists.
func TestSWETaskCwdIsConfinedToCwdRoots(t *testing.T) {
	root := realTempDir(t)
	repo := filepath.Join(root, "repo")
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	tasks := filepath.Join(t.TempDir(), "tasks.jsonl")
	task := func(cwd string) string {
		return fmt.Sprintf(`{"task": "fix it", "test_cmd": "true", "cwd": %q}`, cwd)
	}
	if err := os.WriteFile(tasks, []byte(task(repo)+"\n"+task("/root")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hpSWE(t, "swe", "--tasks", tasks, "--out", out, "--base-url", "http://127.0.0.1:1/v1", "--model", "m",
		"--sandbox", "local", "--progress", "none", "--cwd-root", root)
	if code != exitUsage || !strings.Contains(errs, "line 2: cwd: working folder refused: /root ") ||
		strings.Contains(errs, "line 1") {
		t.Fatalf("exit %d, want 2 naming line 2 only: %s", code, errs)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("--out exists after refused tasks (%v)", err)
	}
}

// TestRowCwdOverSSHIsConfinedToCwdRoots: over ssh a row's cwd is a folder of
// the remote host (here the test sshd on loopback), bound read-write: only
// its path's form can be checked, so it must be under a --cwd-root (a remote
// path) with no "..", else it is a reject naming the line; a row under the
// root runs there.
func TestRowCwdOverSSHIsConfinedToCwdRoots(t *testing.T) {
	env := sshEnv(t)
	root := realTempDir(t)
	proj := filepath.Join(root, "proj")
	if err := os.Mkdir(proj, 0o777); err != nil {
		t.Fatal(err)
	}
	// The remote login is another user: let it reach and write proj.
	for _, d := range []string{proj, root, filepath.Dir(root)} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "out")
	url := startFake(t, fakellm.Config{}, writeScript)
	prompts := cwdRows(t, "/root", root+"/proj/../..", "/var/tmp", proj)
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m",
		"--sandbox", "ssh", "--ssh-host", env["HERMES_TEST_SSH_ADDR"], "--ssh-user", env["HERMES_TEST_SSH_USER"],
		"--ssh-key", env["HERMES_TEST_SSH_KEY"], "--ssh-known-hosts", env["HERMES_TEST_SSH_KNOWN_HOSTS"],
		"--toolsets", "terminal", "--progress", "none", "--cwd-root", root)
	if code != exitRowsFailed {
		t.Fatalf("exit %d, want 3 (rejected rows): %s", code, errs)
	}
	checkRejects(t, out, map[int]string{
		1: "working folder refused: /root is not under a --cwd-root (" + root + ";",
		2: `holds ".."`,
		3: "/var/tmp is not under a --cwd-root",
	})
	recs := catRecords(t, out)
	if len(recs) != 1 || recs[0]["outcome"] != "completed" {
		t.Fatalf("records = %v", recs)
	}
	if b, err := os.ReadFile(filepath.Join(proj, "made.txt")); err != nil || string(b) != "made\n" {
		t.Fatalf("the row under --cwd-root did not write its remote folder: %q, %v", b, err)
	}
	mustVerify(t, out)
}
