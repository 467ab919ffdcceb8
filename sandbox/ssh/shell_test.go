package ssh

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// TestUnconfinedTimeoutKeepsShell: an unconfined long-lived shell's
// command that started a background job and a child that left the session
// with setsid, then timed out, leaves neither running (the job by the
// session, the child by its marker), and the shell itself ($$) is the same
// one in the next command.
func TestUnconfinedTimeoutKeepsShell(t *testing.T) {
	srv := sharedSSHD(t)
	d := newDriver(t, unconfined(srv.options()))
	s := open(t, d, sandbox.Spec{})
	res, err := s.Exec(testCtx(t), sandbox.Cmd{
		// The timeout leaves a loaded machine time to start the three processes.
		Command: "sleep 1000 & echo $! > job.pid; setsid sh -c 'echo $$ > escaped.pid; exec sleep 1001' & echo $$; sleep 60",
		Timeout: 5 * time.Second,
	})
	if err != nil || res.ExitCode != 124 || !res.TimedOut {
		t.Fatalf("got %+v, %v", res, err)
	}
	if s.shell == nil {
		t.Fatal("no long-lived shell")
	}
	waitGone(t, s, "job.pid")
	waitGone(t, s, "escaped.pid")
	if got := execOK(t, s, "echo $$").Stdout; got != res.Stdout {
		t.Errorf("the timeout replaced the shell (pid %q, now %q)", res.Stdout, got)
	}
}

// TestUnconfinedShellEndKillsJobs: when a command ends the unconfined
// shell (exit), the relay kills what its commands left running in the
// background, and the next command gets a new shell with the state.
func TestUnconfinedShellEndKillsJobs(t *testing.T) {
	srv := sharedSSHD(t)
	d := newDriver(t, unconfined(srv.options()))
	s := open(t, d, sandbox.Spec{})
	execOK(t, s, "cd /tmp && export KEPT=1; sleep 1000 >/dev/null 2>&1 & echo $! >"+sandbox.ShellQuote(s.Dir()+"/job.pid"))
	if res := execOK(t, s, "exit 3"); res.ExitCode != 3 {
		t.Fatalf("exit 3: %+v", res)
	}
	if res := execOK(t, s, "pwd; echo $KEPT"); res.Stdout != "/tmp\n1\n" {
		t.Fatalf("after the shell's end: %q", res.Stdout)
	}
	execOK(t, s, "cd "+sandbox.ShellQuote(s.Dir()))
	waitGone(t, s, "job.pid")
}

// maxSessionsSSHD starts a private sshd that allows only n channels per
// connection, and checks that it refuses the next one.
func maxSessionsSSHD(t *testing.T, n int) server {
	srv := privateSSHD(t)
	cfg := filepath.Join(srv.dir, "sshd_config")
	if err := syscall.Kill(srv.pid(t), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, srv.Addr)
	// sshd forks into the background and writes the pid file the
	// script's stop (at cleanup) kills by.
	if out, err := exec.Command(sshdBinary, "-f", cfg, "-o", fmt.Sprintf("MaxSessions=%d", n)).CombinedOutput(); err != nil {
		t.Fatalf("restart sshd: %v\n%s", err, out)
	}
	waitOpen(t, srv.Addr)
	d := newDriver(t, srv.options())
	c, err := d.dial(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range n {
		if _, err := c.NewSession(); err != nil {
			t.Fatalf("channel %d: %v", i+1, err)
		}
	}
	var oce *gossh.OpenChannelError
	if _, err := c.NewSession(); !errors.As(err, &oce) {
		t.Fatalf("channel %d past the server's MaxSessions %d: %v, want a refusal", n+1, n, err)
	}
	return srv
}

// TestShellsPastMaxSessions: with a server that allows 2 channels per
// connection, and the driver's MaxSessions 2, one session's long-lived
// shell takes the main connection's share and the next ones go two by two
// to extra connections; every session keeps its shell (a function it
// defined), files and fresh channels still find room on the main
// connection, and a closed session's place goes to the next one.
func TestShellsPastMaxSessions(t *testing.T) {
	srv := maxSessionsSSHD(t, 2)
	// Unconfined only: confined shells reach lanes the same way
	// (TestConcurrentSessionsShareOneConnection has more of them than the
	// main connection's share).
	for _, iso := range []string{IsolationNone} {
		t.Run(iso, func(t *testing.T) {
			o := srv.options()
			o.Isolation = iso
			o.MaxSessions = 2
			d := newDriver(t, o)
			var ss []*Session
			for i := range 5 {
				s := open(t, d, sandbox.Spec{})
				execOK(t, s, fmt.Sprintf("f() { echo f%d; }", i))
				ss = append(ss, s)
			}
			for i, s := range ss {
				if s.shell == nil {
					t.Fatalf("session %d has no long-lived shell", i)
				}
				if res := execOK(t, s, "f"); res.Stdout != fmt.Sprintf("f%d\n", i) {
					t.Errorf("session %d: %+v", i, res)
				}
			}
			if ss[0].lane != nil || ss[1].lane == nil || ss[1].lane != ss[2].lane || ss[3].lane == nil ||
				ss[3].lane == ss[1].lane || ss[3].lane != ss[4].lane {
				t.Errorf("lanes: %p %p %p %p %p; want the main connection, then two by two", ss[0].lane, ss[1].lane, ss[2].lane, ss[3].lane, ss[4].lane)
			}
			if n := d.laneDials.Load(); n != 2 {
				t.Errorf("lane dials = %d, want 2", n)
			}
			// Every session busy at once, with files on the side.
			var wg sync.WaitGroup
			for i, s := range ss {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if res, err := s.Exec(testCtx(t), sandbox.Cmd{Command: "sleep 0.2; f"}); err != nil || res.Stdout != fmt.Sprintf("f%d\n", i) {
						t.Errorf("session %d, concurrent: %+v, %v", i, res, err)
					}
					if err := s.WriteFile(testCtx(t), "x", []byte("1"), 0o644); err != nil {
						t.Errorf("session %d, file: %v", i, err)
					}
				}()
			}
			wg.Wait()
			if err := ss[2].Close(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			n := open(t, d, sandbox.Spec{})
			execOK(t, n, "true")
			if n.lane != ss[1].lane {
				t.Errorf("the closed session's place did not go to the next one (lane %p, want %p)", n.lane, ss[1].lane)
			}
			if got := d.laneDials.Load(); got != 2 {
				t.Errorf("lane dials = %d, want 2", got)
			}
			for _, s := range append(ss, n) {
				if err := s.Close(context.Background()); err != nil {
					t.Error(err)
				}
			}
		})
	}
}
