package grade

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// driverGrace is how long past its own timeout a grading command may take
// before its context gives up on the driver.
const driverGrace = 15 * time.Second

// runVerify runs s.Verify in s.Session, in a subshell (its cd and exports do
// not outlast it) started in s.Dir when set. Exit 0 is a pass; a last stdout
// line holding a JSON object with a numeric "reward" gives the reward, else
// 1 for a pass and 0 for a fail. A timeout or a driver error is no verdict.
func runVerify(ctx context.Context, s Subject, timeout time.Duration) verdict {
	if s.Session == nil {
		return verdict{err: "verify: no sandbox session"}
	}
	script := "(\n" + s.Verify + "\n)"
	if s.Dir != "" {
		script = "(\ncd -- " + sandbox.ShellQuote(s.Dir) + " || exit\n" + s.Verify + "\n)"
	}
	cctx, cancel := context.WithTimeout(ctx, timeout+driverGrace)
	defer cancel()
	res, err := s.Session.Exec(cctx, sandbox.Cmd{Command: script, Timeout: timeout})
	out := joinOutput(res.Stdout, res.Stderr)
	switch {
	case err != nil:
		return verdict{output: out, err: fmt.Sprintf("verify: sandbox: %v", err)}
	case res.TimedOut:
		return verdict{output: out, err: fmt.Sprintf("verify: timed out after %s (--grader-timeout)", timeout)}
	}
	v := passFail(res.ExitCode == 0, out)
	if r, ok := rewardLine(res.Stdout); ok {
		v.value = r
	}
	return v
}

// rewardLine reads the last non-empty line of stdout as {"reward": number,
// ...}; ok is false when it is not one.
func rewardLine(stdout string) (float64, bool) {
	r, _, ok := rewardJSON(lastLine(stdout))
	return r, ok
}

// rewardJSON decodes line as a JSON object with a numeric "reward" and an
// optional boolean "passed" (nil when absent).
func rewardJSON(line string) (reward float64, passed *bool, ok bool) {
	if !strings.HasPrefix(line, "{") {
		return 0, nil, false
	}
	var m struct {
		Reward *json.Number `json:"reward"`
		Passed *bool        `json:"passed"`
	}
	d := json.NewDecoder(strings.NewReader(line))
	d.UseNumber()
	if err := d.Decode(&m); err != nil || m.Reward == nil || d.More() {
		return 0, nil, false
	}
	r, err := m.Reward.Float64()
	if err != nil {
		return 0, nil, false
	}
	return r, m.Passed, true
}

// lastLine returns the last non-blank line of s, trimmed.
func lastLine(s string) string {
	s = strings.TrimRight(s, " \t\r\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

// joinOutput is a command's stdout then stderr, as a grade's output.
func joinOutput(stdout, stderr string) string {
	stdout, stderr = strings.TrimRight(stdout, "\n"), strings.TrimRight(stderr, "\n")
	if stderr == "" {
		return stdout
	}
	if stdout == "" {
		return stderr
	}
	return stdout + "\n" + stderr
}
