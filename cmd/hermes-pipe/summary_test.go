package main

import (
	"fmt"
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
