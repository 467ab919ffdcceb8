package grade

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/local"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// openLocal opens a real local session (unconfined unless confined is set)
// closed at the test's end.
func openLocal(t testing.TB, confined bool, cwd string) sandbox.Session {
	t.Helper()
	cfg := sandbox.Config{Local: sandbox.LocalConfig{BaseDir: t.TempDir(), Isolation: "none"}}
	if confined {
		cfg.Local.Isolation = ""
	}
	d, err := local.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.Open(context.Background(), sandbox.Spec{RolloutID: "grade-test", Cwd: cwd, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func mustExec(t testing.TB, s sandbox.Session, cmd string) sandbox.Result {
	t.Helper()
	r, err := s.Exec(context.Background(), sandbox.Cmd{Command: cmd})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// want checks a grade: passed and value nil when wantErr is set.
func want(t *testing.T, g schemas.Grade, kind string, passed bool, value float64, wantErr string) {
	t.Helper()
	if g.Grader != kind {
		t.Errorf("grader = %q, want %q", g.Grader, kind)
	}
	if wantErr != "" {
		if g.Passed != nil || g.Value != nil || !strings.Contains(g.Error, wantErr) {
			t.Errorf("grade = passed %v value %v error %q, want no verdict and an error with %q", g.Passed, g.Value, g.Error, wantErr)
		}
		return
	}
	if g.Error != "" || g.Passed == nil || g.Value == nil {
		t.Fatalf("grade has no verdict: error %q (output %q)", g.Error, g.Output)
	}
	if *g.Passed != passed || *g.Value != value {
		t.Errorf("grade = passed %v value %v, want %v %v (output %q)", *g.Passed, *g.Value, passed, value, g.Output)
	}
}

func TestParse(t *testing.T) {
	for _, k := range Kinds {
		got, err := Parse(strings.ToUpper(k))
		if err != nil || got != k {
			t.Errorf("Parse(%q) = %q, %v", strings.ToUpper(k), got, err)
		}
	}
	if got, err := Parse(""); got != "" || err != nil {
		t.Errorf(`Parse("") = %q, %v`, got, err)
	}
	_, err := Parse("judge")
	if err == nil || !strings.Contains(err.Error(), `"judge"`) || !strings.Contains(err.Error(), "cmd, exact, contains, regex, number, exec") {
		t.Errorf("Parse(judge) error = %v", err)
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "judge")
	plainFile := filepath.Join(dir, "notes")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plainFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		g    Grader
		want string
	}{
		{Grader{}, ""},
		{Grader{Kind: "number", Tolerance: 0.01}, ""},
		{Grader{Exec: exe}, ""},
		{Grader{Kind: Exec, Exec: exe}, ""},
		{Grader{Kind: "nope"}, "unknown grader"},
		{Grader{Kind: Exec}, "needs an executable"},
		{Grader{Kind: Cmd, Exec: exe}, "does not use it"},
		{Grader{Exec: filepath.Join(dir, "missing")}, "no such file"},
		{Grader{Exec: plainFile}, "not an executable file"},
		{Grader{Exec: dir}, "not an executable file"},
		{Grader{Timeout: -time.Second}, "negative"},
		{Grader{Tolerance: -1}, "negative"},
	} {
		err := c.g.Check()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v.Check() = %v, want %q", c.g, err, c.want)
		}
	}
}

func TestKindFor(t *testing.T) {
	for _, c := range []struct {
		kind, exec     string
		verify, answer string
		want           string
	}{
		{"", "", "make test", "", Cmd},
		{"", "", "make test", "42", Cmd},
		{"", "", "", "42", Number},
		{"", "", "", "$1,234", Number},
		{"", "", "", "Paris", Exact},
		{"", "", "", "", ""},
		{"", "/bin/judge", "", "", Exec},
		{Cmd, "", "", "42", ""},
		{Exact, "", "ls", "", ""},
		{Contains, "", "", "x", Contains},
		{Number, "", "", "Paris", Number},
		{Exec, "/bin/judge", "", "", Exec},
	} {
		got := Grader{Kind: c.kind, Exec: c.exec}.KindFor(Subject{Verify: c.verify, Answer: c.answer})
		if got != c.want {
			t.Errorf("kind %q exec %q verify %q answer %q: KindFor = %q, want %q", c.kind, c.exec, c.verify, c.answer, got, c.want)
		}
	}
	g := Grader{Kind: Cmd}.Grade(context.Background(), Subject{Answer: "42"})
	if g.Grader != "" || g.Error != "nothing to grade" || g.Value != nil {
		t.Errorf("a row with nothing to grade: %+v", g)
	}
}

func TestCmdGrader(t *testing.T) {
	sess := openLocal(t, false, "")
	// What an agent left behind: a file in its folder.
	mustExec(t, sess, "mkdir -p work && echo 'print(42)' > work/answer.py && cd work")
	g := Grader{Kind: Cmd, Timeout: 30 * time.Second}
	ctx := context.Background()
	for _, c := range []struct {
		name, verify string
		passed       bool
		value        float64
		err          string
	}{
		{"exit 0 passes", "test -f answer.py", true, 1, ""},
		{"exit 1 fails", "test -f missing.py", false, 0, ""},
		{"the agent's file is read", "grep -q 'print(42)' answer.py", true, 1, ""},
		{"reward line on a pass", "echo running; echo '{\"reward\": 0.25, \"detail\": \"3 of 12\"}'", true, 0.25, ""},
		{"reward line on a fail", "echo '{\"reward\": 0.5}'; exit 2", false, 0.5, ""},
		{"reward not a number is ignored", `echo '{"reward": "high"}'`, true, 1, ""},
		{"reward not the last line is ignored", "echo '{\"reward\": 0.5}'; echo done", true, 1, ""},
		{"a comment on the last line", "true # checks nothing", true, 1, ""},
		{"timeout is no verdict", "sleep 30", false, 0, "timed out"},
	} {
		t.Run(c.name, func(t *testing.T) {
			gg := g
			if c.err != "" {
				gg.Timeout = 300 * time.Millisecond
			}
			gr := gg.Grade(ctx, Subject{Verify: c.verify, Session: sess})
			want(t, gr, Cmd, c.passed, c.value, c.err)
		})
	}
	// The verify command ran in a subshell: its cd did not move the
	// session's shell, and the agent's folder is where it runs.
	gr := g.Grade(ctx, Subject{Verify: "cd / && pwd", Session: sess})
	want(t, gr, Cmd, true, 1, "")
	if got := strings.TrimSpace(mustExec(t, sess, "basename \"$PWD\"").Stdout); got != "work" {
		t.Errorf("after grading the shell is in %q, want work", got)
	}
	// Output keeps a bounded tail.
	gr = g.Grade(ctx, Subject{Verify: "head -c 20000 /dev/zero | tr '\\0' a; echo; echo THE-END", Session: sess})
	want(t, gr, Cmd, true, 1, "")
	if len(gr.Output) > OutputTail+len("…") || !strings.HasSuffix(gr.Output, "THE-END") {
		t.Errorf("output is %d bytes ending %q, want at most %d ending THE-END", len(gr.Output), gr.Output[max(0, len(gr.Output)-20):], OutputTail)
	}
	gr = g.Grade(ctx, Subject{Verify: "echo out; echo err >&2; exit 1", Session: sess})
	want(t, gr, Cmd, false, 0, "")
	if gr.Output != "out\nerr" {
		t.Errorf("output = %q, want stdout then stderr", gr.Output)
	}
}

func TestCmdGraderDir(t *testing.T) {
	cwd := t.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "ok"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sess := openLocal(t, true, cwd)
	mustExec(t, sess, "cd /tmp")
	g := Grader{Kind: Cmd}
	want(t, g.Grade(context.Background(), Subject{Verify: "test -f ok", Session: sess}), Cmd, false, 0, "")
	want(t, g.Grade(context.Background(), Subject{Verify: "test -f ok", Session: sess, Dir: cwd}), Cmd, true, 1, "")
	if got := strings.TrimSpace(mustExec(t, sess, "pwd").Stdout); got != "/tmp" {
		t.Errorf("after grading in the row's folder the shell is in %q, want /tmp", got)
	}
	// A folder that is gone is a fail, not a run elsewhere.
	want(t, g.Grade(context.Background(), Subject{Verify: "true", Session: sess, Dir: filepath.Join(cwd, "gone")}), Cmd, false, 0, "")
}

func TestCmdGraderFailures(t *testing.T) {
	g := Grader{Kind: Cmd}
	want(t, g.Grade(context.Background(), Subject{Verify: "true"}), Cmd, false, 0, "no sandbox session")

	sess := openLocal(t, false, "")
	if err := sess.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	want(t, g.Grade(context.Background(), Subject{Verify: "true", Session: sess}), Cmd, false, 0, "verify: sandbox:")

	sess = openLocal(t, false, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	want(t, g.Grade(ctx, Subject{Verify: "true", Session: sess}), Cmd, false, 0, "verify: sandbox:")
}

func TestAnswerGraders(t *testing.T) {
	for _, c := range []struct {
		kind, final, answer string
		passed              bool
		err                 string
	}{
		{Exact, "Paris", "Paris", true, ""},
		{Exact, "  Paris.\n", "Paris", true, ""},
		{Exact, "<think>maybe Lyon</think>Answer: Paris", "Paris", true, ""},
		{Exact, "The capital is Paris.", "Paris", false, ""},
		{Exact, "paris", "Paris", false, ""},
		{Exact, `so it is \boxed{x^2 + 1}`, "x^2 + 1", true, ""},
		{Contains, "The capital of France is PARIS, of course.", "paris", true, ""},
		{Contains, "The capital of\nFrance   is Paris", "France is Paris", true, ""},
		{Contains, "<think>Paris?</think>It is Lyon.", "Paris", false, ""},
		{Regex, "The result is 0x2A.", `0x[0-9A-F]+`, true, ""},
		{Regex, "The result is 42.", `^0x`, false, ""},
		{Regex, "x", `(unclosed`, false, "not a regular expression"},
		{Number, "42", "42", true, ""},
		{Number, "42.0", "42", true, ""},
		{Number, "The total is $1,234.", "1234", true, ""},
		{Number, "1234", "$1,234", true, ""},
		{Number, `Thus \boxed{42}.`, "42", true, ""},
		{Number, `\boxed{\frac{3}{4}}`, "0.75", true, ""},
		{Number, "Answer: 3/4", "0.75", true, ""},
		{Number, "We get 7 apples then 5.\nAnswer: 12", "12", true, ""},
		{Number, "Step 1: 40\nStep 2: 2\n#### 42", "42", true, ""},
		{Number, "**Final Answer:** 42", "42", true, ""},
		{Number, "Answer: 41", "42", false, ""},
		{Number, "Answer: 42.0000000001", "42", true, ""},
		{Number, "Answer: 42.01", "42", false, ""},
		{Number, "Answer: -5", "-5", true, ""},
		{Number, "Answer: 1.5e3", "1500", true, ""},
		{Number, "I do not know.", "42", false, ""},
		{Number, "42", "forty-two", false, "holds no number"},
	} {
		g := Grader{Kind: c.kind}.Grade(context.Background(), Subject{Final: c.final, Answer: c.answer})
		t.Run(c.kind+"/"+c.final, func(t *testing.T) {
			want(t, g, c.kind, c.passed, map[bool]float64{true: 1}[c.passed], c.err)
		})
	}
	// Tolerance is relative past 1.
	g := Grader{Kind: Number, Tolerance: 0.01}.Grade(context.Background(), Subject{Final: "Answer: 1005", Answer: "1000"})
	want(t, g, Number, true, 1, "")
	g = Grader{Kind: Number, Tolerance: 0.01}.Grade(context.Background(), Subject{Final: "Answer: 1011", Answer: "1000"})
	want(t, g, Number, false, 0, "")
}

func TestFinalAnswer(t *testing.T) {
	for in, want := range map[string]string{
		"42":                         "42",
		"Reasoning...\nAnswer: 42":   "42",
		"answer: a\nFinal answer: b": "b",
		`\boxed{1} then \boxed{{2}}`: "{2}",
		`\boxed{unclosed`:            `\boxed{unclosed`,
		"<think>Answer: 1</think> 2": "2",
		"<think>never closed":        "",
		"#### 7":                     "7",
		"> **Answer**: 9":            "9",
	} {
		if got := FinalAnswer(in); got != want {
			t.Errorf("FinalAnswer(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseNumber(t *testing.T) {
	for in, want := range map[string]float64{
		"42": 42, "42.0": 42, "-3": -3, "−3": -3, "$1,234": 1234, "1,234,567.5": 1234567.5, "1.5e3": 1500,
		"50%": 50, `50\%`: 50, "3/4": 0.75, `\frac{3}{4}`: 0.75, `\dfrac{1}{8}`: 0.125, "x = 2, y = 7": 7,
		".5": 0.5, `1\,000`: 1000, "$-2$": -2,
	} {
		got, ok := ParseNumber(in)
		if !ok || got != want {
			t.Errorf("ParseNumber(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "none", "1/0", "n/a"} {
		if v, ok := ParseNumber(in); ok {
			t.Errorf("ParseNumber(%q) = %v, want no number", in, v)
		}
	}
}

// script writes an executable shell script into a temporary folder.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "judge.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExecGrader(t *testing.T) {
	rec := []byte(`{"key":"r1","conversations":[{"from":"gpt","value":"the answer is 42"}]}`)
	ctx := context.Background()
	for _, c := range []struct {
		name, body string
		passed     bool
		value      float64
		err        string
	}{
		{"reads the record on stdin", `if grep -q 'answer is 42' ; then echo '{"reward": 1}'; else echo '{"reward": 0}'; fi`, true, 1, ""},
		{"reads the row's answer", `cat >/dev/null; [ "$HERMES_PIPE_ANSWER" = 42 ] && echo '{"reward": 0.7}'`, true, 0.7, ""},
		{"passed given", `echo judging >&2; echo '{"reward": 0.7, "passed": false}'`, false, 0.7, ""},
		{"reward 0 is a fail", `echo '{"reward": 0}'`, false, 0, ""},
		{"non-zero exit", `echo '{"reward": 1}'; exit 3`, false, 0, "exit status 3"},
		{"no reward line", `echo 'looks fine to me'`, false, 0, "not {\"reward\": number}"},
		{"reward not a number", `echo '{"reward": null}'`, false, 0, "not {\"reward\": number}"},
		{"timeout kills its children", `sleep 60 & wait`, false, 0, "timed out"},
		{"megabytes of output before the reward line", `cat >/dev/null; head -c 3000000 /dev/zero | tr '\0' a; echo; echo '{"reward": 0.5}'`, true, 0.5, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := Grader{Exec: script(t, c.body), Timeout: 20 * time.Second}
			if c.err == "timed out" {
				g.Timeout = 300 * time.Millisecond
			}
			gr := g.Grade(ctx, Subject{Answer: "42", Record: rec})
			want(t, gr, Exec, c.passed, c.value, c.err)
		})
	}
	gr := Grader{Exec: filepath.Join(t.TempDir(), "gone")}.Grade(ctx, Subject{Record: rec})
	want(t, gr, Exec, false, 0, "no such file")
}

func TestTail(t *testing.T) {
	if got := Tail("  short \n", 10); got != "short" {
		t.Errorf("Tail = %q", got)
	}
	got := Tail(strings.Repeat("é", 100), 9)
	if got != "…"+strings.Repeat("é", 4) {
		t.Errorf("Tail cut a rune: %q", got)
	}
}
