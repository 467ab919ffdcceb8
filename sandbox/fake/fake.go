package fake

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// Response is one scripted answer. Delay is how long the command "runs": a
// Delay longer than the command's timeout yields exit 124 and TimedOut, and
// ctx cancellation during the Delay returns ctx's error. A non-nil Err is
// returned as a driver failure (wrap sandbox.ErrUnavailable to simulate a
// daemon that went away).
type Response struct {
	Result sandbox.Result
	Err    error
	Delay  time.Duration
}

// Call is one recorded Exec.
type Call struct {
	RolloutID string
	Image     string
	Command   string
	Timeout   time.Duration // effective timeout
}

type rule struct {
	match func(string) bool
	resp  Response
}

// Driver is the fake driver. Configure it before use; it is safe for
// concurrent use afterwards.
type Driver struct {
	mu      sync.Mutex
	rules   []rule
	queue   []Response
	calls   []Call
	open    int
	opened  int
	openErr error
	cfg     sandbox.Config

	filesErr  error // returned by every file operation when set
	fileCalls int
}

// New returns a fake whose unscripted commands succeed with empty output,
// except `echo WORDS` (prints them), `exit N` (exits N) and `sleep SECONDS`
// (blocks that long or until the timeout or ctx ends it).
func New() *Driver { return &Driver{} }

// Factory is the sandbox.Factory of the "fake" scheme.
func Factory(cfg sandbox.Config) (sandbox.Driver, error) {
	d := New()
	d.cfg = cfg
	return d, nil
}

// On answers every Exec of exactly command with r. Rules are tried in the
// order they were added.
func (d *Driver) On(command string, r Response) *Driver {
	return d.OnMatch(func(c string) bool { return c == command }, r)
}

// OnPrefix answers every Exec whose command starts with prefix with r.
func (d *Driver) OnPrefix(prefix string, r Response) *Driver {
	return d.OnMatch(func(c string) bool { return strings.HasPrefix(c, prefix) }, r)
}

// OnMatch answers every Exec whose command satisfies match with r.
func (d *Driver) OnMatch(match func(command string) bool, r Response) *Driver {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rules = append(d.rules, rule{match: match, resp: r})
	return d
}

// Queue adds responses given, in order, to the next Execs of any session,
// before rules are consulted.
func (d *Driver) Queue(rs ...Response) *Driver {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.queue = append(d.queue, rs...)
	return d
}

// FailOpen makes every later Open return err (nil restores success).
func (d *Driver) FailOpen(err error) *Driver {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.openErr = err
	return d
}

// Calls returns a copy of every Exec recorded so far, in call order.
func (d *Driver) Calls() []Call {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Call(nil), d.calls...)
}

// OpenSessions returns how many sessions are open (opened and not closed).
func (d *Driver) OpenSessions() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.open
}

// Opened returns how many sessions were opened in all.
func (d *Driver) Opened() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.opened
}

// Open records a new session; it fails only when FailOpen set an error or
// ctx is done.
func (d *Driver) Open(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fake sandbox open: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.openErr != nil {
		return nil, fmt.Errorf("fake sandbox open: %w", d.openErr)
	}
	d.open++
	d.opened++
	return &Session{d: d, spec: sandbox.Resolve(spec, d.cfg)}, nil
}

// respond picks the scripted response for command and records the call.
func (d *Driver) respond(spec sandbox.Spec, cmd sandbox.Cmd, timeout time.Duration) Response {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, Call{RolloutID: spec.RolloutID, Image: spec.Image, Command: cmd.Command, Timeout: timeout})
	if len(d.queue) > 0 {
		r := d.queue[0]
		d.queue = d.queue[1:]
		return r
	}
	for _, r := range d.rules {
		if r.match(cmd.Command) {
			return r.resp
		}
	}
	return builtin(cmd.Command)
}

// builtin answers the few commands the fake understands without a script.
func builtin(command string) Response {
	f := strings.Fields(command)
	if len(f) == 0 {
		return Response{}
	}
	switch f[0] {
	case "echo":
		return Response{Result: sandbox.Result{Stdout: strings.Join(f[1:], " ") + "\n"}}
	case "exit":
		if len(f) == 2 {
			if n, err := strconv.Atoi(f[1]); err == nil {
				return Response{Result: sandbox.Result{ExitCode: n}}
			}
		}
	case "false":
		return Response{Result: sandbox.Result{ExitCode: 1}}
	case "sleep":
		if len(f) == 2 {
			if s, err := strconv.ParseFloat(f[1], 64); err == nil {
				return Response{Delay: time.Duration(s * float64(time.Second))}
			}
		}
	}
	return Response{}
}

// Session is one fake session.
type Session struct {
	d      *Driver
	spec   sandbox.Spec
	mu     sync.Mutex // guards closed, files and dirs
	closed bool

	files map[string]memFile // by absolute clean path
	dirs  map[string]bool    // folders created by WriteFile
}

// Exec returns the scripted response after its Delay, applying the timeout,
// cancellation and output limit as a real driver would.
func (s *Session) Exec(ctx context.Context, cmd sandbox.Cmd) (sandbox.Result, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return sandbox.Result{}, fmt.Errorf("fake sandbox exec: %w", sandbox.ErrClosed)
	}
	timeout := cmd.Timeout
	if timeout <= 0 {
		timeout = s.spec.Timeout
	}
	r := s.d.respond(s.spec, cmd, timeout)
	start := time.Now()
	if r.Delay > 0 {
		wait := min(r.Delay, timeout)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return sandbox.Result{}, fmt.Errorf("fake sandbox exec: %w", ctx.Err())
		}
		if r.Delay > timeout {
			return sandbox.Result{ExitCode: 124, TimedOut: true, Duration: time.Since(start)}, nil
		}
	}
	if r.Err != nil {
		return sandbox.Result{}, fmt.Errorf("fake sandbox exec: %w", r.Err)
	}
	res := r.Result
	var to, te bool
	res.Stdout, to = sandbox.Cut(res.Stdout, s.spec.MaxOutput)
	res.Stderr, te = sandbox.Cut(res.Stderr, s.spec.MaxOutput)
	res.Truncated = res.Truncated || to || te
	if res.Duration == 0 {
		res.Duration = time.Since(start) + time.Microsecond
	}
	return res, nil
}

// Close marks the session closed; it is safe to call more than once.
func (s *Session) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.d.mu.Lock()
	s.d.open--
	s.d.mu.Unlock()
	return nil
}

// Closed reports whether Close was called.
func (s *Session) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}
