package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
	"github.com/hermes-pipe/hermes-pipe/stages/workspace"
)

// rewards returns each record's reward (nil when null) and whether its grade
// passed, by prompt index and sample.
func rewards(t *testing.T, out string) (map[string]any, map[string]any) {
	t.Helper()
	reward, passed := map[string]any{}, map[string]any{}
	for _, r := range catRecords(t, out) {
		k := fmt.Sprintf("%v/%v", r["prompt_index"], r["sample"])
		reward[k] = r["reward"]
		if g, ok := r["grade"].(map[string]any); ok {
			passed[k] = g["passed"]
		}
	}
	return reward, passed
}

// workspaceOf is a cat record's extra.workspace.
func workspaceOf(t *testing.T, r map[string]any) workspace.Info {
	t.Helper()
	extra, _ := r["extra"].(map[string]any)
	raw, err := json.Marshal(extra[workspace.Member])
	if err != nil {
		t.Fatal(err)
	}
	var info workspace.Info
	if err := json.Unmarshal(raw, &info); err != nil {
		t.Fatal(err)
	}
	return info
}

// TestRegradeWithAnotherVerifyCommand: generate --keep-workspace keeps each
// rollout's folder (the fake agent writes pass or fail into it); regrade with
// the rows' own verify, then with another --verify, changes the grades as
// the files dictate, answer rows are graded from the final message, and the
// endpoint sees no request from regrade.
func TestRegradeWithAnotherVerifyCommand(t *testing.T) {
	fs, url := startFakeServer(t, fakellm.Config{})
	prompts := writePrompts(t,
		`{"prompt": "work [[run=echo pass >result.txt]]", "verify": "grep -q pass result.txt"}`,
		`{"prompt": "work [[run=mkdir -p d && echo fail >d/../result.txt]]", "verify": "grep -q pass result.txt"}`,
		`{"prompt": "sum [[answer=42]]", "answer": "42"}`,
		`{"prompt": "sum [[answer=41]]", "answer": "42"}`,
		`{"prompt": "nothing to check"}`)
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none",
		"--samples", "2", "--toolsets", "terminal", "--keep-workspace")
	if code != 0 {
		t.Fatalf("generate exit %d: %s", code, errs)
	}
	recs := catRecords(t, out)
	if len(recs) != 10 {
		t.Fatalf("%d records", len(recs))
	}
	for _, r := range recs {
		if info := workspaceOf(t, r); !info.Kept() {
			t.Fatalf("record %v/%v: no workspace kept: %+v", r["prompt_index"], r["sample"], info)
		}
	}
	mustVerify(t, out)
	requests := fs.Stats().Requests

	code, _, errs = hp(t, "regrade", out)
	if code != 0 {
		t.Fatalf("regrade exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "10 records, 8 regraded (4 passed, 4 failed, 0 grader errors)") || !strings.Contains(errs, "2 with nothing to grade") {
		t.Fatalf("regrade summary: %s", errs)
	}
	reward, passed := rewards(t, out)
	want := map[string]any{"0/0": 1.0, "0/1": 1.0, "1/0": 0.0, "1/1": 0.0, "2/0": 1.0, "2/1": 1.0, "3/0": 0.0, "3/1": 0.0, "4/0": nil, "4/1": nil}
	for k, w := range want {
		if reward[k] != w {
			t.Errorf("%s: reward %v, want %v", k, reward[k], w)
		}
	}
	if passed["0/0"] != true || passed["1/0"] != false {
		t.Errorf("grade.passed: %v", passed)
	}

	// Another verify command for every row: the verdicts turn over for
	// the workspace rows; the answer rows, which kept no relevant file,
	// now fail (their folder has no result.txt).
	code, _, errs = hp(t, "regrade", out, "--verify", `grep -q fail result.txt && echo '{"reward": 0.5}'`)
	if code != 0 {
		t.Fatalf("regrade --verify exit %d: %s", code, errs)
	}
	reward, _ = rewards(t, out)
	want = map[string]any{"0/0": 0.0, "0/1": 0.0, "1/0": 0.5, "1/1": 0.5, "2/0": 0.0, "4/0": 0.0}
	for k, w := range want {
		if reward[k] != w {
			t.Errorf("after --verify: %s: reward %v, want %v", k, reward[k], w)
		}
	}
	// stats reads the same overlay (as export and report do: one reader).
	code, sout, errs := hp(t, "stats", "--json", out)
	if code != 0 {
		t.Fatalf("stats: %d %s", code, errs)
	}
	if !json.Valid([]byte(sout)) {
		t.Fatalf("stats --json: %s", sout)
	}
	// A grader that times out: reward null with the error, never 0.
	code, _, errs = hp(t, "regrade", out, "--verify", "sleep 30", "--grader-timeout", "1s", "--workers", "10")
	if code != 0 {
		t.Fatalf("regrade timeout exit %d: %s", code, errs)
	}
	for _, r := range catRecords(t, out) {
		g, _ := r["grade"].(map[string]any)
		if r["reward"] != nil || g == nil || !strings.Contains(fmt.Sprint(g["error"]), "timed out") {
			t.Fatalf("timed-out grader: reward %v grade %v", r["reward"], g)
		}
	}
	if got := fs.Stats().Requests; got != requests {
		t.Errorf("regrade made %d model requests", got-requests)
	}
	mustVerify(t, out)
}

