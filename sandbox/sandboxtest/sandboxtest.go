package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// Caps says what a driver can do, so that Run checks only what is meaningful.
type Caps struct {
	// Shell is true for drivers running commands in a real POSIX shell
	// (local, docker, ssh). When false (fake) only the session life-cycle
	// tests run; the driver must then treat "sleep N" as blocking for N
	// seconds or until ctx is cancelled.
	Shell bool

	// SharedHost is true when sessions run as the same user on one host
	// (local, ssh): isolation is then checked by private working folders,
	// not by absolute paths being unreachable.
	SharedHost bool

	// Spec is the base of every Spec the suite opens (Image for docker, ...).
	// RolloutID, RunID, Timeout and MaxOutput are set by the suite.
	Spec sandbox.Spec

	// Cwd is an existing folder the driver can start a session in (e.g.
	// "/tmp"); "" skips the starting-folder test.
	Cwd string

	// AfterClose, when set, checks with driver-specific means that a closed
	// session left nothing behind (folder, container, processes). It gets the
	// Spec the session was opened with.
	AfterClose func(t *testing.T, spec sandbox.Spec, s sandbox.Session)

	// Confined is true for drivers that confine commands (their own view of
	// processes, files and network): the escape battery (Escape/..., see
	// escape.go) then runs. It reads the host's /proc, home folder and
	// loopback from the test process, so the driver's commands must run on
	// this machine or somewhere those probes are moot (a container).
	Confined bool

	// MaxProcs is the process limit of a confined session; 0 means none
	// is set and skips the fork-bomb probe (it would take the machine down).
	MaxProcs int

	// MaxFileSize is the file-size limit of a confined session in bytes
	// (RLIMIT_FSIZE or equivalent); 0 means none is set and skips the
	// fill-the-disk probe (Escape/FillDisk).
	MaxFileSize int64

	// LongLivedShell is true for drivers that keep one shell per session, so
	// that shell functions defined by one command are there in the next; the
	// fresh-shell design restores only the working folder and environment,
	// and the Persistence/Function case runs only when this is set.
	LongLivedShell bool

	// Aliases is true when an alias defined by one command expands in the
	// next (a long-lived shell with alias expansion on); it gates the
	// Persistence/Alias case.
	Aliases bool
}

var seq atomic.Int64

// Run runs the conformance suite as subtests of t. open returns the driver
// under test; it is called once per subtest (it may return a shared driver).
// Subtests run in parallel where they can; the whole suite needs a few
// seconds beyond the cost of opening sessions.
func Run(t *testing.T, open func(t *testing.T) sandbox.Driver, caps Caps) {
	s := &suite{open: open, caps: caps}
	t.Run("Lifecycle", func(t *testing.T) {
		t.Run("CloseTwice", s.closeTwice)
		t.Run("ExecAfterClose", s.execAfterClose)
		t.Run("CancelStopsCommand", s.cancelStopsCommand)
		t.Run("CloseLeavesNothing", s.closeLeavesNothing)
		t.Run("ConcurrentSessions", s.concurrentSessions)
	})
	t.Run("Files", s.runFiles)
	if !caps.Shell {
		return
	}
	t.Run("Shell", func(t *testing.T) {
		t.Run("ExitCodes", s.exitCodes)
		t.Run("StartAhead", s.startAhead)
		t.Run("StatePersists", s.statePersists)
		t.Run("StateSurvivesExit", s.stateSurvivesExit)
		t.Run("SpecEnvAndCwd", s.specEnvAndCwd)
		t.Run("Stderr", s.stderr)
		t.Run("TimeoutKillsTree", s.timeoutKillsTree)
		t.Run("BackgroundDoesNotBlock", s.backgroundDoesNotBlock)
		t.Run("HugeOutput", s.hugeOutput)
		t.Run("HugeOutputRunes", s.hugeOutputRunes)
		t.Run("BinaryOutput", s.binaryOutput)
		t.Run("Isolation", s.isolation)
		t.Run("CancelKillsTree", s.cancelKillsTree)
		t.Run("NoSecretsInEnv", s.noSecretsInEnv)
	})
	t.Run("Persistence", s.runPersistence)
	if caps.Confined {
		t.Run("Escape", s.runEscape)
	}
}

