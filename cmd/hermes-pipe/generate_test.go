package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// startFake serves fakellm on loopback and returns its /v1 URL.
func startFake(t *testing.T, cfg fakellm.Config, scriptJSON string) string {
	t.Helper()
	if scriptJSON != "" {
		s, err := fakellm.ParseScripts([]byte(scriptJSON))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Scripts = s
	}
	srv := httptest.NewServer(fakellm.New(cfg))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// hp runs the CLI in-process and returns the exit code and output.
func hp(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"hermes-pipe"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func writePrompts(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "prompts.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func catRecords(t *testing.T, dir string) []map[string]any {
	t.Helper()
	code, out, errs := hp(t, "cat", dir)
	if code != 0 {
		t.Fatalf("cat exit %d: %s", code, errs)
	}
	var recs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("cat line: %v", err)
		}
		recs = append(recs, m)
	}
	return recs
}

func mustVerify(t *testing.T, dir string) {
	t.Helper()
	if code, out, errs := hp(t, "verify", dir); code != 0 {
		t.Fatalf("verify exit %d:\n%s%s", code, out, errs)
	}
}

const echoScript = `{"scripts": [{"match": "^echo (.*)$", "steps": [
  {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo {{m1}}"}}]},
  {"content": "printed {{m1}}"}]}]}`

func TestGenerateWritesRecordsRejectsAndExitCodes(t *testing.T) {
	url := startFake(t, fakellm.Config{}, echoScript)
	prompts := writePrompts(t,
		`{"prompt": "echo one", "metadata": {"src": "a"}}`,
		`{"prompt": 7}`,
		`not json`,
		`{"prompt": "echo two"}`,
		`{"prompt": "echo two"}`)
	out := filepath.Join(t.TempDir(), "out")
	before := time.Now().UTC().Truncate(time.Microsecond)
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none", "--samples", "2",
		"--batch_size", "2") // Hermes' spelling
	if code != exitRowsFailed {
		t.Fatalf("exit %d, want 3 (rejected rows): %s", code, errs)
	}
	after := time.Now().UTC()
	recs := catRecords(t, out)
	if len(recs) != 6 {
		t.Fatalf("got %d records, want 3 rows × 2 samples", len(recs))
	}
	keys := map[string]bool{}
	for i, r := range recs {
		if r["outcome"] != "completed" {
			t.Errorf("record %d outcome %v: %v", i, r["outcome"], r["error"])
		}
		keys[r["key"].(string)] = true
	}
	if len(keys) != 6 {
		t.Errorf("keys not distinct: %v", keys)
	}
	// (prompt_index, sample) order.
	if recs[0]["prompt_index"].(float64) != 0 || recs[1]["sample"].(float64) != 1 || recs[2]["prompt_index"].(float64) != 3 {
		t.Errorf("order: %v %v %v", recs[0]["prompt_index"], recs[1]["sample"], recs[2]["prompt_index"])
	}
	// Hermes' batch_runner members: success, and metadata's batch_num
	// (prompt_index / --batch-size), timestamp and model before the row's
	// own metadata.
	for i, r := range recs {
		md, _ := r["metadata"].(map[string]any)
		ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(md["timestamp"]))
		if r["success"] != true || md["batch_num"] != float64(int(r["prompt_index"].(float64))/2) ||
			md["model"] != "m" || err != nil || ts.Before(before) || ts.After(after) {
			t.Errorf("record %d: success %v, metadata %v (%v)", i, r["success"], md, err)
		}
	}
	if md := recs[0]["metadata"].(map[string]any); md["src"] != "a" || len(md) != 4 {
		t.Errorf("the row's metadata: %v", md)
	}
	if md := recs[2]["metadata"].(map[string]any); recs[2]["prompt_index"] != 3.0 || md["batch_num"] != 1.0 {
		t.Errorf("prompt 3 with --batch-size 2: metadata %v", md)
	}
	rj, err := os.ReadFile(filepath.Join(out, "rejects.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(rj), "\n"); n != 2 || !strings.Contains(string(rj), `"line":2`) || !strings.Contains(string(rj), `"field":"prompt"`) || !strings.Contains(string(rj), `"raw":"not json"`) {
		t.Errorf("rejects.jsonl:\n%s", rj)
	}
	mustVerify(t, out)

	// A second run without --resume/--overwrite is refused before any work.
	if code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m"); code != exitUsage || !strings.Contains(errs, "--resume") {
		t.Fatalf("non-empty out: exit %d: %s", code, errs)
	}
	// --resume has nothing left to do but the rejects keep the exit code 3.
	code, _, errs = hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none", "--samples", "2", "--resume")
	if code != exitRowsFailed || !strings.Contains(errs, "6 already done") {
		t.Fatalf("resume: exit %d: %s", code, errs)
	}
	if n := len(catRecords(t, out)); n != 6 {
		t.Fatalf("resume duplicated or lost records: %d", n)
	}
	st, err := pipeline.Stats(out)
	if err != nil || st.Records != 6 || st.Tools["terminal"].Count != 6 {
		t.Fatalf("stats = %+v, %v", st, err)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	prompts := writePrompts(t, `{"prompt": "x"}`)
	for _, args := range [][]string{
		{"generate", "--prompts", prompts, "--out", t.TempDir() + "/o", "--model", "m"}, // missing --base-url
		{"generate", "--prompts", prompts, "--out", t.TempDir() + "/o", "--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--toolsets", "web"},
		{"generate", "--prompts", prompts, "--out", t.TempDir() + "/o", "--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--toolsets", "file", "--distribution", "default"},
		{"generate", "--prompts", prompts, "--out", t.TempDir() + "/o", "--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--resume", "--overwrite"},
		{"generate", "--prompts", "/nonexistent", "--out", t.TempDir() + "/o", "--base-url", "http://127.0.0.1:1/v1", "--model", "m"},
		{"generate", "--bogus-flag"},
		{"cat"},
	} {
		if code, _, errs := hp(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2: %s", args, code, errs)
		}
	}
	out := filepath.Join(t.TempDir(), "o")
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--batch-size", "0")
	if _, err := os.Stat(out); code != exitUsage || !strings.Contains(errs, "--batch-size must be at least 1, got 0") || err == nil {
		t.Errorf("--batch-size 0: exit %d, out folder %v: %s", code, err, errs)
	}
}

