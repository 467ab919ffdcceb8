package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bashShell returns a Shell over a plain bash started in its own process
// group; KillCommand kills the group's other members.
func bashShell(t testing.TB, shell string) (*Shell, *int) {
	t.Helper()
	if _, err := exec.LookPath(shell); err != nil {
		t.Skipf("%s not found", shell)
	}
	state := t.TempDir()
	starts := new(int)
	sh := NewShell(ShellConfig{
		StateDir: state,
		Grace:    time.Second,
		Start: func(ctx context.Context) (*ShellProc, error) {
			*starts++
			c := exec.Command(shell)
			c.Dir = t.TempDir()
			c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			in, err := c.StdinPipe()
			if err != nil {
				return nil, err
			}
			out, err := c.StdoutPipe()
			if err != nil {
				return nil, err
			}
			errp, err := c.StderrPipe()
			if err != nil {
				return nil, err
			}
			if err := c.Start(); err != nil {
				return nil, err
			}
			pid := c.Process.Pid
			return &ShellProc{
				Stdin: in, Stdout: out, Stderr: errp,
				Wait:        func() (int, error) { return WaitCode(c) },
				KillCommand: func() error { killGroupBut(pid); return nil },
				Kill:        func() { _ = syscall.Kill(-pid, syscall.SIGKILL) },
			}, nil
		},
	})
	t.Cleanup(sh.Close)
	return sh, starts
}

// killGroupBut kills the members of process group pgid except its leader.
func killGroupBut(pgid int) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == pgid {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func mustExec(t *testing.T, sh *Shell, cmd string, timeout time.Duration) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := sh.Exec(ctx, cmd, timeout)
	if err != nil {
		t.Fatalf("%q: %v", cmd, err)
	}
	return res
}

func TestShellPersistsAndRestarts(t *testing.T) {
	for _, shell := range []string{"bash", "busybox"} {
		t.Run(shell, func(t *testing.T) {
			if shell == "busybox" {
				if _, err := exec.LookPath("busybox"); err != nil {
					t.Skip("busybox not found")
				}
				dir := t.TempDir()
				if err := os.Symlink(mustLook(t, "busybox"), dir+"/sh"); err != nil {
					t.Fatal(err)
				}
				shell = dir + "/sh"
			}
			sh, starts := bashShell(t, shell)
			steps := []struct {
				cmd  string
				code int
				out  string
			}{
				{"f() { echo f-$1; }; mkdir -p d && cd d && export V=1", 0, ""},
				{"f x; echo $V; basename $(pwd)", 0, "f-x\n1\nd\n"},
				{"printf 'no newline'", 0, "no newline"},
				{"cd .. && export W=2; exit 3", 3, ""},
				{"echo $V$W; basename $(pwd)", 0, ""}, // checked below
				{"exec true", 0, ""},
				{"echo $W", 0, "2\n"},
				{"kill -9 $$", 137, ""},
				{"cat; echo after-cat", 0, "after-cat\n"},
				{"exec >/dev/null; echo hidden", 0, ""},
				{"echo still-hidden; exec >&2", 0, ""},
				{"echo now-on-stderr-stream 1>&2; exit 4", 4, ""},
			}
			for i, st := range steps {
				res := mustExec(t, sh, st.cmd, 10*time.Second)
				if res.ExitCode != st.code {
					t.Fatalf("step %d %q: exit %d, want %d (stderr %q)", i, st.cmd, res.ExitCode, st.code, res.Stderr)
				}
				if i == 4 {
					if !strings.HasPrefix(res.Stdout, "12\n") || res.Stdout == "12\nd\n" {
						t.Fatalf("step %d: %q; want 12 and the folder above d", i, res.Stdout)
					}
					continue
				}
				if res.Stdout != st.out {
					t.Fatalf("step %d %q: stdout %q, want %q", i, st.cmd, res.Stdout, st.out)
				}
			}
			// exit 3, exec true, kill -9 and exit 4 each ended a shell.
			if *starts != 4 {
				t.Fatalf("%d shells started, want 4 (the first and one after each ending but the last)", *starts)
			}
		})
	}
}