// TestRegradeWithoutWorkspace: a run without --keep-workspace has nothing a
// cmd grader can restore: the records keep their grades and are counted;
// a damaged archive is refused with exit 3.
func TestRegradeWithoutWorkspaceOrDamaged(t *testing.T) {
	_, url := startFakeServer(t, fakellm.Config{})
	prompts := writePrompts(t, `{"prompt": "work [[run=echo pass >result.txt]]", "verify": "grep -q pass result.txt"}`)
	out := filepath.Join(t.TempDir(), "out")
	if code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none", "--toolsets", "terminal"); code != 0 {
		t.Fatalf("generate: %s", errs)
	}
	code, _, errs := hp(t, "regrade", out)
	if code != 0 || !strings.Contains(errs, "0 regraded") || !strings.Contains(errs, "1 without a kept workspace") {
		t.Fatalf("regrade without workspaces: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(out, outdir.GradesFile)); err == nil {
		t.Error("a grades journal was written with no grade")
	}
	// A run holding the folder: regrade waits for it, writing nothing.
	release, err := pipeline.LockFolder(out)
	if err != nil {
		t.Fatal(err)
	}
	code, _, errs = hp(t, "regrade", out)
	release()
	if code == 0 || !strings.Contains(errs, "in use") {
		t.Fatalf("regrade of a folder in use: exit %d: %s", code, errs)
	}

	out2 := filepath.Join(t.TempDir(), "out")
	if code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out2, "--base-url", url, "--model", "m", "--progress", "none", "--toolsets", "terminal", "--keep-workspace"); code != 0 {
		t.Fatalf("generate: %s", errs)
	}
	info := workspaceOf(t, catRecords(t, out2)[0])
	p := filepath.Join(out2, workspace.Dir, info.File)
	b, _ := os.ReadFile(p)
	b[len(b)-3] ^= 0xff
	os.WriteFile(p, b, 0o644)
	code, _, errs = hp(t, "regrade", out2)
	if code != exitRowsFailed || !strings.Contains(errs, "damaged") {
		t.Fatalf("damaged archive: exit %d: %s", code, errs)
	}
}

