package sandbox

import (
	"context"
	"errors"
	"time"
)

// Cmd is one shell command to run in a session. Timeout zero means the
// session's default.
type Cmd struct {
	Command string
	Timeout time.Duration
}

// Result is what a command did. ExitCode is the user command's own exit code;
// 124 when the timeout killed it. Output that exceeded the session's limit is
// cut head and tail around a marker and Truncated is set. Stdout and Stderr are
// always valid UTF-8.
type Result struct {
	Stdout    string
	Stderr    string
	ExitCode  int
	TimedOut  bool
	Truncated bool
	Duration  time.Duration
}

// Session is one rollout's private environment. `cd` and `export` persist from
// one Exec to the next. Exec blocks until the command ends, its timeout passes
// or ctx is cancelled. A returned error means the driver failed (container gone,
// connection lost), never that the command failed. The Files methods move file
// contents natively (see Files). Close removes everything the session created
// and is safe to call more than once.
type Session interface {
	Exec(ctx context.Context, cmd Cmd) (Result, error)
	Files
	Close(ctx context.Context) error
}

// Starter is implemented by sessions that start what runs their commands
// at the first command (the local driver's long-lived shell). Start does it
// ahead and blocks until it is ready, so a caller that opens a session to
// run a command counts that start as the open's, not as the command's; on
// a started session it does nothing.
type Starter interface {
	Start(ctx context.Context) error
}

// Spec describes the session a rollout wants.
type Spec struct {
	RunID     string // labels containers/folders of one run (for gc)
	RolloutID string // unique per rollout
	Image     string // container image (docker); ignored by local and ssh
	Cwd       string // starting working folder; "" = the session's private folder
	// ReadOnly are host folders the session's commands must be able to read
	// at their own paths (swe clones a task's repository from one). A
	// confined local or ssh session mounts them read-only (for ssh, paths on
	// the remote host); other drivers see their own file systems and ignore
	// them.
	ReadOnly  []string
	Env       map[string]string
	Timeout   time.Duration // default per-command timeout
	MaxOutput int           // bytes kept per stream before cutting; 0 = default
}

// Driver opens sessions. Implementations must be safe for concurrent use.
type Driver interface {
	Open(ctx context.Context, spec Spec) (Session, error)
}

// ErrUnavailable marks a driver failure (daemon down, connection refused); the
// rollout records it as outcome sandbox_error, which --resume retries.
var ErrUnavailable = errors.New("sandbox unavailable")
