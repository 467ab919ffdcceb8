package swe

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Exit codes of the test command's check (testCheck), after the apply
// script's 10..12.
const (
	exitNoTestProgram = 13
	exitNoTestScript  = 14
)

// interpreter matches the programs whose first argument is the script they
// run (sh test.sh, python3 tests/run.py).
var interpreter = regexp.MustCompile(`^(sh|bash|dash|zsh|ksh|python[0-9.]*|pypy[0-9.]*|node|perl|ruby|php)$`)

// testProgram reads the program a test command starts and the script it
// runs, from its first simple command: "python3 tests/run.py" gives
// (python3, tests/run.py), "./run_tests.sh -v" gives ("", ./run_tests.sh),
// "pytest -x tests" gives (pytest, ""). Leading VAR=value words are
// skipped. A command it cannot read plainly (quotes, expansions,
// redirections before the words it needs) gives ("", ""): nothing is
// checked, so a test command is never refused on a guess.
func testProgram(cmd string) (prog, script string) {
	words := strings.Fields(cmd)
	for len(words) > 0 && isAssignment(words[0]) {
		words = words[1:]
	}
	if len(words) == 0 || !plainWord(words[0]) {
		return "", ""
	}
	first := words[0]
	if strings.Contains(first, "/") {
		return "", first
	}
	if !interpreter.MatchString(first) || len(words) < 2 {
		return first, ""
	}
	arg := words[1]
	if strings.HasPrefix(arg, "-") || !plainWord(arg) {
		return first, ""
	}
	return first, arg
}

// plainWord reports whether w is a word the shell takes as it is written:
// no quoting, expansion, globbing, redirection or operator.
func plainWord(w string) bool {
	return w != "" && !strings.ContainsAny(w, "$`'\"\\*?[]{}()<>|&;~#=!")
}

func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		if r != '_' && (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// testCheck is the shell snippet the grader runs, in the folder the tests
// run in and after the patches are applied, to tell a test command that
// cannot run from tests that fail: its program not installed exits 13
// (naming it on stderr); the script it runs neither present nor tracked
// in the repository at its base commit exits 14. A script that is not the
// repository's is looked for only when the task's text does not name it:
// a simple task may ask the agent to write the very file its test command
// runs, and not writing it is the agent's failure. "" when there is
// nothing to check.
func testCheck(t Task) string {
	prog, script := testProgram(t.TestCmd)
	var b strings.Builder
	if prog != "" {
		fmt.Fprintf(&b, "command -v %s >/dev/null 2>&1 || exit %d\n", q(prog), exitNoTestProgram)
	}
	if script != "" && !namesFile(t.Prompt(), script) {
		// Present now (the repository's, the test patch's or the
		// agent's), or tracked at the base commit and removed by the
		// agent's patch: the tests then judge it.
		fmt.Fprintf(&b, "[ -e %s ] || git ls-files --error-unmatch -- %s >/dev/null 2>&1 || exit %d\n", q(script), q(script), exitNoTestScript)
	}
	return b.String()
}

// namesFile reports whether text names the file p, by its path or its
// base name as a word of its own.
func namesFile(text, p string) bool {
	for _, name := range []string{strings.TrimPrefix(p, "./"), path.Base(p)} {
		re := regexp.MustCompile(`(^|[^\w./-])` + regexp.QuoteMeta(name) + `($|[^\w/-])`)
		if re.MatchString(text) {
			return true
		}
	}
	return false
}

// cannotTest says why the test command of t cannot run, from the exit code
// of its check; clone says the grader worked on a clone of the task's cwd
// (--sandbox local or ssh), where a missing file most often means the cwd
// is not the checkout the task was written for.
func cannotTest(t Task, clone bool, code int) string {
	prog, script := testProgram(t.TestCmd)
	if code == exitNoTestProgram {
		return fmt.Sprintf("the test command cannot run: its program %s is not installed in the sandbox (test_cmd %q)", prog, t.TestCmd)
	}
	msg := fmt.Sprintf("the test command cannot run: it runs %s, which is neither in the task's repository at its base commit nor in its test patch (test_cmd %q)", script, t.TestCmd)
	if clone {
		if t.Cwd == "" {
			msg += "; the task names no cwd, so it started from an empty folder: give it the checkout that holds its tests"
		} else {
			msg += "; is " + t.Cwd + " the checkout the task was written for?"
		}
	}
	return msg
}
