package swe

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// Outcomes of a graded task. They are final: --resume does not run them
// again. Infrastructure failures use the retryable schemas outcomes
// (sandbox_error, api_error, internal_error) and count as "error".
const (
	OutcomeResolved   schemas.Outcome = "resolved"    // every FAIL_TO_PASS and PASS_TO_PASS test passes
	OutcomeUnresolved schemas.Outcome = "unresolved"  // a listed test fails, the patch does not apply, or the agent gave up
	OutcomeEmptyPatch schemas.Outcome = "empty_patch" // the agent changed nothing
)

// Outcomes lists the outcomes this mode adds to the schemas ones, for
// pipeline.OutputOptions.Outcomes.
var Outcomes = []schemas.Outcome{OutcomeResolved, OutcomeUnresolved, OutcomeEmptyPatch}

// Defaults of GradeOptions.
const (
	DefaultTestTimeout   = 30 * time.Minute // as the SWE-bench harness
	DefaultGradeOutput   = 8 << 20          // bytes of test log kept per stream
	gradeLogTail         = 4 << 10          // bytes of test log kept in the record
	modelPatchPath       = "/tmp/.hermes-swe-model.patch"
	testPatchPath        = "/tmp/.hermes-swe-test.patch"
	exitModelPatchFailed = 10
	exitTestPatchFailed  = 11
	exitNoRepo           = 12
)

// GradeOptions configure Grade. Driver is required; the zero value of the
// rest means the defaults.
type GradeOptions struct {
	Driver      sandbox.Driver
	RunID       string
	TestTimeout time.Duration // bound of the test command; its passing is a harness error
	MaxOutput   int           // bytes of test output kept per stream
	// Clone makes each session work on a private clone of the task's cwd
	// (which must be a git checkout the driver can read) instead of the cwd
	// itself: the local driver has no fresh image to start from.
	Clone bool
}

// Grade is the verdict on one patch.
type Grade struct {
	Outcome    schemas.Outcome `json:"outcome"`
	Reason     string          `json:"reason,omitempty"`
	GradedBy   string          `json:"graded_by"`
	Tests      *TestResults    `json:"tests_status,omitempty"`
	TestExit   *int            `json:"test_exit_code,omitempty"`
	LogTail    string          `json:"test_log_tail,omitempty"`
	LogCut     bool            `json:"test_log_truncated,omitempty"`
	ApplyLog   string          `json:"apply_log,omitempty"`
	StartMS    int64           `json:"container_start_ms"`
	ApplyMS    int64           `json:"apply_ms"`
	TestMS     int64           `json:"test_ms"`
	TeardownMS int64           `json:"teardown_ms"`
	TotalMS    int64           `json:"total_ms"`
}

// GraderName is the grader of a swe record's grade member (and of `swe
// regrade`'s grades).
const GraderName = "swe"

// Record is g as a record's grade (schemas.Grade, with the reward it
// gives): 1 for resolved, 0 for unresolved or an empty patch; an
// environment failure (outcome error) is no verdict on the patch, so its
// reward is null and Error says why. durationMS is what grading took.
func (g Grade) Record(durationMS int64) schemas.Grade {
	gr := schemas.Grade{Grader: GraderName, Output: g.LogTail, DurationMS: durationMS}
	switch g.Outcome {
	case OutcomeResolved, OutcomeUnresolved, OutcomeEmptyPatch:
		passed, value := g.Outcome == OutcomeResolved, 0.0
		if passed {
			value = 1
		} else {
			gr.Output = string(g.Outcome)
			if g.Reason != "" {
				gr.Output += ": " + g.Reason
			}
			if g.LogTail != "" {
				gr.Output += "\n" + g.LogTail
			}
		}
		gr.Passed, gr.Value = &passed, &value
	default:
		gr.Error = fmt.Sprintf("%s: %s", g.Outcome, g.Reason)
	}
	return gr
}

