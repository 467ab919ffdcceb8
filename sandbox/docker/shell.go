package docker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// shellStart is what the long-lived shell's exec runs: it makes the state
// folder, prints its pid on both streams (so the driver knows the shell is
// running and which process it is) and becomes the image's sh, which then
// reads commands on stdin.
var shellStart = `[ -d ` + sandbox.ShellQuote(stateDir) + ` ] || (umask 077; mkdir -p ` + sandbox.ShellQuote(stateDir) + `) 2>/dev/null
echo $$; echo $$ >&2; exec sh`

// killBut kills, with SIGKILL, every process of the container except PID 1
// (the keepalive), itself and the pid given as $1 (the long-lived shell). It
// uses builtins only, so it forks nothing, and repeats until a pass finds
// nothing left to kill (a process forking while it runs, a fork bomb),
// skipping zombies, which only their parent can remove.
const killBut = `i=0
while [ $i -lt 50 ]; do
	n=0
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		case $p in 1|$$|"$1") continue ;; esac
		{ read -r l <"$d/stat"; } 2>/dev/null || continue
		case ${l##*) } in Z*|X*) continue ;; esac
		kill -9 "$p" 2>/dev/null && n=$((n+1))
	done
	[ "$n" = 0 ] && exit 0
	i=$((i+1))
done`

// newShell returns the session's long-lived shell; it starts on the first
// Exec.
func (s *Session) newShell() *sandbox.Shell {
	return sandbox.NewShell(sandbox.ShellConfig{
		Start:     s.startShell,
		StateDir:  stateDir,
		MaxOutput: s.spec.MaxOutput,
	})
}

// shellPrepTimeout bounds how long a new shell's exec may take to print its
// pid.
const shellPrepTimeout = 30 * time.Second

// startShell starts the long-lived shell: one exec with its three streams
// attached, the output demultiplexed into two pipes. A runtime that could
// not start the process (pids limit reached) is retried as in Exec. Daemon
// failures wrap sandbox.ErrUnavailable.
func (s *Session) startShell(ctx context.Context) (*sandbox.ShellProc, error) {
	var proc *sandbox.ShellProc
	err := retryStart(ctx, "shell", func() (bool, string, error) {
		p, msg, err := s.startShellOnce(ctx)
		if err != nil || p != nil {
			proc = p
			return true, "", err
		}
		return false, msg, nil
	})
	return proc, err
}

// startShellOnce starts the shell's exec and reads its pid. It returns a nil
// proc, with the runtime's message, when docker could not start the process.
func (s *Session) startShellOnce(ctx context.Context) (*sandbox.ShellProc, string, error) {
	if s.isClosed() {
		return nil, "", sandbox.ErrClosed
	}
	cli := s.d.cli
	created, err := cli.ExecCreate(ctx, s.id, client.ExecCreateOptions{
		User:         s.d.cfg.Docker.User,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		Cmd:          []string{"sh", "-c", shellStart},
	})
	if err != nil {
		return nil, "", fmt.Errorf("docker sandbox shell: create: %w", unavailable(ctx, err))
	}
	att, err := cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("docker sandbox shell: start: %w", unavailable(ctx, err))
	}
	c := &shellConn{s: s, att: att.HijackedResponse, execID: created.ID, done: make(chan struct{})}
	if !s.setShellConn(c) {
		att.Close()
		return nil, "", sandbox.ErrClosed
	}
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(outW, errW, att.Reader)
		c.copyErr = err
		outW.Close()
		errW.Close()
		close(c.done)
		// The shell's processes are gone: nothing more comes on this
		// connection, and nothing written to it would be read.
		att.Close()
	}()

	// Both streams are read up to their first line at once: the
	// demultiplexer blocks on a stream nobody reads.
	out, errs := bufio.NewReader(outR), bufio.NewReader(errR)
	errLine := make(chan string, 1)
	go func() {
		line, _ := errs.ReadString('\n')
		errLine <- line
	}()
	pctx, cancel := context.WithTimeout(ctx, shellPrepTimeout)
	defer cancel()
	stop := context.AfterFunc(pctx, att.Close)
	line, rerr := out.ReadString('\n')
	eline := <-errLine
	if !stop() || rerr != nil || !strings.HasSuffix(eline, "\n") {
		att.Close()
		<-c.done
		rest, _ := io.ReadAll(io.LimitReader(io.MultiReader(out, errs), 4096))
		msg := strings.TrimSpace(line + eline + string(rest))
		if s.isClosed() {
			return nil, "", sandbox.ErrClosed
		}
		if err := pctx.Err(); err != nil {
			if ctx.Err() != nil {
				return nil, "", ctx.Err()
			}
			return nil, "", fmt.Errorf("docker sandbox shell: %w: no pid within %v", sandbox.ErrUnavailable, shellPrepTimeout)
		}
		code, ierr := s.exitCode(ctx, created.ID)
		if ierr != nil {
			return nil, "", fmt.Errorf("docker sandbox shell: inspect: %w", unavailable(ctx, ierr))
		}
		if ociFailure(sandbox.Result{ExitCode: code, Stdout: msg}) {
			return nil, msg, nil
		}
		return nil, "", fmt.Errorf("docker sandbox shell: it ended at once (exit %d): %s", code, msg)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		c.kill()
		return nil, "", fmt.Errorf("docker sandbox shell: want its pid, got %q", line)
	}
	c.pid = pid
	return &sandbox.ShellProc{
		Stdin:       c,
		Stdout:      out,
		Stderr:      errs,
		Wait:        c.wait,
		KillCommand: c.killCommand,
		Kill:        c.kill,
	}, "", nil
}

