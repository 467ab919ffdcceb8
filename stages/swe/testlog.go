package swe

import (
	"regexp"
	"strings"
)

// TestStatus is the result of one test in a test log.
type TestStatus string

// Test statuses read from a log.
const (
	TestPassed  TestStatus = "PASSED"
	TestFailed  TestStatus = "FAILED"
	TestError   TestStatus = "ERROR"
	TestSkipped TestStatus = "SKIPPED"
)

// The test-output conventions ParseTestLog understands, one test per line:
//
//	PASSED tests/test_calc.py::test_add          pytest -rA summary (SWE-bench logs)
//	FAILED tests/test_calc.py::test_sub - assert…
//	tests/test_calc.py::test_add PASSED [ 50%]   pytest -v
//	PASS test_name / FAIL test_name              the plain convention of the sample suite
//	--- PASS: TestName (0.00s)                   go test -v
//	ok test_name / not ok test_name              TAP-like, without numbers
var (
	rePytestSummary = regexp.MustCompile(`^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s+(\S+)`)
	rePytestVerbose = regexp.MustCompile(`^(\S+::\S+)\s+(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b`)
	rePlain         = regexp.MustCompile(`^(?:--- )?(PASS|FAIL|SKIP):?\s+(\S+)`)
	reTAP           = regexp.MustCompile(`^(ok|not ok)\s+(\S.*?)\s*$`)
)

// ParseTestLog reads per-test results from a test command's output in any
// of the conventions above (ANSI colours and carriage returns are ignored).
// When a test appears more than once, a failure wins over a pass, so a
// test reported passed and then errored in teardown counts as failed. It
// costs one pass over the log.
func ParseTestLog(log string) map[string]TestStatus {
	out := map[string]TestStatus{}
	set := func(name string, st TestStatus) {
		name = strings.TrimSpace(name)
		if name == "" {
			return
		}
		if prev, ok := out[name]; ok && (prev == TestFailed || prev == TestError) {
			return
		}
		out[name] = st
	}
	for _, line := range strings.Split(log, "\n") {
		line = strings.TrimSpace(stripANSI(strings.TrimRight(line, "\r")))
		if line == "" {
			continue
		}
		if m := rePytestSummary.FindStringSubmatch(line); m != nil {
			// pytest appends " - reason" to failures; the name is the
			// first field.
			set(m[2], pytestStatus(m[1]))
			continue
		}
		if m := rePytestVerbose.FindStringSubmatch(line); m != nil {
			set(m[1], pytestStatus(m[2]))
			continue
		}
		if m := rePlain.FindStringSubmatch(line); m != nil {
			switch m[1] {
			case "PASS":
				set(m[2], TestPassed)
			case "FAIL":
				set(m[2], TestFailed)
			default:
				set(m[2], TestSkipped)
			}
			continue
		}
		if m := reTAP.FindStringSubmatch(line); m != nil {
			if m[1] == "ok" {
				set(m[2], TestPassed)
			} else {
				set(m[2], TestFailed)
			}
		}
	}
	return out
}

func pytestStatus(s string) TestStatus {
	switch s {
	case "PASSED", "XFAIL":
		return TestPassed // SWE-bench counts an expected failure as a pass
	case "FAILED", "XPASS":
		return TestFailed
	case "ERROR":
		return TestError
	}
	return TestSkipped
}

var reANSI = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

func stripANSI(s string) string {
	if !strings.Contains(s, "\x1b") {
		return s
	}
	return reANSI.ReplaceAllString(s, "")
}

// TestResults is how the named tests of one task fared, in SWE-bench's
// report shape: each list's success and failure names.
type TestResults struct {
	FailToPass Split `json:"FAIL_TO_PASS"`
	PassToPass Split `json:"PASS_TO_PASS"`
}

// Split divides a list of tests into those that passed and those that did
// not (failed, errored, skipped or missing from the log).
type Split struct {
	Success []string `json:"success"`
	Failure []string `json:"failure"`
}

// Judge checks FAIL_TO_PASS and PASS_TO_PASS against a parsed log. A test
// missing from the log counts as failed, as in SWE-bench. resolved is true
// when every listed test passed.
func Judge(statuses map[string]TestStatus, failToPass, passToPass []string) (TestResults, bool) {
	split := func(names []string) Split {
		s := Split{Success: []string{}, Failure: []string{}}
		for _, n := range names {
			if statuses[n] == TestPassed {
				s.Success = append(s.Success, n)
			} else {
				s.Failure = append(s.Failure, n)
			}
		}
		return s
	}
	r := TestResults{FailToPass: split(failToPass), PassToPass: split(passToPass)}
	return r, len(r.FailToPass.Failure) == 0 && len(r.PassToPass.Failure) == 0
}
