package grade

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"
)

// runExec runs the host executable path with s.Record on stdin and the row's
// answer and verify command in HERMES_PIPE_ANSWER and HERMES_PIPE_VERIFY
// (besides the caller's environment: a judge may need its own API key). Its
// last non-blank stdout line must be {"reward": number, "passed": bool?};
// passed defaults to reward > 0. A non-zero exit, no such line, a timeout (its
// process group killed) or a failure to start is no verdict.
func runExec(ctx context.Context, path string, s Subject, timeout time.Duration) verdict {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, path)
	cmd.Stdin = bytes.NewReader(s.Record)
	cmd.Env = append(os.Environ(), "HERMES_PIPE_ANSWER="+s.Answer, "HERMES_PIPE_VERIFY="+s.Verify)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &limited{b: &stdout}, &limited{b: &stderr}
	groupKill(cmd)
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	out := joinOutput(stdout.String(), stderr.String())
	var ee *exec.ExitError
	switch {
	case cctx.Err() != nil && ctx.Err() == nil:
		return verdict{output: out, err: fmt.Sprintf("exec grader %s: timed out after %s (--grader-timeout)", path, timeout)}
	case ctx.Err() != nil:
		return verdict{output: out, err: fmt.Sprintf("exec grader %s: %v", path, ctx.Err())}
	case errors.As(err, &ee):
		return verdict{output: out, err: fmt.Sprintf("exec grader %s: %v", path, ee)}
	case err != nil:
		return verdict{output: out, err: fmt.Sprintf("exec grader %s: %v", path, err)}
	}
	r, passed, ok := rewardJSON(lastLine(stdout.String()))
	if !ok {
		return verdict{output: out, err: fmt.Sprintf(`exec grader %s: its last line is not {"reward": number}`, path)}
	}
	v := verdict{passed: r > 0, value: r, output: out}
	if passed != nil {
		v.passed = *passed
	}
	return v
}

// execOutputCap bounds what an exec grader's output costs in memory: its head
// is dropped past it (the tail is what a grade keeps).
const execOutputCap = 1 << 20

// limited keeps at most the last execOutputCap bytes written to it (roughly:
// it drops the older half when full).
type limited struct{ b *bytes.Buffer }

func (l *limited) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > execOutputCap {
		p = p[len(p)-execOutputCap:]
	}
	if l.b.Len()+len(p) > execOutputCap {
		keep := l.b.Bytes()[l.b.Len()-min(l.b.Len(), execOutputCap-len(p)):]
		nb := append([]byte(nil), keep...)
		l.b.Reset()
		l.b.Write(nb)
	}
	l.b.Write(p)
	return n, nil
}
