package grade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// The grader kinds (--grader).
const (
	Cmd      = "cmd"      // the row's verify command in the rollout's session
	Exact    = "exact"    // the final answer equals the row's answer
	Contains = "contains" // the final message contains the row's answer
	Regex    = "regex"    // the row's answer, a regular expression, matches the final message
	Number   = "number"   // the final answer's number equals the row's, within Tolerance
	Exec     = "exec"     // an executable on the host reads the record and prints the reward
)

// Kinds lists the grader kinds in the order --help shows them.
var Kinds = []string{Cmd, Exact, Contains, Regex, Number, Exec}

// Defaults of Grader.
const (
	DefaultTimeout   = 5 * time.Minute
	DefaultTolerance = 1e-6
	// OutputTail is how many bytes of a grader's output a grade keeps (the
	// end, where a test runner prints its summary).
	OutputTail = 4 << 10
)

// Grader is one run's grading choice. The zero value grades every row by
// what it carries: cmd for a row with verify, else for a row with answer
// number when the answer is a number and exact otherwise.
type Grader struct {
	// Kind is one of Kinds, or "" for the choice per row described above.
	Kind string
	// Timeout bounds one grading (a verify command, an exec grader); 0 =
	// DefaultTimeout.
	Timeout time.Duration
	// Exec is the host executable of the exec grader (Kind Exec, or ""
	// with Exec set, which means Exec).
	Exec string
	// Tolerance of the number grader: a pass when |got-want| <=
	// Tolerance*max(1, |want|); 0 = DefaultTolerance.
	Tolerance float64
}

// Parse checks a --grader value and returns its canonical form ("" stays "":
// the choice per row).
func Parse(kind string) (string, error) {
	k := strings.ToLower(strings.TrimSpace(kind))
	if k == "" {
		return "", nil
	}
	for _, n := range Kinds {
		if k == n {
			return k, nil
		}
	}
	return "", fmt.Errorf("unknown grader %q: want one of %s", kind, strings.Join(Kinds, ", "))
}

// Check validates g before a run starts: a known kind, an exec grader with an
// executable file (it stats it) and no executable for another kind, no
// negative bound.
func (g Grader) Check() error {
	k, err := Parse(g.Kind)
	if err != nil {
		return err
	}
	switch {
	case k == Exec && g.Exec == "":
		return errors.New("grader exec needs an executable (--grader-exec PATH)")
	case g.Exec != "" && k != "" && k != Exec:
		return fmt.Errorf("--grader-exec is the exec grader; --grader %s does not use it", k)
	case g.Timeout < 0:
		return errors.New("grader timeout must not be negative")
	case g.Tolerance < 0:
		return errors.New("grader tolerance must not be negative")
	}
	if g.Exec != "" {
		fi, err := os.Stat(g.Exec)
		switch {
		case err != nil:
			return fmt.Errorf("--grader-exec: %w", err)
		case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
			return fmt.Errorf("--grader-exec %s: not an executable file", g.Exec)
		}
	}
	return nil
}

// Subject is what one grading sees.
type Subject struct {
	// Verify and Answer are the row's verify command and expected answer.
	Verify, Answer string
	// Final is the model's final message (its last assistant turn's
	// content); <think> blocks in it are ignored.
	Final string
	// Record is the record as JSON, the exec grader's stdin.
	Record []byte
	// Session is the rollout's sandbox session, still open (the cmd
	// grader runs in it); Dir, when set, is the folder the verify command
	// starts in (the row's cwd), else the folder the session's shell is in.
	Session sandbox.Session
	Dir     string
}

// KindFor returns the kind of grader g uses for s, or "" when s has nothing
// to grade (the record then keeps reward null and no grade): cmd needs a
// verify command, the answer graders an answer; exec grades every record.
func (g Grader) KindFor(s Subject) string {
	k, err := Parse(g.Kind)
	if err != nil {
		return ""
	}
	if k == "" && g.Exec != "" {
		k = Exec
	}
	switch k {
	case "":
		switch {
		case s.Verify != "":
			return Cmd
		case s.Answer == "":
			return ""
		case isNumber(s.Answer):
			return Number
		default:
			return Exact
		}
	case Cmd:
		if s.Verify == "" {
			return ""
		}
	case Exact, Contains, Regex, Number:
		if s.Answer == "" {
			return ""
		}
	}
	return k
}

// Grade judges s and returns the verdict. It never panics: a grader that
// fails (crash, timeout, driver error, unusable output, a panic in a
// grader) gives Passed and Value nil with Error set. A Subject with nothing
// to grade (KindFor "") gives Error "nothing to grade" and an empty Grader.
// It blocks for at most about Timeout plus a few seconds: the cmd and exec
// graders run one command each, the answer graders only compare strings.
func (g Grader) Grade(ctx context.Context, s Subject) (gr schemas.Grade) {
	start := time.Now()
	kind := g.KindFor(s)
	gr.Grader = kind
	defer func() {
		if p := recover(); p != nil {
			gr.Passed, gr.Value, gr.Error = nil, nil, fmt.Sprintf("grader %s panicked: %v", kind, p)
		}
		gr.Output = Tail(gr.Output, OutputTail)
		gr.DurationMS = time.Since(start).Milliseconds()
	}()
	if kind == "" {
		gr.Error = "nothing to grade"
		return gr
	}
	timeout := g.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	tol := g.Tolerance
	if tol <= 0 {
		tol = DefaultTolerance
	}
	var v verdict
	switch kind {
	case Cmd:
		v = runVerify(ctx, s, timeout)
	case Exec:
		v = runExec(ctx, g.Exec, s, timeout)
	default:
		v = compare(kind, s.Final, s.Answer, tol)
	}
	gr.Output, gr.Error = v.output, v.err
	if v.err == "" {
		passed, value := v.passed, v.value
		gr.Passed, gr.Value = &passed, &value
	}
	return gr
}

// verdict is what one grader found; err != "" means no verdict.
type verdict struct {
	passed bool
	value  float64
	output string
	err    string
}

func passFail(passed bool, output string) verdict {
	v := verdict{passed: passed, output: output}
	if passed {
		v.value = 1
	}
	return v
}

// Tail returns at most the last n bytes of s, trimmed of surrounding space,
// cut at a rune boundary and marked with "…" when cut.
func Tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for i := 0; i < len(s) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(s[i]) {
			return "…" + s[i:]
		}
	}
	return "…" + s
}

// Graded says whether a rollout that ended with outcome is graded (by
// generate's rollouts and by regrade alike): the agent
// stopped by itself (completed) or a limit of the run stopped it
// (max_turns, partial, budget_exceeded) with its session intact, so what it
// left is judged as it is. A rollout whose deadline passed (timeout) is not:
// its budget of time is spent and its last command was cut; nor one that
// failed (api_error, sandbox_error, error) or was paused (budget_paused),
// which --resume runs again. Those keep reward null and no grade.
func Graded(o schemas.Outcome) bool {
	switch o {
	case schemas.OutcomeCompleted, schemas.OutcomeMaxTurns, schemas.OutcomePartial, schemas.OutcomeBudgetExceeded:
		return true
	}
	return false
}
