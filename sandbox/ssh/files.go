package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	gossh "golang.org/x/crypto/ssh"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// ReadRange implements sandbox.Files over one SSH channel running
// sandbox.FileReadScript: dd seeks and head stops after the range, so only
// the range crosses the connection, as raw bytes on the channel's stdout.
func (s *Session) ReadRange(ctx context.Context, path string, off int64, n int) ([]byte, int64, error) {
	if off < 0 || n < 0 {
		return nil, 0, &fs.PathError{Op: "read", Path: path, Err: errors.New("negative offset or length")}
	}
	out := sandbox.NewReadOutput(n)
	code, stderr, err := s.fileRun(ctx, "read", sandbox.FileReadScript(s.cwdFile(), path, off, n), nil, out)
	if err != nil {
		return nil, 0, err
	}
	if code != 0 {
		return nil, 0, sandbox.FileError("read", path, code, stderr)
	}
	fi, data, err := out.Result()
	if err != nil {
		return nil, 0, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if err := sandbox.CheckRead(path, fi, off, n, len(data)); err != nil {
		return nil, 0, err
	}
	return data, fi.Size, nil
}

// Stat implements sandbox.Files over one SSH channel running stat.
func (s *Session) Stat(ctx context.Context, path string) (sandbox.FileInfo, error) {
	var out bytes.Buffer
	code, stderr, err := s.fileRun(ctx, "stat", sandbox.FileStatScript(s.cwdFile(), path), nil, &out)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	if code != 0 {
		return sandbox.FileInfo{}, sandbox.FileError("stat", path, code, stderr)
	}
	fi, err := sandbox.ParseFileStat(strings.TrimSpace(out.String()))
	if err != nil {
		return sandbox.FileInfo{}, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	return fi, nil
}

// WriteFile implements sandbox.Files over one SSH channel running
// sandbox.FileWriteScript, the content streamed raw on the channel's stdin
// (temporary file beside the target, renamed over it).
func (s *Session) WriteFile(ctx context.Context, path string, data []byte, perm fs.FileMode) error {
	code, stderr, err := s.fileRun(ctx, "write", sandbox.FileWriteScript(s.cwdFile(), path, perm), bytes.NewReader(data), io.Discard)
	if err != nil {
		return err
	}
	if code != 0 {
		return sandbox.FileError("write", path, code, stderr)
	}
	return nil
}

// cwdFile is where the launcher keeps the shell's current folder.
func (s *Session) cwdFile() string { return s.dir + "/state/cwd" }

// fileRun runs a file script by /bin/sh on the remote over its own channel,
// serialized with Exec and bounded by the session's command timeout, and
// returns its exit code and stderr. A transport failure wraps
// sandbox.ErrUnavailable.
func (s *Session) fileRun(ctx context.Context, op, script string, stdin io.Reader, stdout io.Writer) (int, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, "", fmt.Errorf("ssh %s: %w", op, sandbox.ErrClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	ch, err := s.d.channel(ctx)
	if err != nil {
		return 0, "", fmt.Errorf("ssh %s: %w", op, err)
	}
	defer s.d.release()
	defer ch.Close()
	stderr := newCapture(4096)
	ch.Stdin, ch.Stdout, ch.Stderr = stdin, stdout, stderr
	stop := context.AfterFunc(ctx, func() { _ = ch.Close() })
	defer stop()
	err = ch.Run("exec /bin/sh -c " + sandbox.ShellQuote(script))
	text, _ := stderr.Text()
	var ee *gossh.ExitError
	switch {
	case ctx.Err() != nil:
		return 0, "", fmt.Errorf("ssh %s: %w", op, ctx.Err())
	case err == nil:
		return 0, text, nil
	case errors.As(err, &ee) && ee.Signal() == "":
		return ee.ExitStatus(), text, nil
	default:
		return 0, "", fmt.Errorf("ssh %s: %w: %w", op, sandbox.ErrUnavailable, err)
	}
}