type suite struct {
	open func(t *testing.T) sandbox.Driver
	caps Caps
}

// spec returns a fresh Spec for one session.
func (s *suite) spec(t *testing.T) sandbox.Spec {
	sp := s.caps.Spec
	sp.Env = maps.Clone(sp.Env)
	sp.RunID = "sandboxtest"
	sp.RolloutID = fmt.Sprintf("%s-%d-%d", sandbox.SafeName(t.Name()), time.Now().UnixNano()%1e6, seq.Add(1))
	if sp.Timeout == 0 {
		// Generous, below run's 60 s budget: a loaded machine may need
		// seconds to move the suite's 10 MiB outputs; tests that want a
		// timeout set their own.
		sp.Timeout = 50 * time.Second
	}
	return sp
}

// session opens a session with sp and closes it when the test ends.
func (s *suite) session(t *testing.T, sp sandbox.Spec) sandbox.Session {
	t.Helper()
	d := s.open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := d.Open(ctx, sp)
	if err != nil {
		t.Fatalf("Open(%+v): %v", sp, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := sess.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return sess
}

// run executes cmd and fails the test on a driver error.
func run(t *testing.T, sess sandbox.Session, cmd string, timeout time.Duration) sandbox.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := sess.Exec(ctx, sandbox.Cmd{Command: cmd, Timeout: timeout})
	if err != nil {
		t.Fatalf("Exec(%q): %v", cmd, err)
	}
	if !utf8.ValidString(res.Stdout) || !utf8.ValidString(res.Stderr) {
		t.Fatalf("Exec(%q): output is not valid UTF-8", cmd)
	}
	return res
}

// want runs cmd and checks its exit code and trimmed stdout.
func want(t *testing.T, sess sandbox.Session, cmd string, code int, stdout string) {
	t.Helper()
	res := run(t, sess, cmd, 0)
	if res.ExitCode != code || strings.TrimSpace(res.Stdout) != stdout {
		t.Fatalf("Exec(%q) = exit %d stdout %q stderr %q; want exit %d stdout %q",
			cmd, res.ExitCode, res.Stdout, res.Stderr, code, stdout)
	}
}

func (s *suite) closeTwice(t *testing.T) {
	t.Parallel()
	sess := s.session(t, s.spec(t))
	ctx := context.Background()
	if err := sess.Close(ctx); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := sess.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func (s *suite) execAfterClose(t *testing.T) {
	t.Parallel()
	sess := s.session(t, s.spec(t))
	if err := sess.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err := sess.Exec(context.Background(), sandbox.Cmd{Command: "true"})
	if !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("Exec after Close: err = %v, want errors.Is(err, sandbox.ErrClosed)", err)
	}
}

func (s *suite) cancelStopsCommand(t *testing.T) {
	t.Parallel()
	sess := s.session(t, s.spec(t))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	done := make(chan error, 1)
	go func() {
		_, err := sess.Exec(ctx, sandbox.Cmd{Command: "sleep 1000"})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Exec after cancel: err = %v, want errors.Is(err, context.Canceled)", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Exec of `sleep 1000` still running 60 s after its ctx was cancelled")
	}
}

func (s *suite) closeLeavesNothing(t *testing.T) {
	t.Parallel()
	sp := s.spec(t)
	sess := s.session(t, sp)
	if s.caps.Shell {
		run(t, sess, "echo data > file.txt; mkdir -p sub/dir", 0)
	}
	if err := sess.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if s.caps.AfterClose == nil {
		t.Skip("driver gave no AfterClose check")
	}
	s.caps.AfterClose(t, sp, sess)
}