// TestFaultyEndpointEveryRowEndsWithOutcome runs against an endpoint failing
// 30% of attempts with 429 and 10% with 500: every row ends with an explicit
// outcome, and --resume completes the rest; none is lost.
func TestFaultyEndpointEveryRowEndsWithOutcome(t *testing.T) {
	url := startFake(t, fakellm.Config{Fail429: 0.3, Fail500: 0.1, MaxFaults: -1, RetryAfter: time.Millisecond, Seed: 3}, echoScript)
	var lines []string
	for i := 0; i < 60; i++ {
		lines = append(lines, fmt.Sprintf(`{"prompt": "echo row%d"}`, i))
	}
	prompts := writePrompts(t, lines...)
	out := filepath.Join(t.TempDir(), "out")
	args := []string{"generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none", "--workers", "16", "--max-retries", "1", "--toolsets", "terminal"}
	code, _, errs := hp(t, args...)
	recs := catRecords(t, out)
	if len(recs) != 60 {
		t.Fatalf("first run: %d records of 60 (exit %d): %s", len(recs), code, errs)
	}
	failed := 0
	for _, r := range recs {
		switch r["outcome"] {
		case "completed":
		case "api_error":
			failed++
		default:
			t.Fatalf("unexpected outcome %v", r["outcome"])
		}
	}
	if failed == 0 || code != exitRowsFailed {
		t.Fatalf("with 40%% faults and one retry some rows must fail: failed=%d exit=%d", failed, code)
	}
	for i := 0; i < 30 && failed > 0; i++ {
		code, _, errs = hp(t, append(args, "--resume", "--max-retries", "4")...)
		recs = catRecords(t, out)
		if len(recs) != 60 {
			t.Fatalf("resume %d: %d records: %s", i, len(recs), errs)
		}
		failed = 0
		for _, r := range recs {
			if r["outcome"] != "completed" {
				failed++
			}
		}
	}
	if failed != 0 || code != 0 {
		t.Fatalf("after resumes: %d rows still failed, exit %d: %s", failed, code, errs)
	}
	mustVerify(t, out)
}

