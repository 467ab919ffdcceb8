package local

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/sandboxtest"
)

// TestConformance runs the suite on confined sessions in the default
// (persistent) shell mode: the escape battery included.
func TestConformance(t *testing.T) { conformance(t, "") }

// TestConformanceFresh runs it in the fresh shell mode (a bash per command).
func TestConformanceFresh(t *testing.T) { conformance(t, "fresh") }

func conformance(t *testing.T, mode string) {
	base := t.TempDir()
	limits := sandbox.LocalLimits{Processes: 256, FileSizeBytes: 16 << 20}
	// Pool -1: every session is a new sandbox, and Close removes it
	// (TestConformanceReused runs the suite on reused ones).
	d, err := New(sandbox.Config{ShellMode: mode, Local: sandbox.LocalConfig{BaseDir: base, Limits: limits, Pool: -1}})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Confined() {
		t.Fatal("default local driver is not confined")
	}
	sandboxtest.Run(t, func(*testing.T) sandbox.Driver { return d }, sandboxtest.Caps{
		Shell:          true,
		SharedHost:     true,
		Cwd:            t.TempDir(),
		Confined:       true,
		MaxProcs:       limits.Processes,
		MaxFileSize:    limits.FileSizeBytes,
		LongLivedShell: mode != "fresh",
		Aliases:        mode != "fresh",
		AfterClose: func(t *testing.T, _ sandbox.Spec, s sandbox.Session) {
			ls := s.(*Session)
			if _, err := os.Stat(ls.Dir()); !os.IsNotExist(err) {
				t.Errorf("session folder %s still there (stat err %v)", ls.Dir(), err)
			}
			if p := alive(0, ls.Marker()); len(p) > 0 {
				t.Errorf("processes %v of the session still alive", p)
			}
		},
	})
}

