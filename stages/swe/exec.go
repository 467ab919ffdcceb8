package swe

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// Harness helpers: commands through Exec, files through the session's
// native file operations (sandbox.Files), so patches of any size and any
// bytes move without a shell command line or the output limit.
const (
	helperTime = 2 * time.Minute
	// maxHarnessFile is the largest file the harness reads back (the
	// agent's patch).
	maxHarnessFile = 256 << 20
)

var q = sandbox.ShellQuote

// exitError is a harness command that ran but failed (as opposed to a
// driver failure, which Exec returns as an error).
type exitError struct{ msg string }

func (e *exitError) Error() string { return e.msg }

// run executes one harness command and fails unless it exits 0; a command
// that ran and failed gives an *exitError.
func run(ctx context.Context, s sandbox.Session, what, command string, timeout time.Duration) (sandbox.Result, error) {
	res, err := s.Exec(ctx, sandbox.Cmd{Command: command, Timeout: timeout})
	if err != nil {
		return res, fmt.Errorf("%s: %w", what, err)
	}
	if res.TimedOut {
		return res, fmt.Errorf("%s: timed out after %s", what, timeout)
	}
	if res.ExitCode != 0 {
		return res, &exitError{fmt.Sprintf("%s: exit %d: %s", what, res.ExitCode, tail(res.Stderr+res.Stdout, 400))}
	}
	return res, nil
}

// file is one file to write into a session.
type file struct {
	path string
	data []byte
}

// writeFiles creates each file in the session with its content (parent
// folders too), one native write per file, within helperTime.
func writeFiles(ctx context.Context, s sandbox.Session, files ...file) error {
	ctx, cancel := context.WithTimeout(ctx, helperTime)
	defer cancel()
	for _, f := range files {
		if err := s.WriteFile(ctx, f.path, f.data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", f.path, err)
		}
	}
	return nil
}

// readFile returns the content of path, which must exist. prefix, when not
// empty, is a command run first (to create the file); its failure is an
// *exitError.
func readFile(ctx context.Context, s sandbox.Session, prefix, path string) ([]byte, error) {
	if prefix != "" {
		if _, err := run(ctx, s, "read "+path, prefix, helperTime); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, helperTime)
	defer cancel()
	data, err := sandbox.ReadAll(ctx, s, path, maxHarnessFile)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return data, nil
}

// tail returns the last n bytes of s, cut at a rune boundary.
func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for i := 0; i < len(s) && i < 4; i++ {
		if s[i]&0xC0 != 0x80 {
			return "…" + s[i:]
		}
	}
	return "…" + s
}

// patchFiles lists the files a unified diff touches (both sides of renames),
// in order, without repeats.
func patchFiles(patch string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if p != "" && p != "/dev/null" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, line := range strings.Split(patch, "\n") {
		switch {
		case strings.HasPrefix(line, "diff --git "):
			rest := strings.TrimPrefix(line, "diff --git ")
			if i := strings.Index(rest, " b/"); strings.HasPrefix(rest, "a/") && i > 0 {
				add(rest[2:i])
				add(rest[i+3:])
			}
		case strings.HasPrefix(line, "+++ b/"), strings.HasPrefix(line, "--- a/"):
			p, _, _ := strings.Cut(line[6:], "\t") // diff -u appends a tab and a date
			add(strings.TrimSpace(p))
		}
	}
	return out
}
