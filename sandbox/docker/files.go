package docker

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// cwdFile is where the shell keeps its current folder (its first line):
// sandbox.Shell after every command, StateScript in ShellMode "fresh".
const cwdFile = stateDir + "/cwd"

// files is the session's sandbox.Files: each operation is one exec of a
// file script (fileExec), the bytes raw on the exec's stdin or stdout, so a
// ranged read moves only the range across the daemon's socket.
func (s *Session) files() sandbox.ScriptFiles {
	return sandbox.ScriptFiles{Run: s.fileExec, CwdFile: cwdFile}
}

// fileExec runs a file script in the container (serialized with Exec),
// feeding stdin when it is not nil, and returns its exit code and stderr.
// It is bounded by the session's command timeout. Daemon failures wrap
// sandbox.ErrUnavailable; a runtime that could not start the process is
// retried as in Exec.
func (s *Session) fileExec(ctx context.Context, op, script string, stdin []byte, stdout io.Writer) (int, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isClosed() {
		return 0, "", fmt.Errorf("docker sandbox %s: %w", op, sandbox.ErrClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, s.spec.Timeout)
	defer cancel()
	var code int
	var stderr string
	err := retryStart(ctx, op, func() (bool, string, error) {
		head := &headWriter{}
		c, e, err := s.fileExecOnce(ctx, script, stdin, io.MultiWriter(stdout, head))
		if err != nil && s.isClosed() {
			return false, "", fmt.Errorf("docker sandbox %s: %w", op, sandbox.ErrClosed)
		}
		if err != nil {
			return false, "", fmt.Errorf("docker sandbox %s: %w", op, err)
		}
		code, stderr = c, e
		if ociFailure(sandbox.Result{ExitCode: c, Stdout: string(head.b), Stderr: e}) {
			if rw, ok := stdout.(interface{ Reset() }); ok {
				rw.Reset() // the next attempt writes the output afresh
			}
			return false, e, nil
		}
		return true, "", nil
	})
	return code, stderr, err
}

// fileExecOnce runs script once; see fileExec.
func (s *Session) fileExecOnce(ctx context.Context, script string, stdin []byte, stdout io.Writer) (int, string, error) {
	errCap := sandbox.NewCapture(4096)
	code, err := s.run(ctx, []string{"sh", "-c", script}, stdin, stdout, errCap)
	if err != nil {
		return 0, "", err
	}
	if code >= 128 {
		if err := s.alive(ctx); err != nil {
			return 0, "", err
		}
	}
	text, _ := errCap.Text()
	return code, text, nil
}

// run runs argv in the container through one exec, feeding stdin when it is
// not nil and copying the output to stdout and stderr, and returns the exit
// code once the daemon reports it. Daemon failures wrap
// sandbox.ErrUnavailable. ctx ending cuts the stream.
func (s *Session) run(ctx context.Context, argv []string, stdin []byte, stdout, stderr io.Writer) (int, error) {
	cli := s.d.cli
	created, err := cli.ExecCreate(ctx, s.id, client.ExecCreateOptions{
		User:         s.d.cfg.Docker.User,
		AttachStdin:  stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
		Cmd:          argv,
	})
	if err != nil {
		return 0, fmt.Errorf("create: %w", unavailable(ctx, err))
	}
	att, err := cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return 0, fmt.Errorf("start: %w", unavailable(ctx, err))
	}
	defer att.Close()
	stop := context.AfterFunc(ctx, att.Close)
	defer stop()
	if stdin != nil {
		// The script may fail before reading everything (a folder in the
		// way); its exit code says so, so a write error here is not ours
		// to report.
		go func() {
			_, _ = att.Conn.Write(stdin)
			_ = att.CloseWrite()
		}()
	}
	_, err = stdcopy.StdCopy(stdout, stderr, att.Reader)
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("read output: %w", unavailable(ctx, err))
	}
	code, err := s.exitCode(ctx, created.ID)
	if err != nil {
		return 0, fmt.Errorf("inspect: %w", unavailable(ctx, err))
	}
	return code, nil
}

// headWriter keeps the first bytes written to it, for recognising the
// runtime's own failure message.
type headWriter struct{ b []byte }

func (h *headWriter) Write(p []byte) (int, error) {
	if room := 512 - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// isClosed reports whether Close was called.
func (s *Session) isClosed() bool {
	s.state.Lock()
	defer s.state.Unlock()
	return s.closed
}