func (s *suite) concurrentSessions(t *testing.T) {
	t.Parallel()
	const n = 6
	var wg sync.WaitGroup
	for i := range n {
		sess := s.session(t, s.spec(t))
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for j := range 3 {
				cmd := "true"
				if s.caps.Shell {
					cmd = fmt.Sprintf("export N=%d; echo $N-%d", i, j)
				}
				res, err := sess.Exec(ctx, sandbox.Cmd{Command: cmd})
				if err != nil {
					t.Errorf("session %d: Exec: %v", i, err)
					return
				}
				if s.caps.Shell && strings.TrimSpace(res.Stdout) != fmt.Sprintf("%d-%d", i, j) {
					t.Errorf("session %d: got %q", i, res.Stdout)
				}
			}
		}()
	}
	wg.Wait()
}

func (s *suite) exitCodes(t *testing.T) {
	t.Parallel()
	sess := s.session(t, s.spec(t))
	want(t, sess, "true", 0, "")
	want(t, sess, "false", 1, "")
	want(t, sess, "echo out; exit 7", 7, "out")
	want(t, sess, "(exit 3)", 3, "")
	want(t, sess, "sh -c 'exit 42'", 42, "")
	want(t, sess, "no-such-command-xyz", 127, "")
	want(t, sess, "sh -c 'kill -9 $$'", 137, "")
	want(t, sess, "echo still alive", 0, "still alive")
}

func (s *suite) statePersists(t *testing.T) {
	t.Parallel()
	sess := s.session(t, s.spec(t))
	want(t, sess, "cd /tmp && export X=1", 0, "")
	want(t, sess, "pwd; echo $X", 0, "/tmp\n1")
	want(t, sess, `export Y='two words'; Z=plain`, 0, "")
	if s.caps.LongLivedShell { // the shell keeps its unexported variables too
		want(t, sess, `echo "$Y|${Z:-unset}"`, 0, "two words|plain")
	} else {
		want(t, sess, `echo "$Y|${Z:-unset}"`, 0, "two words|unset")
	}
	want(t, sess, `export Q="it's \"quoted\" \$x
line2"`, 0, "")
	res := run(t, sess, `printf '%s' "$Q"`, 0)
	if res.Stdout != "it's \"quoted\" $x\nline2" {
		t.Fatalf("multi-line quoted value came back as %q", res.Stdout)
	}
	want(t, sess, "d=$(mktemp -d) && cd \"$d\" && mkdir -p 'a b' && cd 'a b' && pwd > ../where", 0, "")
	want(t, sess, "test \"$(cat ../where)\" = \"$(pwd)\" && basename \"$(pwd)\"", 0, "a b")
}

func (s *suite) stateSurvivesExit(t *testing.T) {
	t.Parallel()
	sess := s.session(t, s.spec(t))
	want(t, sess, "cd /tmp; export E=after-exit; exit 5", 5, "")
	want(t, sess, "pwd; echo $E", 0, "/tmp\nafter-exit")
	want(t, sess, "set -e; export F=1; false; echo unreachable", 1, "")
	want(t, sess, "echo ${F:-none}", 0, "1")
}

func (s *suite) specEnvAndCwd(t *testing.T) {
	t.Parallel()
	sp := s.spec(t)
	if sp.Env == nil {
		sp.Env = map[string]string{}
	}
	sp.Env["HERMES_SPEC_VAR"] = "from spec"
	if s.caps.Cwd != "" {
		sp.Cwd = s.caps.Cwd
	}
	sess := s.session(t, sp)
	want(t, sess, `echo "$HERMES_SPEC_VAR"`, 0, "from spec")
	if s.caps.Cwd != "" {
		want(t, sess, "pwd", 0, s.caps.Cwd)
	}
	want(t, sess, `test -n "$HOME" && test -n "$PATH" && echo ok`, 0, "ok")
}

func (s *suite) stderr(t *testing.T) {
	t.Parallel()
	sess := s.session(t, s.spec(t))
	res := run(t, sess, "echo to-out; echo to-err >&2; exit 2", 0)
	if res.ExitCode != 2 || strings.TrimSpace(res.Stdout) != "to-out" || strings.TrimSpace(res.Stderr) != "to-err" {
		t.Fatalf("got %+v", res)
	}
	if res.Duration <= 0 {
		t.Fatalf("Duration = %v, want > 0", res.Duration)
	}
}

