package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// summaryBlock returns the stderr lines from the end-of-run count line on.
func summaryBlock(t *testing.T, errs, out string) []string {
	t.Helper()
	i := strings.Index(errs, out+": ")
	if i < 0 {
		t.Fatalf("no end-of-run line for %s in %q", out, errs)
	}
	return strings.Split(strings.TrimRight(errs[i:], "\n"), "\n")
}

func hasLine(lines []string, re string) bool {
	r := regexp.MustCompile(re)
	for _, l := range lines {
		if r.MatchString(l) {
			return true
		}
	}
	return false
}

// TestRunSummaryAfterServerErrors: an endpoint answering every attempt with
// 500 ends every row api_error; the closing summary counts the outcomes, the
// retries as 5xx (rows × --max-retries), the error message and points at
// the failed rows.
func TestRunSummaryAfterServerErrors(t *testing.T) {
	url := startFake(t, fakellm.Config{Fail500: 1, MaxFaults: -1}, echoScript)
	prompts := writePrompts(t, `{"prompt": "echo a"}`, `{"prompt": "echo b"}`, `{"prompt": "echo c"}`)
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m",
		"--progress", "none", "--max-retries", "2", "--toolsets", "terminal")
	if code != exitRowsFailed {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := summaryBlock(t, errs, out)
	for _, re := range []string{
		`^  outcomes: 3 api_error$`,
		`^  tokens: 0, spend: unpriced$`,
		`^  retries: 6 \(6 5xx server error\)$`,
		`^  top errors:$`,
		`^    3× .*500`,
		`^  failed rows: 3 in ` + regexp.QuoteMeta(out) + `/failed/ \(` + "`hermes-pipe cat ",
	} {
		if !hasLine(lines, re) {
			t.Errorf("summary lacks a line matching %q:\n%s", re, strings.Join(lines, "\n"))
		}
	}
	if len(lines) > 12 {
		t.Errorf("summary of %d lines:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

// TestRunSummaryAfterRateLimits: each request is refused once with 429 and
// then answered; the rows complete, the summary counts the 429 retries as
// such, lists no error and no failed rows.
func TestRunSummaryAfterRateLimits(t *testing.T) {
	url := startFake(t, fakellm.Config{Fail429: 1, MaxFaults: 1, RetryAfter: time.Millisecond}, echoScript)
	var rows []string
	for i := range 4 {
		rows = append(rows, fmt.Sprintf(`{"prompt": "echo r%d"}`, i))
	}
	prompts := writePrompts(t, rows...)
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m",
		"--progress", "none", "--toolsets", "terminal")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := summaryBlock(t, errs, out)
	if !hasLine(lines, `^  outcomes: 4 completed$`) || !hasLine(lines, `^  retries: ([1-9]\d*) \(([1-9]\d*) 429 rate-limited\)$`) {
		t.Fatalf("summary:\n%s", strings.Join(lines, "\n"))
	}
	m := regexp.MustCompile(`retries: (\d+) \((\d+) 429`).FindStringSubmatch(errs)
	if m[1] != m[2] {
		t.Fatalf("retries %s but 429 retries %s", m[1], m[2])
	}
	if hasLine(lines, `top errors|failed rows`) {
		t.Fatalf("a clean run lists errors or failed rows:\n%s", strings.Join(lines, "\n"))
	}
}

// retriesOfFolder returns the retries `stats --json DIR` reports and checks
// that `stats DIR` prints the same count of 429s on its retries line.
func retriesOfFolder(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	code, out, errs := hp(t, "stats", "--json", dir)
	if code != 0 {
		t.Fatalf("stats --json: exit %d: %s", code, errs)
	}
	var st struct {
		Retries map[string]int64 `json:"retries"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("stats --json: %v\n%s", err, out)
	}
	code, text, errs := hp(t, "stats", dir)
	if code != 0 {
		t.Fatalf("stats: exit %d: %s", code, errs)
	}
	want := fmt.Sprintf(`(?m)^retries +%d \(%d 429 rate-limited\)$`, st.Retries["rate_limited"], st.Retries["rate_limited"])
	if !regexp.MustCompile(want).MatchString(text) {
		t.Errorf("stats text lacks %q:\n%s", want, text)
	}
	return st.Retries
}

// TestStatsCountRetriesOfEachMode: against an endpoint that refuses each
// request once with 429, generate, compress and swe each record their
// retries in run.json; `stats` and `stats --json` report them, with the
// count the closing summary printed, and only the 429 cause.
func TestStatsCountRetriesOfEachMode(t *testing.T) {
	refuseOnce := fakellm.Config{Fail429: 1, MaxFaults: 1, RetryAfter: time.Millisecond}
	check := func(t *testing.T, out, errs string) {
		t.Helper()
		r := retriesOfFolder(t, out)
		m := regexp.MustCompile(`retries: (\d+) \((\d+) 429 rate-limited\)`).FindStringSubmatch(errs)
		if m == nil {
			t.Fatalf("no retries in the closing summary:\n%s", errs)
		}
		if r["rate_limited"] < 1 || fmt.Sprint(r["rate_limited"]) != m[1] {
			t.Errorf("stats retries %v, the closing summary %s", r, m[0])
		}
		for cause, n := range r {
			if cause != "rate_limited" && n != 0 {
				t.Errorf("%d retries of cause %s", n, cause)
			}
		}
	}
	t.Run("generate", func(t *testing.T) {
		url := startFake(t, refuseOnce, echoScript)
		prompts := writePrompts(t, `{"prompt": "echo a"}`, `{"prompt": "echo b"}`, `{"prompt": "echo c"}`)
		out := filepath.Join(t.TempDir(), "out")
		code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m",
			"--progress", "none", "--toolsets", "terminal")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		check(t, out, errs)
	})
	t.Run("compress", func(t *testing.T) {
		_, url := startFakeServer(t, fakellm.Config{SummaryWords: 40, Fail429: 1, MaxFaults: 1, RetryAfter: time.Millisecond})
		dir := t.TempDir()
		in := nineTrajectories(t, dir)
		out := filepath.Join(dir, "out")
		code, _, errs := hpc(t, "compress", "--in", in, "--out", out, "--target-tokens", "1500", "--summary-tokens", "100",
			"--base-url", url, "--model", "m", "--progress", "none")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		check(t, out, errs)
	})
	t.Run("swe", func(t *testing.T) {
		if _, err := exec.LookPath("git"); err != nil {
			t.Skip("git not installed")
		}
		scripts, err := fakellm.ParseScripts([]byte(`{"scripts": [{"name": "hello", "match": "^Create hello.py", "steps": [
 {"tool_calls": [{"name": "terminal", "arguments": {"command": "printf 'print(1)\\n' > hello.py"}}]},
 {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo MINI_SWE_AGENT_FINAL_OUTPUT; echo created hello.py"}}]}]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		cfg := refuseOnce
		cfg.Scripts = scripts
		url := startFake(t, cfg, "")
		out := filepath.Join(t.TempDir(), "out")
		code, _, errs := hpSWE(t, "swe", "--task", "Create hello.py that prints 1", "--out", out, "--base-url", url, "--model", "fake",
			"--sandbox", "local", "--progress", "none")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		r := retriesOfFolder(t, out)
		if r["rate_limited"] < 1 {
			t.Errorf("swe retries %v", r)
		}
	})
}

// TestMaxRetriesZeroMeansNone: --max-retries 0 tries each request once (it
// used to be read as the client's default, five retries); a negative
// count is a usage error.
func TestMaxRetriesZeroMeansNone(t *testing.T) {
	url := startFake(t, fakellm.Config{Fail500: 1, MaxFaults: -1}, echoScript)
	prompts := writePrompts(t, `{"prompt": "echo a"}`, `{"prompt": "echo b"}`)
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m",
		"--progress", "none", "--max-retries", "0", "--toolsets", "terminal")
	if code != exitRowsFailed {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if lines := summaryBlock(t, errs, out); !hasLine(lines, `^  retries: none$`) || !hasLine(lines, `^    2× .*500`) {
		t.Errorf("summary:\n%s", strings.Join(lines, "\n"))
	}
	code, _, errs = hp(t, "generate", "--prompts", prompts, "--out", filepath.Join(t.TempDir(), "o2"), "--base-url", url, "--model", "m",
		"--max-retries", "-1")
	if code != 2 || !strings.Contains(errs, "--max-retries") {
		t.Errorf("--max-retries -1: exit %d: %s", code, errs)
	}
}

// TestSWERunSummary: swe ends with generate's closing block on stderr, after
// this run's tasks by category: here one task resolved after a 429 on each
// request, counted as such, with no error and no failed rows.
func TestSWERunSummary(t *testing.T) {
	script := `{"scripts": [{"match": "^Create hello.py", "steps": [
 {"tool_calls": [{"name": "terminal", "arguments": {"command": "printf 'print(1)\\n' > hello.py"}}]},
 {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo MINI_SWE_AGENT_FINAL_OUTPUT"}}]}]}]}`
	url := startFake(t, fakellm.Config{Fail429: 1, MaxFaults: 1, RetryAfter: time.Millisecond}, script)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, errs := hpSWE(t, "swe", "--task", "Create hello.py that prints 1", "--out", out, "--base-url", url, "--model", "fake",
		"--sandbox", "local", "--local-isolation", "none", "--progress", "none")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, errs)
	}
	lines := summaryBlock(t, errs, out)
	for _, re := range []string{
		`^` + regexp.QuoteMeta(out) + `: 1 run \(1 resolved, 0 unresolved, 0 empty_patch, 0 error\), 0 already done, in \S+$`,
		`^  outcomes: 1 resolved$`,
		`^  tokens: [1-9]\d*, spend: unpriced$`,
		`^  retries: ([1-9]\d*) \(([1-9]\d*) 429 rate-limited\)$`,
	} {
		if !hasLine(lines, re) {
			t.Errorf("summary lacks a line matching %q:\n%s", re, strings.Join(lines, "\n"))
		}
	}
	if hasLine(lines, `top errors|failed rows`) {
		t.Errorf("a clean run lists errors or failed rows:\n%s", strings.Join(lines, "\n"))
	}
	// A resumed run with nothing left says so in the same line.
	code, _, errs = hpSWE(t, "swe", "--task", "Create hello.py that prints 1", "--out", out, "--base-url", url, "--model", "fake",
		"--sandbox", "local", "--local-isolation", "none", "--progress", "none", "--resume")
	if code != 0 || !hasLine(summaryBlock(t, errs, out), `^`+regexp.QuoteMeta(out)+`: 0 run \(0 resolved, 0 unresolved, 0 empty_patch, 0 error\), 1 already done, in `) {
		t.Errorf("resume: exit %d\n%s", code, errs)
	}
}