// TestConformanceUnconfined runs the suite with Isolation "none" (the
// persistent shell, unconfined).
func TestConformanceUnconfined(t *testing.T) {
	base := t.TempDir()
	d, err := New(sandbox.Config{Local: sandbox.LocalConfig{BaseDir: base, Isolation: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.Run(t, func(*testing.T) sandbox.Driver { return d }, sandboxtest.Caps{
		Shell:          true,
		SharedHost:     true,
		Cwd:            "/tmp",
		LongLivedShell: true,
		Aliases:        true,
		AfterClose: func(t *testing.T, _ sandbox.Spec, s sandbox.Session) {
			ls := s.(*Session)
			if _, err := os.Stat(ls.Dir()); !os.IsNotExist(err) {
				t.Errorf("session folder %s still there (stat err %v)", ls.Dir(), err)
			}
			if p := alive(0, ls.Marker()); len(p) > 0 {
				t.Errorf("processes %v of the session still alive", p)
			}
		},
	})
}

func open(t *testing.T, cfg sandbox.Config, spec sandbox.Spec) *Session {
	t.Helper()
	if cfg.Local.BaseDir == "" {
		cfg.Local.BaseDir = t.TempDir()
	}
	if cfg.Local.Pool == 0 {
		cfg.Local.Pool = -1 // these tests check one session's life, to its removal
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.Open(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s.(*Session)
}

func exec1(t *testing.T, s *Session, cmd string, timeout time.Duration) sandbox.Result {
	t.Helper()
	res, err := s.Exec(context.Background(), sandbox.Cmd{Command: cmd, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestTimeoutLeavesNoProcess is the acceptance check of the generate issue:
// `sleep 1000 &` plus a foreground sleep past the timeout leave no process
// behind, checked in /proc by pid, process group and session, including a
// child that left the group with setsid. In the persistent mode the shell
// itself ($$) stays, and nothing else.
func TestTimeoutLeavesNoProcess(t *testing.T) {
	for _, mode := range []string{"persistent", "fresh"} {
		t.Run(mode, func(t *testing.T) {
			s := open(t, sandbox.Config{ShellMode: mode, Local: sandbox.LocalConfig{Isolation: "none"}}, sandbox.Spec{})
			// The timeout leaves a loaded machine time to start the three processes.
			res := exec1(t, s, "sleep 1000 & echo $!; setsid sleep 1001 & echo $!; echo $$; sleep 60", 5*time.Second)
			if res.ExitCode != 124 || !res.TimedOut {
				t.Fatalf("got %+v", res)
			}
			fields := strings.Fields(res.Stdout)
			if len(fields) != 3 {
				t.Fatalf("stdout %q", res.Stdout)
			}
			leader, _ := strconv.Atoi(fields[2])
			for _, f := range fields[:2] {
				pid, _ := strconv.Atoi(f)
				waitDead(t, pid)
			}
			if mode == "fresh" {
				waitDead(t, leader)
			}
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				p := slices.DeleteFunc(alive(leader, s.Marker()), func(pid int) bool { return mode == "persistent" && pid == leader })
				if len(p) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("processes %v in the command's group/session or carrying its marker survived", p)
				}
			}
			if res := exec1(t, s, "echo $$", 0); mode == "persistent" && strings.TrimSpace(res.Stdout) != fields[2] {
				t.Errorf("the timeout replaced the shell (pid %s, now %q)", fields[2], res.Stdout)
			}
		})
	}
}

// waitDead polls until pid is gone or a zombie (a SIGKILLed process needs
// the scheduler to exit, which a loaded machine delays) and fails t if it
// still runs after 30 s.
func waitDead(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, ok := readStat(pid); !ok || st.zombie {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive 30 s after it was killed", pid)
		}
	}
}

// waitNone polls alive until it finds nothing, for up to 30 s, and returns
// what it found last.
func waitNone(leaderPID int, prefix string) []int {
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		p := alive(leaderPID, prefix)
		if len(p) == 0 || time.Now().After(deadline) {
			return p
		}
	}
}

// TestBackgroundKilledAtEnd checks that in the fresh mode a background job
// does not outlive the command that started it, and in the persistent mode
// it runs until the session closes.
func TestBackgroundKilledAtEnd(t *testing.T) {
	s := open(t, sandbox.Config{ShellMode: "fresh", Local: sandbox.LocalConfig{Isolation: "none"}}, sandbox.Spec{})
	res := exec1(t, s, "sleep 1000 & echo $!", 0)
	pid, _ := strconv.Atoi(strings.TrimSpace(res.Stdout))
	waitDead(t, pid)

	s = open(t, sandbox.Config{Local: sandbox.LocalConfig{Isolation: "none"}}, sandbox.Spec{})
	res = exec1(t, s, "sleep 1000 & echo $!", 0)
	if res := exec1(t, s, "kill -0 "+strings.TrimSpace(res.Stdout)+" && echo running", 0); res.Stdout != "running\n" {
		t.Fatalf("the background job of the persistent shell ended with its command: %+v", res)
	}
	pid, _ = strconv.Atoi(strings.TrimSpace(res.Stdout))
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitDead(t, pid)
}

func TestEnvironmentAllowlist(t *testing.T) {
	t.Setenv("HERMES_UNLISTED_VAR", "x")
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("MY_PASSTHROUGH", "yes")
	t.Setenv("MY_API_KEY_PASS", "no")
	s := open(t, sandbox.Config{Local: sandbox.LocalConfig{PassEnv: []string{"MY_PASSTHROUGH", "MY_API_KEY_PASS"}}},
		sandbox.Spec{Env: map[string]string{"ROW_VAR": "r"}})
	res := exec1(t, s, "env", 0)
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	if _, ok := got["HERMES_UNLISTED_VAR"]; ok {
		t.Errorf("unlisted parent variable visible")
	}
	if _, ok := got["MY_API_KEY_PASS"]; ok {
		t.Errorf("secret-looking variable passed through PassEnv")
	}
	if got["MY_PASSTHROUGH"] != "yes" || got["ROW_VAR"] != "r" || got["LANG"] != "C.UTF-8" {
		t.Errorf("expected variables missing: %v", got)
	}
	if got["HOME"] != filepath.Join(s.Dir(), "home") || got["TMPDIR"] != "/tmp" {
		t.Errorf("HOME %q TMPDIR %q not private", got["HOME"], got["TMPDIR"])
	}
}

func TestPrivateFolderModes(t *testing.T) {
	s := open(t, sandbox.Config{}, sandbox.Spec{})
	exec1(t, s, "umask 000; export A=1; cd /", 0)
	for _, p := range []string{s.Dir(), filepath.Join(s.Dir(), "home"), filepath.Join(s.Dir(), "state")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v, want no group/other access", p, fi.Mode().Perm())
		}
	}
	// The state files are there, behind the private state folder (their
	// own mode guards nothing more, and a umask of their own would cost a
	// subshell per shell start).
	for _, f := range []string{"env", "cwd"} {
		if _, err := os.Stat(filepath.Join(s.Dir(), "state", f)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCloseRemovesUnwritableFolders(t *testing.T) {
	s := open(t, sandbox.Config{}, sandbox.Spec{})
	exec1(t, s, "mkdir -p a/b && touch a/b/f && chmod 000 a/b a", 0)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir()); !os.IsNotExist(err) {
		t.Fatalf("folder left: %v", err)
	}
}

func TestGCRemovesLeftovers(t *testing.T) {
	base := t.TempDir()
	d, err := New(sandbox.Config{Local: sandbox.LocalConfig{BaseDir: base, Isolation: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	keep, err := d.Open(context.Background(), sandbox.Spec{RunID: "other"})
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Close(context.Background())
	var leaked []*Session
	for range 2 {
		s, err := d.Open(context.Background(), sandbox.Spec{RunID: "run-1"})
		if err != nil {
			t.Fatal(err)
		}
		leaked = append(leaked, s.(*Session))
		// A daemonised child escapes the command's group and session.
		exec1(t, s.(*Session), "setsid sleep 1000 >/dev/null 2>&1 < /dev/null & sleep 0.3", 0)
	}
	if n := countSleeps(leaked[0].Marker()); n != 1 {
		t.Fatalf("setup: want the escaped sleep alive, got %d sleeps among %v", n, alive(0, leaked[0].Marker()))
	}
	n, err := d.GC(context.Background(), "run-1")
	if err != nil || n != 2 {
		t.Fatalf("GC = %d, %v; want 2, nil", n, err)
	}
	for _, s := range leaked {
		if _, err := os.Stat(s.Dir()); !os.IsNotExist(err) {
			t.Errorf("folder %s left", s.Dir())
		}
		if p := alive(0, s.Marker()); len(p) > 0 {
			t.Errorf("processes %v left", p)
		}
	}
	if _, err := os.Stat(keep.(*Session).Dir()); err != nil {
		t.Errorf("GC removed another run's folder: %v", err)
	}
}

func TestBadCwd(t *testing.T) {
	d, err := New(sandbox.Config{Local: sandbox.LocalConfig{BaseDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Open(context.Background(), sandbox.Spec{Cwd: "/no/such/folder"}); err == nil {
		t.Fatal("Open with a missing cwd succeeded")
	}
}

// TestCloseDuringExec checks that Close ends a running command at once.
func TestCloseDuringExec(t *testing.T) {
	s := open(t, sandbox.Config{}, sandbox.Spec{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = s.Exec(context.Background(), sandbox.Cmd{Command: "sleep 1000 & sleep 1000"})
	}()
	// Close once the command runs (its processes carry the marker).
	for deadline := time.Now().Add(30 * time.Second); len(alive(0, s.Marker())) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the command did not start within 30 s")
		}
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Exec still running 60 s after Close")
	}
	if p := waitNone(0, s.Marker()); len(p) > 0 {
		t.Fatalf("processes left: %v", p)
	}
}

// alive lists live (non-zombie) processes in leaderPID's group or session or
// carrying the marker prefix, to prove nothing survived.
func alive(leaderPID int, prefix string) []int {
	var out []int
	for _, pid := range pids() {
		if member(pid, leaderPID, prefix) {
			out = append(out, pid)
		}
	}
	return out
}

// BenchmarkFiles1MiB measures a 1 MiB WriteFile plus reading it back.
func BenchmarkFiles1MiB(b *testing.B) {
	d, err := New(sandbox.Config{Local: sandbox.LocalConfig{BaseDir: b.TempDir()}})
	if err != nil {
		b.Fatal(err)
	}
	s, err := d.Open(context.Background(), sandbox.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	sandboxtest.BenchWriteRead1MiB(b, s)
}

// TestStartProbeTaken: the probe StartProbe starts is the one the next
// confining New waits for, once; the New after it probes again.
func TestStartProbeTaken(t *testing.T) {
	StartProbe()
	early.mu.Lock()
	started := early.ch
	early.mu.Unlock()
	if started == nil {
		t.Fatal("StartProbe started no probe")
	}
	StartProbe() // a second call keeps the first probe
	d1, err := New(sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	d2, err := New(sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if d1.probe != started {
		t.Error("the first New did not take the started probe")
	}
	if d2.probe == nil || d2.probe == started {
		t.Error("the second New did not start a probe of its own")
	}
	if e1, e2 := d1.Preflight(context.Background()), d2.Preflight(context.Background()); (e1 == nil) != (e2 == nil) {
		t.Errorf("the early and the late probe disagree: %v, %v", e1, e2)
	}
}