// timeoutKillsTree checks that a timeout returns 124 with the output printed
// so far, and that a background child started by the command does not live
// on. The commands sleep far longer than run's 60 s budget, so a timeout
// that did not fire fails the test; the 5 s timeout leaves a loaded machine
// time to start the command.
func (s *suite) timeoutKillsTree(t *testing.T) {
	t.Parallel()
	sess := s.session(t, s.spec(t))
	want(t, sess, "cd \"$(mktemp -d)\"", 0, "")
	res := run(t, sess, "echo started; echo progress >&2; sh -c 'echo $$ > child.pid; exec sleep 1000' & sleep 1000 & sleep 1000", 5*time.Second)
	if res.ExitCode != 124 || !res.TimedOut {
		t.Fatalf("timed-out command: exit %d TimedOut %v, want 124 true", res.ExitCode, res.TimedOut)
	}
	if !strings.Contains(res.Stdout, "started") || !strings.Contains(res.Stderr, "progress") {
		t.Fatalf("partial output lost: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	waitGone(t, sess, "child.pid")
	want(t, sess, "echo usable", 0, "usable")
}

// waitGone polls through the session until the process whose pid is in
// pidFile is dead or a zombie, and fails t if it still runs after 30 s. A
// missing pid file means the process never started, which passes.
func waitGone(t *testing.T, sess sandbox.Session, pidFile string) {
	t.Helper()
	check := `[ -s ` + pidFile + ` ] || { echo never-started; exit 0; }; p=$(cat ` + pidFile + `); ` +
		`if [ -r /proc/$p/stat ] && ! grep -q '^[0-9]* ([^)]*) Z' /proc/$p/stat; then echo alive; else echo gone; fi`
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out := strings.TrimSpace(run(t, sess, check, 0).Stdout)
		if out != "alive" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the process of %s still runs 30 s after it should have been killed", pidFile)
		}
	}
}

// backgroundDoesNotBlock checks that a background job holding stdout does
// not keep Exec waiting after the command's shell ended (run's 60 s budget
// fails the test long before the job's 1000 s).
func (s *suite) backgroundDoesNotBlock(t *testing.T) {
	t.Parallel()
	sess := s.session(t, s.spec(t))
	res := run(t, sess, "sleep 1000 & echo done", 0)
	if res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "done" {
		t.Fatalf("got %+v", res)
	}
}

func (s *suite) hugeOutput(t *testing.T) {
	t.Parallel()
	sp := s.spec(t)
	sp.MaxOutput = 64 << 10
	sess := s.session(t, sp)
	// 10 MiB on stdout, 1 MiB on stderr, each line numbered so head and tail
	// can be told apart.
	res := run(t, sess, "yes abcdefghijklmnopqrstuvwxyz | head -c 10485760; echo; echo END; yes err | head -c 1048576 >&2", 0)
	if res.ExitCode != 0 || !res.Truncated {
		t.Fatalf("exit %d Truncated %v, want 0 true", res.ExitCode, res.Truncated)
	}
	for name, out := range map[string]string{"stdout": res.Stdout, "stderr": res.Stderr} {
		if len(out) > sp.MaxOutput+200 {
			t.Fatalf("%s kept %d bytes, limit %d", name, len(out), sp.MaxOutput)
		}
		if !strings.Contains(out, "truncated") {
			t.Fatalf("%s has no truncation marker", name)
		}
	}
	if !strings.HasPrefix(res.Stdout, "abcdefghijklmnopqrstuvwxyz\n") || !strings.HasSuffix(res.Stdout, "END\n") {
		t.Fatalf("stdout head/tail not kept: %q ... %q", res.Stdout[:40], res.Stdout[len(res.Stdout)-40:])
	}
	// Default limit applies when the Spec sets none.
	sess2 := s.session(t, s.spec(t))
	res = run(t, sess2, "yes 0123456789 | head -c 10485760", 0)
	if !res.Truncated || len(res.Stdout) > 1<<20 {
		t.Fatalf("default limit: Truncated %v, kept %d bytes", res.Truncated, len(res.Stdout))
	}
}