// GradePatch judges patch against task in a fresh session of the task's
// image: it writes the patch and the task's test patch, applies the patch,
// resets the files the test patch touches to the base commit (so edits the
// agent made to tests do not count), applies the test patch, runs the test
// command with the timeout and reads per-test results. An empty patch is
// judged without a session. Infrastructure failures (the session cannot be
// opened, a harness command fails, the tests time out, the test patch does
// not apply) give outcome sandbox_error; the verdict never depends on the
// agent's session. It blocks for the whole grading: a container start,
// about three commands and the tests.
func GradePatch(ctx context.Context, o GradeOptions, t Task, patch string) (g Grade) {
	start := time.Now()
	g.GradedBy = t.Graded()
	defer func() { g.TotalMS = time.Since(start).Milliseconds() }()
	if strings.TrimSpace(patch) == "" {
		g.Outcome, g.Reason = OutcomeEmptyPatch, "the agent's patch is empty"
		return g
	}
	if g.GradedBy == "submission" {
		g.Outcome = OutcomeResolved
		return g
	}
	if o.TestTimeout <= 0 {
		o.TestTimeout = DefaultTestTimeout
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = DefaultGradeOutput
	}
	infra := func(format string, a ...any) Grade {
		g.Outcome, g.Reason = schemas.OutcomeSandboxError, fmt.Sprintf(format, a...)
		return g
	}
	sess, err := o.Driver.Open(ctx, sandbox.Spec{
		RunID:     o.RunID,
		RolloutID: t.InstanceID + "-grade",
		Image:     t.Image,
		Cwd:       sessionCwd(t, o.Clone),
		ReadOnly:  cloneSource(t, o.Clone),
		Env:       withEnv(nil, t.Environment),
		Timeout:   o.TestTimeout,
		MaxOutput: o.MaxOutput,
	})
	g.StartMS = time.Since(start).Milliseconds()
	if err != nil {
		return infra("grade: open a fresh session: %v", err)
	}
	defer func() {
		t0 := time.Now()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := sess.Close(cctx); err != nil && g.Outcome != schemas.OutcomeSandboxError {
			g.Outcome, g.Reason = schemas.OutcomeSandboxError, fmt.Sprintf("grade: close session: %v", err)
		}
		g.TeardownMS = time.Since(t0).Milliseconds()
	}()

	t0 := time.Now()
	if err := writeFiles(ctx, sess, file{modelPatchPath, []byte(patch)}, file{testPatchPath, []byte(t.TestPatch)}); err != nil {
		return infra("grade: write patches: %v", err)
	}
	script := applyScript(t, o.Clone)
	res, err := sess.Exec(ctx, sandbox.Cmd{Command: script, Timeout: helperTime})
	g.ApplyMS = time.Since(t0).Milliseconds()
	if err != nil {
		return infra("grade: apply patches: %v", err)
	}
	g.ApplyLog = tail(res.Stdout+res.Stderr, 2000)
	switch {
	case res.TimedOut:
		return infra("grade: applying the patches timed out after %s", helperTime)
	case res.ExitCode == exitModelPatchFailed:
		g.Outcome, g.Reason = OutcomeUnresolved, "the patch does not apply: "+tail(res.Stderr, 300)
		return g
	case res.ExitCode == exitTestPatchFailed:
		return infra("grade: the task's test patch does not apply on its base commit: %s", tail(res.Stderr, 300))
	case res.ExitCode == exitNoRepo:
		return infra("grade: %s", tail(res.Stderr, 300))
	case res.ExitCode == exitNoTestProgram, res.ExitCode == exitNoTestScript:
		return infra("grade: %s", cannotTest(t, o.Clone, res.ExitCode))
	case res.ExitCode != 0:
		return infra("grade: apply patches: exit %d: %s", res.ExitCode, tail(res.Stderr, 300))
	}

	t0 = time.Now()
	cmd := t.TestCmd // the apply script left the shell at the repository's top
	if t.Cwd != "" && !o.Clone {
		cmd = "cd " + q(t.Cwd) + " && " + cmd
	}
	res, err = sess.Exec(ctx, sandbox.Cmd{Command: cmd, Timeout: o.TestTimeout})
	g.TestMS = time.Since(t0).Milliseconds()
	if err != nil {
		return infra("grade: run tests: %v", err)
	}
	log := res.Stdout
	if res.Stderr != "" {
		log += "\n" + res.Stderr
	}
	g.LogTail, g.LogCut = tail(log, gradeLogTail), res.Truncated
	if res.TimedOut {
		return infra("grade: the test command timed out after %s (harness timeout; raise --test-timeout)", o.TestTimeout)
	}
	exit := res.ExitCode
	g.TestExit = &exit
	if g.GradedBy == "exit_code" {
		if exit == 0 {
			g.Outcome = OutcomeResolved
		} else {
			g.Outcome, g.Reason = OutcomeUnresolved, fmt.Sprintf("the test command exited %d", exit)
		}
		return g
	}
	tr, ok := Judge(ParseTestLog(log), t.FailToPass, t.PassToPass)
	g.Tests = &tr
	if ok {
		g.Outcome = OutcomeResolved
		return g
	}
	var why []string
	if n := len(tr.FailToPass.Failure); n > 0 {
		why = append(why, fmt.Sprintf("%d of %d FAIL_TO_PASS tests fail (%s)", n, len(t.FailToPass), short(tr.FailToPass.Failure)))
	}
	if n := len(tr.PassToPass.Failure); n > 0 {
		why = append(why, fmt.Sprintf("%d of %d PASS_TO_PASS tests fail (%s)", n, len(t.PassToPass), short(tr.PassToPass.Failure)))
	}
	g.Outcome, g.Reason = OutcomeUnresolved, strings.Join(why, "; ")
	if g.LogCut {
		g.Reason += " (the test log was cut by the output limit)"
	}
	return g
}

