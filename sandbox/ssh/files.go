package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	gossh "golang.org/x/crypto/ssh"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// files is the session's sandbox.Files: each operation is one SSH channel
// running a file script (fileRun), the bytes raw on the channel's stdin or
// stdout, so a ranged read moves only the range across the connection. A
// confined session runs the script inside its sandbox.
func (s *Session) files() sandbox.ScriptFiles {
	return sandbox.ScriptFiles{Run: s.fileRun, CwdFile: s.cwdFile()}
}

// cwdFile is where the launcher keeps the shell's current folder.
func (s *Session) cwdFile() string { return s.dir + "/state/cwd" }

// fileRun runs a file script by /bin/sh on the remote over its own channel,
// serialized with Exec and bounded by the session's command timeout, and
// returns its exit code and stderr. A transport failure wraps
// sandbox.ErrUnavailable.
func (s *Session) fileRun(ctx context.Context, op, script string, stdin []byte, stdout io.Writer) (int, string, error) {
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
	if stdin != nil {
		ch.Stdin = bytes.NewReader(stdin)
	}
	ch.Stdout, ch.Stderr = stdout, stderr
	stop := context.AfterFunc(ctx, func() { _ = ch.Close() })
	defer stop()
	line := "exec /bin/sh -c " + sandbox.ShellQuote(script)
	if s.box != "" {
		// Confined: paths resolve as the commands see them, so neither an
		// absolute path nor a link a command planted reaches past the
		// sandbox's mounts.
		line = "exec " + s.box + " /bin/sh -c " + sandbox.ShellQuote(script)
	}
	err = ch.Run(line)
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