func (s *suite) hugeOutputRunes(t *testing.T) {
	t.Parallel()
	sp := s.spec(t)
	sp.MaxOutput = 1001 // odd, so that a naive cut splits a rune
	sess := s.session(t, sp)
	res := run(t, sess, "yes 'éü€😀' | head -c 3000000", 0)
	if !res.Truncated {
		t.Fatalf("not truncated")
	}
	if strings.ContainsRune(res.Stdout, utf8.RuneError) {
		t.Fatalf("cut split a rune: %q", res.Stdout)
	}
}

func (s *suite) binaryOutput(t *testing.T) {
	t.Parallel()
	sess := s.session(t, s.spec(t))
	res := run(t, sess, `printf 'ok\377\376\000\300\200abc\n'; printf '\377err' >&2`, 0)
	if res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "ok") || !strings.Contains(res.Stdout, "abc") || !strings.Contains(res.Stderr, "err") {
		t.Fatalf("got %+v", res)
	}
	sp := s.spec(t)
	sp.MaxOutput = 4096
	sess2 := s.session(t, sp)
	res = run(t, sess2, "head -c 1000000 /dev/urandom", 0)
	if !res.Truncated {
		t.Fatalf("1 MB of random bytes not truncated")
	}
}

func (s *suite) isolation(t *testing.T) {
	t.Parallel()
	a := s.session(t, s.spec(t))
	b := s.session(t, s.spec(t))
	var wg sync.WaitGroup
	var resA, resB sandbox.Result
	wg.Add(2)
	go func() {
		defer wg.Done()
		resA, _ = a.Exec(context.Background(), sandbox.Cmd{Command: "echo secret-a > mine.txt && pwd"})
	}()
	go func() {
		defer wg.Done()
		resB, _ = b.Exec(context.Background(), sandbox.Cmd{Command: "echo secret-b > mine.txt && pwd"})
	}()
	wg.Wait()
	if resA.ExitCode != 0 || resB.ExitCode != 0 {
		t.Fatalf("writing in the working folder failed: %+v %+v", resA, resB)
	}
	want(t, a, "cat mine.txt", 0, "secret-a")
	want(t, b, "cat mine.txt", 0, "secret-b")
	dirA, dirB := strings.TrimSpace(resA.Stdout), strings.TrimSpace(resB.Stdout)
	if s.caps.SharedHost {
		if dirA == dirB {
			t.Fatalf("two sessions share the working folder %s", dirA)
		}
		return
	}
	res := run(t, b, "cat "+sandbox.ShellQuote(dirA+"/mine.txt")+" 2>/dev/null; true", 0)
	if strings.Contains(res.Stdout, "secret-a") {
		t.Fatalf("session b read session a's file")
	}
}