func short(names []string) string {
	if len(names) <= 3 {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:3], ", ") + fmt.Sprintf(", … %d more", len(names)-3)
}

// applyScript applies the model patch, resets the files the test patch
// touches to the base commit, and applies the test patch, as the SWE-bench
// evaluation script does, and then checks that the test command can run
// (testCheck). Exit codes: 10 model patch, 11 test patch, 12 no
// repository, 13 no test program, 14 no test script.
func applyScript(t Task, clone bool) string {
	ref := t.BaseCommit
	if ref == "" {
		ref = "HEAD"
	}
	var b strings.Builder
	switch {
	case clone:
		fmt.Fprintf(&b, "%s || exit %d\n", cloneScript(t), exitNoRepo)
	case t.Cwd != "":
		fmt.Fprintf(&b, "cd %s || exit %d\n", q(t.Cwd), exitNoRepo)
	}
	fmt.Fprintf(&b, "%s || exit %d\n", ensureRepo, exitNoRepo)
	fmt.Fprintf(&b, "cd \"$(git rev-parse --show-toplevel)\" || exit %d\n", exitNoRepo)
	fmt.Fprintf(&b, "git apply -v --whitespace=nowarn %s || git apply -v --whitespace=nowarn --ignore-whitespace --recount %s || exit %d\n",
		modelPatchPath, modelPatchPath, exitModelPatchFailed)
	if strings.TrimSpace(t.TestPatch) != "" {
		for _, f := range patchFiles(t.TestPatch) {
			fmt.Fprintf(&b, "git checkout -q %s -- %s 2>/dev/null || rm -rf -- %s\n", q(ref), q(f), q(f))
		}
		fmt.Fprintf(&b, "git apply -v --whitespace=nowarn %s || exit %d\n", testPatchPath, exitTestPatchFailed)
	}
	if chk := testCheck(t); chk != "" {
		// In the folder the tests run in (GradePatch), in a subshell so
		// the shell stays at the repository's top.
		b.WriteString("(\n")
		if t.Cwd != "" && !clone {
			fmt.Fprintf(&b, "cd %s || exit %d\n", q(t.Cwd), exitNoRepo)
		}
		fmt.Fprintf(&b, "%s) || exit $?\n", chk)
	}
	return b.String()
}

// ensureRepo makes the current folder a git repository with one commit when
// it is not inside one, so simple tasks over plain folders have a base to
// diff against. Agent and grading sessions run it alike.
const ensureRepo = `{ git rev-parse --git-dir >/dev/null 2>&1 || { git init -q && git add -A && git -c user.name=hermes-pipe -c user.email=hermes-pipe@localhost commit -q --allow-empty -m base; }; }`

// cloneDir is the clone's folder inside a session's private folder.
const cloneDir = "repo"

// sessionCwd is where a session of t starts: the task's cwd, or the
// session's private folder when it works on a clone.
func sessionCwd(t Task, clone bool) string {
	if clone {
		return ""
	}
	return t.Cwd
}

// cloneSource is the host folder a cloning session reads the repository
// from, so a confined local sandbox mounts it read-only.
func cloneSource(t Task, clone bool) []string {
	if !clone || t.Cwd == "" {
		return nil
	}
	return []string{t.Cwd}
}

// cloneScript clones the task's repository into the session's private
// folder at the base commit and enters it.
func cloneScript(t Task) string {
	if t.Cwd == "" {
		// A simple task over no folder starts from an empty one.
		return "{ mkdir -p " + cloneDir + " && cd " + cloneDir + "; }"
	}
	// A missing folder and one that is not a checkout are said so: the
	// task's environment is wrong, which clone's own message hides.
	s := "if ! [ -d " + q(t.Cwd) + " ]; then echo " + q("the task's repository "+t.Cwd+" is missing") + " >&2; false; " +
		"elif ! [ -e " + q(t.Cwd+"/.git") + " ]; then echo " + q("the task's cwd "+t.Cwd+" is not a git checkout (with --sandbox local or ssh a task's cwd must be one, at its base commit)") + " >&2; false; " +
		"else git clone -q --no-hardlinks " + q(t.Cwd) + " " + cloneDir + " && cd " + cloneDir
	if t.BaseCommit != "" {
		s += " && { git checkout -q " + q(t.BaseCommit) + " || { echo " + q("the task's repository "+t.Cwd+" lacks its base commit "+t.BaseCommit) + " >&2; false; }; }"
	}
	return "{ " + s + "; fi; }"
}
