package swe

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// Shell helpers that move files in and out of a session through Exec only,
// so every driver works. Command arguments stay under 96 KiB (Linux caps one
// argument at 128 KiB) and read chunks stay well under any output limit.
const (
	writeChunk = 64 << 10 // raw bytes per write command (base64: 86 KiB)
	readChunk  = 12 << 10 // raw bytes per read command (base64: 16 KiB)
	helperTime = 2 * time.Minute
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

// writeFiles creates each file in the session with its content, packing the
// writes into as few commands as the argument limit allows: one command for
// everything under 64 KiB.
func writeFiles(ctx context.Context, s sandbox.Session, files ...file) error {
	for _, c := range writeCommands(files...) {
		if _, err := run(ctx, s, "write files", c, helperTime); err != nil {
			return err
		}
	}
	return nil
}

// writeCommands returns the shell commands that write files, each under the
// argument limit.
func writeCommands(files ...file) []string {
	var (
		cmds  []string
		parts []string
		size  int
	)
	flush := func() {
		if len(parts) > 0 {
			cmds = append(cmds, strings.Join(parts, " && "))
		}
		parts, size = nil, 0
	}
	for _, f := range files {
		data, op := f.data, ">"
		for first := true; first || len(data) > 0; first = false {
			n := min(len(data), writeChunk)
			if size > 0 && size+n > writeChunk {
				flush()
			}
			parts = append(parts, "printf %s "+q(base64.StdEncoding.EncodeToString(data[:n]))+" | base64 -d "+op+" "+q(f.path))
			size += n + 64
			data, op = data[n:], ">>"
		}
	}
	flush()
	return cmds
}

// readFile returns the content of path, which must exist, in readChunk
// pieces. prefix runs first in the same command (to create the file), so a
// small file costs one command in all.
func readFile(ctx context.Context, s sandbox.Session, prefix, path string) ([]byte, error) {
	cmd := prefix + "stat -c %s " + q(path) + " && head -c " + strconv.Itoa(readChunk) + " " + q(path) + " | base64 | tr -d '\\n'"
	res, err := run(ctx, s, "read "+path, cmd, helperTime)
	if err != nil {
		return nil, err
	}
	if res.Truncated {
		return nil, errors.New("read " + path + ": output cut by the sandbox's output limit (raise --max-output)")
	}
	sizeText, first, _ := strings.Cut(strings.TrimLeft(res.Stdout, "\n"), "\n")
	size, err := strconv.Atoi(strings.TrimSpace(sizeText))
	if err != nil {
		return nil, fmt.Errorf("read %s: bad size %q", path, sizeText)
	}
	data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(first))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	for len(data) < size {
		cmd := "tail -c +" + strconv.Itoa(len(data)+1) + " " + q(path) + " | head -c " + strconv.Itoa(readChunk) + " | base64 | tr -d '\\n'"
		res, err := run(ctx, s, "read "+path, cmd, helperTime)
		if err != nil {
			return nil, err
		}
		if res.Truncated {
			return nil, errors.New("read " + path + ": output cut by the sandbox's output limit (raise --max-output)")
		}
		chunk, err := base64.StdEncoding.DecodeString(strings.TrimSpace(res.Stdout))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		if len(chunk) == 0 {
			return nil, fmt.Errorf("read %s: file shrank while read", path)
		}
		data = append(data, chunk...)
	}
	if len(data) != size {
		return nil, fmt.Errorf("read %s: got %d bytes, want %d", path, len(data), size)
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