// cancelKillsTree checks that cancelling ctx also kills background children
// and leaves the session usable.
func (s *suite) cancelKillsTree(t *testing.T) {
	t.Parallel()
	sess := s.session(t, s.spec(t))
	want(t, sess, "cd \"$(mktemp -d)\"", 0, "")
	ctx, cancel := context.WithCancel(context.Background())
	// Cancel once the child has most likely started (the check passes, not
	// fails, when a slow machine cancels before it did).
	time.AfterFunc(2*time.Second, cancel)
	ectx, ecancel := context.WithTimeout(ctx, 60*time.Second)
	defer ecancel()
	_, err := sess.Exec(ectx, sandbox.Cmd{Command: "sh -c 'echo $$ > child.pid; exec sleep 1000' & sleep 1000"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	waitGone(t, sess, "child.pid")
	want(t, sess, "echo usable", 0, "usable")
}

// noSecretsInEnv puts secret-looking variables into this process's
// environment and checks none of them reaches the session.
func (s *suite) noSecretsInEnv(t *testing.T) {
	for _, k := range []string{"HERMES_TEST_API_KEY", "HERMES_TEST_TOKEN", "HERMES_TEST_SECRET", "HERMES_TEST_PASSWORD", "OPENAI_API_KEY"} {
		t.Setenv(k, "leaked-value-"+k)
	}
	sess := s.session(t, s.spec(t))
	res := run(t, sess, "env; export -p", 0)
	if strings.Contains(res.Stdout, "leaked-value") {
		t.Fatalf("secret visible in the session environment:\n%s", res.Stdout)
	}
	for _, line := range strings.Split(res.Stdout, "\n") {
		name, _, _ := strings.Cut(line, "=")
		up := strings.ToUpper(name)
		for _, bad := range []string{"KEY", "TOKEN", "SECRET", "PASSWORD"} {
			if strings.Contains(up, bad) && !strings.Contains(up, " ") {
				t.Errorf("variable %s visible in the session", name)
			}
		}
	}
}

// BenchMedian runs op once per b.Loop iteration and reports the median wall
// time of one call as "median-ms", which a shared, noisy machine skews less
// than the mean ns/op. Driver benchmarks (per-command overhead, session
// life-cycle) call it; it fails b on op's first error.
func BenchMedian(b *testing.B, op func() error) {
	var durs []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, time.Since(t0))
	}
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Microseconds())/1000, "median-ms")
}

// BenchExec reports the median per-command overhead of sess: one Exec of
// `true` per iteration.
func BenchExec(b *testing.B, sess sandbox.Session) {
	BenchMedian(b, func() error {
		_, err := sess.Exec(context.Background(), sandbox.Cmd{Command: "true"})
		return err
	})
}

// BenchLife reports the median life of one session of d with spec: open,
// one command (`true`, which starts a long-lived shell) and close.
func BenchLife(b *testing.B, d sandbox.Driver, spec sandbox.Spec) {
	BenchMedian(b, func() error {
		s, err := d.Open(context.Background(), spec)
		if err != nil {
			return err
		}
		if _, err := s.Exec(context.Background(), sandbox.Cmd{Command: "true"}); err != nil {
			return err
		}
		return s.Close(context.Background())
	})
}

// BenchOpenClose reports the median cost of opening and closing one session
// of d with spec (RolloutID is made unique per iteration).
func BenchOpenClose(b *testing.B, d sandbox.Driver, spec sandbox.Spec) {
	n := 0
	BenchMedian(b, func() error {
		n++
		sp := spec
		sp.RolloutID = fmt.Sprintf("%s-%d", spec.RolloutID, n)
		s, err := d.Open(context.Background(), sp)
		if err != nil {
			return err
		}
		return s.Close(context.Background())
	})
}

// startAhead: a session with a long-lived shell offers sandbox.Starter;
// Start (twice) leaves a session whose commands run in the one shell it
// started, and a closed session's Start fails with ErrClosed.
func (s *suite) startAhead(t *testing.T) {
	t.Parallel()
	sess := s.session(t, s.spec(t))
	st, ok := sess.(sandbox.Starter)
	if !ok {
		if s.caps.LongLivedShell {
			t.Fatal("a session with a long-lived shell does not implement sandbox.Starter")
		}
		t.Skip("no long-lived shell to start")
	}
	ctx := context.Background()
	for range 2 {
		if err := st.Start(ctx); err != nil {
			t.Fatalf("Start: %v", err)
		}
	}
	if _, err := sess.Exec(ctx, sandbox.Cmd{Command: "started_ahead=yes"}); err != nil {
		t.Fatal(err)
	}
	res, err := sess.Exec(ctx, sandbox.Cmd{Command: "echo ${started_ahead:-no}"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[bool]string{true: "yes", false: "no"}[s.caps.LongLivedShell]; strings.TrimSpace(res.Stdout) != want {
		t.Fatalf("a shell variable after Start: %q, want %q", res.Stdout, want)
	}
	if err := sess.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Start(ctx); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("Start after Close: %v, want ErrClosed", err)
	}
}
