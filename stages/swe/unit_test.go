package swe

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/local"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

func TestParseTasksBothForms(t *testing.T) {
	data := []byte(`{"instance_id": "a__b-1", "repo": "a/b", "base_commit": "abc123", "problem_statement": "fix it", "image": "img:1", "test_patch": "", "FAIL_TO_PASS": "[\"t1\", \"t2\"]", "PASS_TO_PASS": ["t3"], "test_cmd": "pytest"}

{"task": "make hello.sh", "image": "img:2"}
{"task": "make hello.sh", "image": "img:2", "test_cmd": "sh t.sh", "cwd": "/w"}
{"id": "named", "prompt": "p", "docker_image": "img:3"}
`)
	tasks, err := ParseTasks(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 4 {
		t.Fatalf("%d tasks", len(tasks))
	}
	a := tasks[0]
	if a.Simple || a.Cwd != DefaultCwd || !slices.Equal(a.FailToPass, []string{"t1", "t2"}) || !slices.Equal(a.PassToPass, []string{"t3"}) || a.Graded() != "tests" {
		t.Errorf("swe-bench task: %+v", a)
	}
	if a.Key != "id:a__b-1#0" {
		t.Errorf("key %q", a.Key)
	}
	b, c := tasks[1], tasks[2]
	if !b.Simple || b.InstanceID != "task-3" || b.Cwd != "" || b.Graded() != "submission" || c.Graded() != "exit_code" {
		t.Errorf("simple tasks: %+v / %+v", b, c)
	}
	if b.Key == c.Key || !strings.HasPrefix(b.Key, "row:1:") {
		t.Errorf("simple keys %q %q: duplicated text on two lines must be two tasks", b.Key, c.Key)
	}
	if d := tasks[3]; d.InstanceID != "named" || d.Image != "img:3" || d.Key != "id:named#0" {
		t.Errorf("named simple task: %+v", d)
	}
	if !strings.Contains(a.Prompt(), "fix it") || !strings.Contains(a.Prompt(), DefaultCwd) {
		t.Errorf("prompt %q", a.Prompt())
	}
}

func TestParseTasksReportsEveryBadLine(t *testing.T) {
	data := []byte(`{"instance_id": "x", "problem_statement": "p", "image": "i"}
not json
{"instance_id": "y", "problem_statement": "p", "image": "i", "test_cmd": "t", "base_commit": "main"}
{"instance_id": "z", "problem_statement": "p", "image": "i", "test_cmd": "t", "FAIL_TO_PASS": 3}
{"instance_id": "ok", "problem_statement": "p", "image": "i", "test_cmd": "t"}
{"instance_id": "ok", "problem_statement": "p", "image": "i", "test_cmd": "t"}
{"task": "", "image": "i"}
`)
	_, err := ParseTasks(data)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"line 1: test_cmd: missing", "line 2: not a JSON object", "line 3: base_commit", "line 4: FAIL_TO_PASS", `line 6: instance_id: "ok" repeats line 5`, "line 7: task: missing"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := ParseTasks([]byte("\n\n")); err == nil {
		t.Error("an empty file is accepted")
	}
}

func TestParseTestLog(t *testing.T) {
	log := strings.Join([]string{
		"PASSED tests/test_a.py::test_one",
		"FAILED tests/test_a.py::test_two - AssertionError: 1 != 2",
		"tests/test_b.py::test_three PASSED                                      [ 50%]",
		"tests/test_b.py::test_four FAILED                                       [100%]",
		"\x1b[32mPASSED\x1b[0m tests/test_c.py::test_color",
		"PASS plain_ok",
		"FAIL plain_bad",
		"--- PASS: TestGo (0.00s)",
		"--- FAIL: TestGoBad (0.01s)",
		"ok tap_ok",
		"not ok tap_bad",
		"ERROR tests/test_a.py::test_err - fixture",
		"PASSED tests/test_a.py::test_flaky",
		"ERROR tests/test_a.py::test_flaky",
		"XFAIL tests/test_a.py::test_xfail - reason",
		"SKIPPED tests/test_a.py::test_skip",
		"random noise PASSED nothing",
		"PASS",
	}, "\r\n")
	got := ParseTestLog(log)
	want := map[string]TestStatus{
		"tests/test_a.py::test_one": TestPassed, "tests/test_a.py::test_two": TestFailed,
		"tests/test_b.py::test_three": TestPassed, "tests/test_b.py::test_four": TestFailed,
		"tests/test_c.py::test_color": TestPassed, "plain_ok": TestPassed, "plain_bad": TestFailed,
		"TestGo": TestPassed, "TestGoBad": TestFailed, "tap_ok": TestPassed, "tap_bad": TestFailed,
		"tests/test_a.py::test_err": TestError, "tests/test_a.py::test_flaky": TestError,
		"tests/test_a.py::test_xfail": TestPassed, "tests/test_a.py::test_skip": TestSkipped,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("parsed %d tests, want %d: %v", len(got), len(want), got)
	}
	tr, ok := Judge(got, []string{"plain_ok", "TestGo"}, []string{"tap_ok", "missing", "tests/test_a.py::test_skip"})
	if ok || !slices.Equal(tr.PassToPass.Failure, []string{"missing", "tests/test_a.py::test_skip"}) || len(tr.FailToPass.Failure) != 0 {
		t.Errorf("judge: %+v %v", tr, ok)
	}
	if _, ok := Judge(got, []string{"plain_ok"}, []string{"tap_ok"}); !ok {
		t.Error("all passing lists are not resolved")
	}
}

func TestSubmitted(t *testing.T) {
	for _, tc := range []struct {
		out  string
		code int
		want bool
	}{
		{"MINI_SWE_AGENT_FINAL_OUTPUT\n", 0, true},
		{"\n  MINI_SWE_AGENT_FINAL_OUTPUT  \r\nsummary\n", 0, true},
		{"MINI_SWE_AGENT_FINAL_OUTPUT", 0, true},
		{"MINI_SWE_AGENT_FINAL_OUTPUT\n", 1, false},
		{"# notes\nMINI_SWE_AGENT_FINAL_OUTPUT\n", 0, false},
		{"3:MINI_SWE_AGENT_FINAL_OUTPUT\n", 0, false},
		{"MINI_SWE_AGENT_FINAL_OUTPUT and more\n", 0, false},
		{"", 0, false},
	} {
		if got := Submitted(sandbox.Result{Stdout: tc.out, ExitCode: tc.code}); got != tc.want {
			t.Errorf("Submitted(%q, exit %d) = %v", tc.out, tc.code, got)
		}
	}
	if Submitted(sandbox.Result{Stdout: Sentinel, TimedOut: true, ExitCode: 0}) {
		t.Error("a timed-out command submits")
	}
}

func TestPatchFiles(t *testing.T) {
	p := "diff --git a/x/y.py b/x/y.py\n--- a/x/y.py\n+++ b/x/y.py\n@@\ndiff --git a/new.txt b/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new.txt\ndiff --git a/old b/renamed\n--- a/u.c\t2024-01-01\n"
	if got := patchFiles(p); !slices.Equal(got, []string{"x/y.py", "new.txt", "old", "renamed", "u.c"}) {
		t.Errorf("patchFiles = %v", got)
	}
}

func report(outcomes map[string]string) *Report {
	r := &Report{Instances: map[string]*InstanceReport{}}
	for id, o := range outcomes {
		r.Instances[id] = &InstanceReport{Outcome: o}
		r.Total++
		switch o {
		case "resolved":
			r.Resolved++
		case "error":
			r.Errors++
		case "pending":
			r.Pending++
		}
	}
	r.ResolvedRate = float64(r.Resolved) / float64(r.Total)
	return r
}

func TestGate(t *testing.T) {
	r := report(map[string]string{"a": "resolved", "b": "resolved", "c": "unresolved", "d": "error"})
	for _, tc := range []struct {
		name     string
		min      float64
		baseline []string
		want     string
	}{
		{"rate met despite an error", 0.5, nil, GatePass},
		{"error could lift the rate", 0.75, nil, GateUnknown},
		{"below even with the error", 0.8, nil, GateFail},
		{"regression", 0, []string{"a", "c"}, GateFail},
		{"baseline instance errored", 0, []string{"a", "d"}, GateUnknown},
		{"baseline instance gone", 0, []string{"a", "zz"}, GatePass},
		{"regression beats unknown", 0.75, []string{"c"}, GateFail},
	} {
		g := r.Judge(tc.min, "b.json", tc.baseline)
		if g.Verdict != tc.want {
			t.Errorf("%s: verdict %s, want %s (%v)", tc.name, g.Verdict, tc.want, g.Reasons)
		}
	}
	if g := r.Judge(0, "", []string{"c"}); !slices.Equal(g.Regressions, []string{"c"}) {
		t.Errorf("regressions %v", g.Regressions)
	}
}

func TestReadBaseline(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if ids, err := ReadBaseline(write("a.json", `{"resolved_ids": ["x", "y"], "total_instances": 3}`)); err != nil || !slices.Equal(ids, []string{"x", "y"}) {
		t.Errorf("report: %v %v", ids, err)
	}
	if ids, err := ReadBaseline(write("e.json", `{"resolved_ids": []}`)); err != nil || len(ids) != 0 {
		t.Errorf("empty list: %v %v", ids, err)
	}
	for _, bad := range []string{`{"other": 1}`, `not json`} {
		if _, err := ReadBaseline(write("b.json", bad)); err == nil {
			t.Errorf("baseline %q accepted", bad)
		}
	}
	if _, err := ReadBaseline(filepath.Join(dir, "none")); err == nil {
		t.Error("a missing baseline is accepted")
	}
}

// TestFileTransferLargeAndBinary moves a patch larger than several chunks
// through a real local session both ways, byte for byte.
func TestFileTransferLargeAndBinary(t *testing.T) {
	d, err := local.New(sandbox.Config{Local: sandbox.LocalConfig{BaseDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := d.Open(ctx, sandbox.Spec{RolloutID: "xfer", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	big := bytes.Repeat([]byte("line\x00\xff'\"$`\\ é\n"), 20000) // ~340 KB, quotes and binary
	small := []byte("x")
	if err := writeFiles(ctx, s, file{"big.bin", big}, file{"small", small}, file{"empty", nil}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]byte{"big.bin": big, "small": small, "empty": {}} {
		got, err := readFile(ctx, s, "", name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: read %d bytes, wrote %d", name, len(got), len(want))
		}
	}
	if _, err := readFile(ctx, s, "", "missing"); err == nil {
		t.Error("reading a missing file succeeds")
	}
}

// TestGradeRecord: a swe verdict as a record's grade and reward: 1 for
// resolved, 0 for unresolved and an empty patch (the reason and the log's
// tail in the output), null with the reason for an environment failure.
func TestGradeRecord(t *testing.T) {
	for _, c := range []struct {
		g      Grade
		reward string
		passed string
		want   string
	}{
		{Grade{Outcome: OutcomeResolved, LogTail: "ok"}, "1", "true", "ok"},
		{Grade{Outcome: OutcomeUnresolved, Reason: "2 tests failed", LogTail: "FAIL x"}, "0", "false", "unresolved: 2 tests failed\nFAIL x"},
		{Grade{Outcome: OutcomeEmptyPatch}, "0", "false", "empty_patch"},
		{Grade{Outcome: schemas.OutcomeError, Reason: "no pytest"}, "null", "null", ""},
	} {
		gr := c.g.Record(7)
		got := func(p any) string { b, _ := json.Marshal(p); return string(b) }
		if got(gr.Value) != c.reward || got(gr.Passed) != c.passed || gr.Output != c.want || gr.Grader != GraderName || gr.DurationMS != 7 {
			t.Errorf("%s: %+v", c.g.Outcome, gr)
		}
		if c.reward == "null" && !strings.Contains(gr.Error, "no pytest") {
			t.Errorf("%s: error %q", c.g.Outcome, gr.Error)
		}
	}
}