// TestLocalSandboxHidesSecretsAndKillsProcessTree runs real commands in the
// local sandbox through generate.
func TestLocalSandboxHidesSecretsAndKillsProcessTree(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("bash is not installed; CI requires the local sandbox test: %v", err)
		}
		t.Skip("bash not installed")
	}
	for _, name := range []string{"HP_TEST_API_KEY", "HP_TEST_TOKEN", "HP_TEST_SECRET", "HP_TEST_PASSWORD", "MY_KEYRING"} {
		t.Setenv(name, "leaked-"+name)
	}
	url := startFake(t, fakellm.Config{}, `{"scripts": [
	  {"match": "^env", "steps": [{"tool_calls": [{"name": "terminal", "arguments": {"command": "env"}}]}, {"content": "ok"}]},
	  {"match": "^sleep", "steps": [{"tool_calls": [{"name": "terminal", "arguments": {"command": "sleep 1717 & sleep 1718", "timeout": 1}}]}, {"content": "ok"}]}]}`)
	prompts := writePrompts(t, `{"prompt": "env"}`, `{"prompt": "sleep"}`)
	out := filepath.Join(t.TempDir(), "out")
	if code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none", "--toolsets", "terminal"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	recs := catRecords(t, out)
	envTurn := recs[0]["conversations"].([]any)[3].(map[string]any)["value"].(string)
	if !strings.Contains(envTurn, "PATH=") {
		t.Fatalf("env output missing: %s", envTurn)
	}
	for _, word := range []string{"KEY", "TOKEN", "SECRET", "PASSWORD"} {
		for _, line := range strings.Split(envTurn, `\n`) {
			name, _, _ := strings.Cut(line, "=")
			if strings.Contains(strings.ToUpper(name), word) {
				t.Errorf("sandbox env shows %q", line)
			}
		}
	}
	sleepTurn := recs[1]["conversations"].([]any)[3].(map[string]any)["value"].(string)
	if !strings.Contains(sleepTurn, `"exit_code": 124`) {
		t.Errorf("timeout not reported as 124: %s", sleepTurn)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		left := processesWith("sleep 171")
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left behind: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mustScripts parses fakellm scripts in their JSON form.
func mustScripts(t *testing.T, scriptJSON string) []fakellm.Script {
	t.Helper()
	s, err := fakellm.ParseScripts([]byte(scriptJSON))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitRequests polls until the fake has answered at least n requests in
// total, so a test can act in the middle of a run however slowly the machine
// starts the process. It returns early when cmd has already exited, and fails
// the test after a generous deadline.
func waitRequests(t *testing.T, fs *fakellm.Server, n int64, cmd *exec.Cmd) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); fs.Stats().Requests < n; time.Sleep(5 * time.Millisecond) {
		if cmd.ProcessState != nil || processGone(cmd.Process.Pid) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fake saw %d requests in 2 minutes, waited for %d", fs.Stats().Requests, n)
		}
	}
}

// processGone reports whether pid has exited (a zombie counts as exited).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z")
}

// processesWith lists the command lines of processes containing s.
func processesWith(s string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmd, s) {
			out = append(out, e.Name()+": "+cmd)
		}
	}
	return out
}