func mustLook(t *testing.T, name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestShellTimeout(t *testing.T) {
	sh, _ := bashShell(t, "bash")
	mustExec(t, sh, "export K=5", 0)
	res := mustExec(t, sh, "echo begun; sleep 1000 & sleep 1000", time.Second)
	if res.ExitCode != 124 || !res.TimedOut || res.Stdout != "begun\n" {
		t.Fatalf("sleep: %+v", res)
	}
	// A builtin loop keeps the shell busy: it is replaced after Grace.
	res = mustExec(t, sh, "echo looping; while :; do :; done", time.Second)
	if res.ExitCode != 124 || !res.TimedOut || res.Stdout != "looping\n" {
		t.Fatalf("loop: %+v", res)
	}
	if res := mustExec(t, sh, "echo $K", 0); res.Stdout != "5\n" {
		t.Fatalf("after timeouts: %q", res.Stdout)
	}
}

func TestShellCancelAndClose(t *testing.T) {
	sh, _ := bashShell(t, "bash")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := sh.Exec(ctx, "echo go; sleep 1000", 0)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: %v", err)
	}
	if res := mustExec(t, sh, "echo ok", 0); res.Stdout != "ok\n" {
		t.Fatalf("after cancel: %q", res.Stdout)
	}
	sh.Close()
	if _, err := sh.Exec(context.Background(), "true", 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
}

func TestShellStartFailure(t *testing.T) {
	sh := NewShell(ShellConfig{StateDir: t.TempDir(), Start: func(context.Context) (*ShellProc, error) {
		c := exec.Command("sh", "-c", "echo cannot run here >&2; exit 1")
		in, _ := c.StdinPipe()
		// Plain pipes: Wait closes the ones StdoutPipe makes, maybe before
		// the shell's message was read.
		out, outW, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		errp, errW, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		c.Stdout, c.Stderr = outW, errW
		err = c.Start()
		outW.Close()
		errW.Close()
		if err != nil {
			return nil, err
		}
		return &ShellProc{Stdin: in, Stdout: out, Stderr: errp,
			Wait:        func() (int, error) { _ = c.Wait(); return c.ProcessState.ExitCode(), nil },
			KillCommand: func() error { return nil },
			Kill:        func() { _ = c.Process.Kill() }}, nil
	}})
	_, err := sh.Exec(context.Background(), "true", 0)
	if !errors.Is(err, ErrShellStart) || !strings.Contains(err.Error(), "cannot run here") {
		t.Fatalf("err = %v; want ErrShellStart naming the shell's message", err)
	}
}

func TestMarkerScanSplitsAnywhere(t *testing.T) {
	stream := "out\x00put __hs_x 0\n__hs_ab tail-of-it" + "__hs_ab_ 17\nbackground"
	for cut := 0; cut <= len(stream); cut++ {
		for cut2 := cut; cut2 <= len(stream); cut2 += 7 {
			m := markerScan{marker: []byte("__hs_ab_ "), line: true}
			var w bytes.Buffer
			var code int
			found := false
			for _, part := range []string{stream[:cut], stream[cut:cut2], stream[cut2:]} {
				m.pend = append(m.pend, part...)
				if d, c := m.scan(&w); d {
					found, code = true, c
				}
			}
			if !found || code != 17 || w.String() != "out\x00put __hs_x 0\n__hs_ab tail-of-it" || string(m.rest) != "background" {
				t.Fatalf("cut %d/%d: found %v code %d out %q rest %q", cut, cut2, found, code, w.String(), m.rest)
			}
		}
	}
}

// BenchmarkShellExec is the engine's own cost per command over a plain
// bash: write, marker scan, state save.
func BenchmarkShellExec(b *testing.B) {
	sh, _ := bashShell(b, "bash")
	ctx := context.Background()
	for b.Loop() {
		if _, err := sh.Exec(ctx, "true", 0); err != nil {
			b.Fatal(err)
		}
	}
}

// TestShellStartAhead: Start starts the shell the first command then uses
// (no second start), a second Start does nothing, and a closed Shell's
// Start fails.
func TestShellStartAhead(t *testing.T) {
	sh, starts := bashShell(t, "bash")
	ctx := context.Background()
	if sh.Started() {
		t.Fatal("started before Start")
	}
	for range 2 {
		if err := sh.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !sh.Started() || *starts != 1 {
		t.Fatalf("started %v, %d starts; want one", sh.Started(), *starts)
	}
	res, err := sh.Exec(ctx, "echo hi", time.Minute)
	if err != nil || strings.TrimSpace(res.Stdout) != "hi" || *starts != 1 {
		t.Fatalf("exec after Start: %+v %v, %d starts", res, err, *starts)
	}
	sh.Close()
	if err := sh.Start(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start of a closed shell: %v", err)
	}
}

// TestWriteToStuckShellEndsWithContext: a write to a shell input that takes
// a deadline (a pipe) and that nobody reads returns ctx's error once ctx
// ends and writes nothing more after it returned (a write left going in a
// goroutine would finish its megabyte once the pipe is read), and the next
// write, once the pipe is read again, goes through.
func TestWriteToStuckShellEndsWithContext(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	l := &liveShell{proc: &ShellProc{Stdin: w}}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := l.write(ctx, strings.Repeat("x", 1<<20)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write to a full pipe: %v, want the context's deadline", err)
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		got <- b
	}()
	if err := l.write(context.Background(), "echo ok\n"); err != nil {
		t.Fatalf("write once the pipe is read: %v", err)
	}
	w.Close()
	if b := <-got; len(b) >= 1<<20 || !bytes.HasSuffix(b, []byte("echo ok\n")) {
		t.Errorf("the stuck write went on after write returned: %d bytes read, ending %q", len(b), b[max(0, len(b)-16):])
	}
}