// shellConn is one long-lived shell: its exec, attached connection and pid
// inside the container.
type shellConn struct {
	s       *Session
	att     client.HijackedResponse
	execID  string
	pid     int
	done    chan struct{} // closed when the output stream ended
	copyErr error         // the demultiplexer's error; read after done
	killed  atomic.Bool   // kill was called: the shell's end is ours
	once    sync.Once
}

// Write writes to the shell's stdin.
func (c *shellConn) Write(p []byte) (int, error) { return c.att.Conn.Write(p) }

// Close closes the shell's stdin.
func (c *shellConn) Close() error { return c.att.CloseWrite() }

// wait blocks until the shell's exec ended and returns its exit code, as
// the daemon reports it. A lost connection or a daemon that no longer
// answers is an error wrapping sandbox.ErrUnavailable, and so is a shell
// killed by a signal in a container that stopped running processes (the
// daemon stopping, the container dying).
func (c *shellConn) wait() (int, error) {
	<-c.done
	if c.s.isClosed() {
		return 0, sandbox.ErrClosed
	}
	ctx := context.Background()
	if err := c.copyErr; err != nil && !errors.Is(err, io.EOF) && !c.killed.Load() {
		return 0, fmt.Errorf("docker sandbox shell: read output: %w", unavailable(ctx, err))
	}
	code, err := c.s.exitCode(ctx, c.execID)
	if err != nil && c.killed.Load() {
		return 128 + 9, nil // the daemon forgot the exec of a restarted container
	}
	if err != nil {
		return 0, fmt.Errorf("docker sandbox shell: inspect: %w", unavailable(ctx, err))
	}
	if code >= 128 && !c.killed.Load() {
		if err := c.s.alive(ctx); err != nil {
			return 0, fmt.Errorf("docker sandbox shell: %w", err)
		}
	}
	return code, nil
}

// killTimeout bounds the exec that kills the command for the shell.
const killTimeout = 5 * time.Second

// killCommand kills every process of the container but PID 1 and the
// shell, from a second exec that ends when they are killed. When no such
// exec runs within killTimeout (the command took every pid, a fork bomb),
// the container is restarted, the shell with it: the shell would not have
// come back anyway.
func (c *shellConn) killCommand() error {
	if c.s.isClosed() {
		return sandbox.ErrClosed
	}
	ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	argv := []string{"sh", "-c", killBut, "sh", strconv.Itoa(c.pid)}
	for wait := 100 * time.Millisecond; ctx.Err() == nil; wait *= 2 {
		started, err := c.s.runKill(ctx, argv)
		if err == nil && started {
			return nil
		}
		if err != nil || wait > 400*time.Millisecond {
			break
		}
		time.Sleep(wait)
	}
	c.end(true)
	return nil
}

// kill kills the shell and every other process of the container but PID 1
// (see killEverything).
func (c *shellConn) kill() { c.end(false) }

// end kills the shell and the rest of the container's processes, by
// restarting the container when restart is set, waits a moment for the
// output stream to end and then closes it.
func (c *shellConn) end(restart bool) {
	c.once.Do(func() {
		c.killed.Store(true)
		if !c.s.isClosed() {
			ctx := context.Background()
			if restart {
				_ = c.s.restart(ctx)
			} else {
				_ = c.s.killEverything(ctx)
			}
		}
		select {
		case <-c.done:
		case <-time.After(2 * time.Second):
		}
		c.att.Close()
	})
}