// TestKillNineAndResumeLosesNothing kills a real generate process with
// SIGKILL at ten random moments, resuming after each: at the end every
// (row, sample) has exactly one record and verify passes. A moment is a random
// number of model calls into the run, so a slow start on a loaded machine
// still gets killed mid-run.
func TestKillNineAndResumeLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	fs, url := startFakeServer(t, fakellm.Config{Latency: 20 * time.Millisecond, Jitter: 30 * time.Millisecond, Scripts: mustScripts(t, echoScript)})
	var lines []string
	for i := 0; i < 150; i++ {
		lines = append(lines, fmt.Sprintf(`{"prompt": "echo row%d"}`, i%100)) // duplicated prompts are distinct rows
	}
	prompts := writePrompts(t, lines...)
	out := filepath.Join(t.TempDir(), "out")
	base := []string{"generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none",
		"--workers", "8", "--samples", "2", "--toolsets", "terminal", "--commit-interval", "100ms", "--shard-rows", "7"}
	// The session folders of the local sandbox go to sbx, so the test can
	// check that each --resume removed what the killed run before it left.
	sbx := t.TempDir()
	env := append(os.Environ(), "TMPDIR="+sbx)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 10; i++ {
		args := base
		if i > 0 {
			args = append(append([]string{}, base...), "--resume")
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitRequests(t, fs, fs.Stats().Requests+int64(5+rng.IntN(40)), cmd)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	}
	final := exec.Command(bin, append(base, "--resume")...)
	final.Env = env
	if b, err := final.CombinedOutput(); err != nil {
		t.Fatalf("final resume: %v\n%s", err, b)
	}
	if left, _ := filepath.Glob(filepath.Join(sbx, "hermes-sbx-*")); len(left) > 0 {
		t.Errorf("session folders of killed runs left after the final --resume: %v", left)
	}
	recs := catRecords(t, out)
	if len(recs) != 300 {
		t.Fatalf("got %d records, want 300", len(recs))
	}
	seen := map[string]bool{}
	for _, r := range recs {
		k := fmt.Sprintf("%v/%v", r["prompt_index"], r["sample"])
		if seen[k] {
			t.Fatalf("duplicate record for %s", k)
		}
		seen[k] = true
		if r["outcome"] != "completed" {
			t.Errorf("%s: outcome %v", k, r["outcome"])
		}
	}
	mustVerify(t, out)
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// buildBinary builds hermes-pipe once per test process.
func buildBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hermes-pipe-test-bin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "hermes-pipe")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// TestInterruptCommitsFinishedRowsAndExits130: the first SIGINT stops
// dispatch, lets rollouts in flight finish and commits them; exit 130; a
// --resume finishes the run with no duplicate.
func TestInterruptCommitsFinishedRowsAndExits130(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	fs, url := startFakeServer(t, fakellm.Config{Latency: 150 * time.Millisecond, Scripts: mustScripts(t, echoScript)})
	var lines []string
	for i := 0; i < 60; i++ {
		lines = append(lines, fmt.Sprintf(`{"prompt": "echo r%d"}`, i))
	}
	prompts := writePrompts(t, lines...)
	out := filepath.Join(t.TempDir(), "out")
	args := []string{"generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none", "--workers", "4", "--toolsets", "terminal"}
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt once rollouts are in flight: they must finish and commit.
	waitRequests(t, fs, 4, cmd)
	_ = cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit = %v, want 130\n%s", err, stderr.String())
	}
	first := catRecords(t, out)
	if len(first) == 0 || len(first) == 60 {
		t.Fatalf("after the interrupt %d of 60 records were committed; want some but not all", len(first))
	}
	for _, r := range first {
		if r["outcome"] != "completed" {
			t.Fatalf("in-flight rollout not finished cleanly: %v (%v)", r["outcome"], r["error"])
		}
	}
	mustVerify(t, out)
	if b, err := exec.Command(bin, append(args, "--resume")...).CombinedOutput(); err != nil {
		t.Fatalf("resume: %v\n%s", err, b)
	}
	if n := len(catRecords(t, out)); n != 60 {
		t.Fatalf("after resume %d records, want 60", n)
	}
	mustVerify(t, out)
}

