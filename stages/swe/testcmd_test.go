package swe

import (
	"strings"
	"testing"
)

// TestTestProgram: the program and script a test command runs are read
// only from a plain first command; anything else checks nothing.
func TestTestProgram(t *testing.T) {
	for _, tc := range []struct{ cmd, prog, script string }{
		{"python3 tests/run.py", "python3", "tests/run.py"},
		{"sh test.sh", "sh", "test.sh"},
		{"PYTHONPATH=. python3.11 -m pytest tests", "python3.11", ""},
		{"./run_tests.sh -v", "", "./run_tests.sh"},
		{"tests/run.sh", "", "tests/run.sh"},
		{"pytest -rA tests/test_x.py", "pytest", ""},
		{"go test ./...", "go", ""},
		{"bash -c 'make test'", "bash", ""},
		{`"my runner" x`, "", ""},
		{"$RUNNER tests", "", ""},
		{"cd sub && sh run.sh", "cd", ""},
		{"sh $SCRIPT", "sh", ""},
		{"", "", ""},
	} {
		prog, script := testProgram(tc.cmd)
		if prog != tc.prog || script != tc.script {
			t.Errorf("testProgram(%q) = %q, %q; want %q, %q", tc.cmd, prog, script, tc.prog, tc.script)
		}
	}
}

// TestTestCheckSkipsTheAgentsFile: a script the task's text names is the
// agent's to write, so only its program is checked.
func TestTestCheckSkipsTheAgentsFile(t *testing.T) {
	asked := Task{Simple: true, ProblemStatement: "Create hello.py that prints 1.", TestCmd: "python3 hello.py"}
	if got, want := testCheck(asked), "command -v 'python3' >/dev/null 2>&1 || exit 13\n"; got != want {
		t.Errorf("testCheck = %q, want %q", got, want)
	}
	other := Task{Simple: true, ProblemStatement: "Create hello.sh.", TestCmd: "sh test.sh"}
	if got := testCheck(other); got == "" || !strings.Contains(got, "exit 14") {
		t.Errorf("testCheck = %q, want the script checked", got)
	}
	for _, tc := range []struct {
		text, file string
		want       bool
	}{
		{"Write hello.py.", "hello.py", true},
		{"Fix tests/run.py please", "tests/run.py", true},
		{"Fix run.py.", "tests/run.py", true},
		{"Fix myhello.py", "hello.py", false},
		{"see hello.pyc", "hello.py", false},
		{"Create hello.sh in the repository", "test.sh", false},
	} {
		if got := namesFile(tc.text, tc.file); got != tc.want {
			t.Errorf("namesFile(%q, %q) = %v, want %v", tc.text, tc.file, got, tc.want)
		}
	}
}