// TestKeepWorkspaceSurvivesKillNine kills a generate --keep-workspace run
// with SIGKILL at random moments, resuming after each: at the end every
// record names an archive that is whole (size and SHA-256 as recorded), no
// archive is left that no record names, no temp file is left, and regrade
// grades every record from its archive.
func TestKeepWorkspaceSurvivesKillNine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	fs, url := startFakeServer(t, fakellm.Config{Latency: 20 * time.Millisecond, Jitter: 30 * time.Millisecond})
	var lines []string
	for i := 0; i < 40; i++ {
		lines = append(lines, fmt.Sprintf(`{"prompt": "row %d [[run=head -c 20000 /dev/urandom >blob && echo %d >n.txt]]", "verify": "test -s blob && grep -qx %d n.txt"}`, i, i, i))
	}
	prompts := writePrompts(t, lines...)
	out := filepath.Join(t.TempDir(), "out")
	base := []string{"generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none",
		"--workers", "6", "--samples", "2", "--toolsets", "terminal", "--commit-interval", "100ms", "--shard-rows", "7", "--keep-workspace"}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 4; i++ {
		args := base
		if i > 0 {
			args = append(append([]string{}, base...), "--resume")
		}
		cmd := exec.Command(bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitRequests(t, fs, fs.Stats().Requests+int64(5+rng.IntN(30)), cmd)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	}
	if b, err := exec.Command(bin, append(base, "--resume")...).CombinedOutput(); err != nil {
		t.Fatalf("final resume: %v\n%s", err, b)
	}
	recs := catRecords(t, out)
	if len(recs) != 80 {
		t.Fatalf("%d records, want 80", len(recs))
	}
	named := map[string]bool{}
	for _, r := range recs {
		info := workspaceOf(t, r)
		if !info.Kept() || named[info.File] {
			t.Fatalf("record %v/%v: workspace %+v (twice: %v)", r["prompt_index"], r["sample"], info, named[info.File])
		}
		named[info.File] = true
		if _, err := workspace.Load(out, info, 0); err != nil {
			t.Fatalf("record %v/%v: %v", r["prompt_index"], r["sample"], err)
		}
	}
	ents, err := os.ReadDir(filepath.Join(out, workspace.Dir))
	if err != nil {
		t.Fatal(err)
	}
	var extra []string
	for _, e := range ents {
		if !named[e.Name()] {
			extra = append(extra, e.Name())
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 || len(ents) != 80 {
		t.Fatalf("%d files in workspaces/, not named by a record: %v", len(ents), extra)
	}
	mustVerify(t, out)
	requests := fs.Stats().Requests
	code, _, errs := hp(t, "regrade", out, "--workers", "4")
	if code != 0 || !strings.Contains(errs, "80 regraded (80 passed") {
		t.Fatalf("regrade after kills: exit %d: %s", code, errs)
	}
	if fs.Stats().Requests != requests {
		t.Error("regrade called the model")
	}
}

// TestSWERegradeLocal: `swe regrade` runs the tests again on the patches a
// local swe run stored, with no model request, and its verdicts (reward 1
// for resolved, 0 otherwise) are what cat shows; a patch changed in the
// tasks' favour is not possible to forge from outside, so the test changes
// a task's tests instead: with a test command that always fails, every
// patch graded gets reward 0.
func TestSWERegradeLocal(t *testing.T) {
	dir := requireLocalSuite(t)
	scripts, err := fakellm.LoadScripts(filepath.Join(sweSuite(), "fakellm-scripts.json"))
	if err != nil {
		t.Fatal(err)
	}
	fs, base := startFakeServer(t, fakellm.Config{Scripts: scripts})
	out := filepath.Join(t.TempDir(), "out")
	tasks := filepath.Join(dir, "tasks.jsonl")
	if code, stdout, errs := hpSWE(t, "swe", "--tasks", tasks, "--out", out, "--base-url", base, "--model", "fake",
		"--sandbox", "local", "--cwd-root", dir, "--progress", "none"); code != exitOK && code != exitGate {
		t.Fatalf("swe exit %d\n%s\n%s", code, stdout, errs)
	}
	requests := fs.Stats().Requests
	code, _, errs := hp(t, "swe", "regrade", out, "--cwd-root", dir, "--workers", "3")
	if code != 0 || !strings.Contains(errs, "9 records, 9 regraded (6 resolved, 3 not, 0 environment errors)") {
		t.Fatalf("swe regrade exit %d: %s", code, errs)
	}
	want := map[string]float64{"swe-mini__py-calc": 1, "swe-mini__py-slug": 1, "swe-mini__sh-wc": 1, "swe-mini__sh-rev": 1,
		"swe-mini__sh-upper": 1, "swe-mini__hello": 1, "swe-mini__py-fizz": 0, "swe-mini__sh-greet": 0, "swe-mini__py-median": 0}
	check := func(want map[string]float64) {
		t.Helper()
		for _, r := range catRecords(t, out) {
			id := fmt.Sprint(r["extra"].(map[string]any)["instance_id"])
			g, _ := r["grade"].(map[string]any)
			if r["reward"] != want[id] || g == nil || g["grader"] != "swe" {
				t.Errorf("%s: reward %v grade %v, want %v", id, r["reward"], g, want[id])
			}
		}
	}
	check(want)
	// The same patches against tests that always fail.
	b, err := os.ReadFile(tasks)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		m["test_cmd"] = "false"
		nb, _ := json.Marshal(m)
		lines = append(lines, string(nb))
	}
	failing := filepath.Join(dir, "failing.jsonl")
	if err := os.WriteFile(failing, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs = hp(t, "swe", "regrade", out, "--cwd-root", dir, "--tasks", failing)
	if code != 0 || !strings.Contains(errs, "9 regraded (0 resolved, 9 not") {
		t.Fatalf("swe regrade with failing tests: exit %d: %s", code, errs)
	}
	for id := range want {
		want[id] = 0
	}
	check(want)
	if fs.Stats().Requests != requests {
		t.Errorf("swe regrade made %d model requests", fs.Stats().Requests-requests)
	}
	mustVerify(t, out)
}

// TestRegradeLeavesUngradedOutcomes: a rollout generate does not grade (its
// deadline passed) is not graded by regrade either.
func TestRegradeLeavesUngradedOutcomes(t *testing.T) {
	_, url := startFakeServer(t, fakellm.Config{Latency: time.Second})
	prompts := writePrompts(t, `{"prompt": "work [[run=echo pass >result.txt]]", "verify": "true", "answer": "1"}`)
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none",
		"--toolsets", "terminal", "--keep-workspace", "--timeout", "200ms", "--max-retries", "0")
	if code != exitRowsFailed {
		t.Fatalf("generate exit %d, want 3 (a timed-out row): %s", code, errs)
	}
	if recs := catRecords(t, out); len(recs) != 1 || recs[0]["outcome"] != "timeout" {
		t.Fatalf("records: %v", recs)
	}
	code, _, errs = hp(t, "regrade", out, "--verify", "true")
	if code != 0 || !strings.Contains(errs, "0 regraded") || !strings.Contains(errs, "1 with an outcome that is not graded") {
		t.Fatalf("regrade: exit %d: %s", code, errs)
	}
	if r := catRecords(t, out)[0]; r["reward"] != nil {
		t.Fatalf("a timed-out rollout got reward %v", r["reward"])
	}
}