// TestGenerateReadsPromptsFromURL: --prompts may be an object-storage URL.
func TestGenerateReadsPromptsFromURL(t *testing.T) {
	url := startFake(t, fakellm.Config{}, echoScript)
	prompts := writePrompts(t, `{"prompt": "echo from a url"}`)
	out := filepath.Join(t.TempDir(), "out")
	if code, _, errs := hp(t, "generate", "--prompts", "file://"+prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if recs := catRecords(t, out); len(recs) != 1 || recs[0]["outcome"] != "completed" {
		t.Fatalf("records = %v", recs)
	}
	if code, _, errs := hp(t, "generate", "--prompts", "file://"+prompts+".missing", "--out", out+"2", "--base-url", url, "--model", "m"); code != exitUsage {
		t.Fatalf("missing object: exit %d: %s", code, errs)
	}
}

// TestUnreachableEndpointFailsFast: a --base-url nobody listens on stops the
// run before any row is tried, with exit 1 and a message naming the URL.
func TestUnreachableEndpointFailsFast(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now
	prompts := writePrompts(t, `{"prompt": "x"}`)
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", "http://"+addr+"/v1", "--model", "m", "--progress", "none")
	if code != exitFatal || !strings.Contains(errs, "cannot reach --base-url http://"+addr) {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// Failing fast means the endpoint probe stopped the run before any row
	// was tried (its message above), not that it ended within some time: no
	// model call was retried.
	if strings.Contains(errs, "attempts") {
		t.Fatalf("rows were tried against the dead endpoint: %s", errs)
	}
}

// TestGenerateParquetMatchesJSONL: the same run written as Parquet and as
// JSONL prints the same records (cat) and both folders verify.
func TestGenerateParquetMatchesJSONL(t *testing.T) {
	url := startFake(t, fakellm.Config{}, echoScript)
	prompts := writePrompts(t, `{"prompt": "echo a", "id": "a"}`, `{"prompt": "echo b <&> 世界", "id": "b"}`)
	outs := map[string]string{}
	for _, format := range []string{"jsonl", "parquet"} {
		out := filepath.Join(t.TempDir(), format)
		if code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m",
			"--progress", "none", "--format", format, "--toolsets", "terminal"); code != 0 {
			t.Fatalf("%s: exit %d: %s", format, code, errs)
		}
		mustVerify(t, out)
		_, cat, _ := hp(t, "cat", out)
		outs[format] = regexp.MustCompile(`"duration_ms":\d+|"timestamp":"[^"]*"|"timings":\{[^}]*\}`).ReplaceAllString(cat, "")
	}
	if outs["jsonl"] == "" || outs["jsonl"] != outs["parquet"] {
		t.Fatalf("cat differs:\njsonl:   %.300s\nparquet: %.300s", outs["jsonl"], outs["parquet"])
	}
}

// TestPromptsFolderIsAUsageErrorAndCreatesNoOutput: --prompts naming a
// folder is refused before --out is created, so the corrected rerun works.
func TestPromptsFolderIsAUsageErrorAndCreatesNoOutput(t *testing.T) {
	url := startFake(t, fakellm.Config{}, echoScript)
	dir := t.TempDir()
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hp(t, "generate", "--prompts", dir, "--out", out, "--base-url", url, "--model", "m", "--progress", "none")
	if code != exitUsage || !strings.Contains(errs, "--prompts "+dir+": is a folder") {
		t.Fatalf("exit %d, want 2 naming the folder: %s", code, errs)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("--out exists after a refused input (%v)", err)
	}
	prompts := writePrompts(t, `{"prompt": "echo fixed"}`)
	if code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none"); code != 0 {
		t.Fatalf("corrected rerun: exit %d: %s", code, errs)
	}
	mustVerify(t, out)
}

// TestBadCwdIsARejectNotASandboxError: with the local sandbox a row whose
// cwd is missing (under --cwd-root), relative or empty is rejected as input
// (naming line and field) instead of failing every attempt as a retried
// sandbox_error.
func TestBadCwdIsARejectNotASandboxError(t *testing.T) {
	url := startFake(t, fakellm.Config{}, echoScript)
	dir := t.TempDir()
	prompts := writePrompts(t,
		`{"prompt": "echo a", "cwd": "/nonexistent-hermes-pipe"}`,
		`{"prompt": "echo b", "cwd": "`+dir+`"}`,
		`{"prompt": "echo c", "cwd": "relative/dir"}`,
		`{"prompt": "echo d", "cwd": ""}`)
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none",
		"--cwd-root", dir)
	if code != exitRowsFailed {
		t.Fatalf("exit %d, want 3: %s", code, errs)
	}
	recs := catRecords(t, out)
	if len(recs) != 1 || recs[0]["outcome"] != "completed" {
		t.Fatalf("records = %v", recs)
	}
	raw, err := os.ReadFile(filepath.Join(out, "rejects.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var rj struct {
			Line   int
			Field  string
			Reason string
		}
		if err := json.Unmarshal([]byte(l), &rj); err != nil {
			t.Fatal(err)
		}
		if rj.Field != "cwd" {
			t.Errorf("line %d: field %q (%s), want cwd", rj.Line, rj.Field, rj.Reason)
		}
		lines = append(lines, rj.Line)
	}
	if fmt.Sprint(lines) != "[1 3 4]" {
		t.Errorf("rejected lines %v, want [1 3 4]:\n%s", lines, raw)
	}
	if !strings.Contains(string(raw), "working folder unavailable") {
		t.Errorf("rejects do not say the folder is missing:\n%s", raw)
	}
	mustVerify(t, out)
}
