package rollout

import (
	"context"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// lazySession opens the rollout's sandbox session at its first use: the
// first Exec or file operation (a terminal or file tool, execute_code, an
// MCP server that needs the rollout's folder, or a grader's command after
// the turns). A rollout that never uses its sandbox opens none and pays
// nothing for it; the open is not in flight during a model call, so it
// adds nothing to that call's latency. The first use waits for the open and
// the time it waited is kept (waited) for the record's sandbox_start_ms. An
// open failure is returned by that use and every later one (the rollout
// then ends as sandbox_error). A rollout uses its session from one
// goroutine at a time; the mutex only keeps the race detector and a
// late Close honest.
type lazySession struct {
	d    sandbox.Driver
	spec sandbox.Spec
	now  func() time.Time

	mu     sync.Mutex
	opened bool // an open was tried
	sess   sandbox.Session
	err    error
	wait   time.Duration // time spent opening
}

func newLazySession(d sandbox.Driver, spec sandbox.Spec, now func() time.Time) *lazySession {
	return &lazySession{d: d, spec: spec, now: now}
}

// openError is a failed open, returned by every later call: a driver
// failure whatever it wraps.
type openError struct{ err error }

func (e *openError) Error() string { return e.err.Error() }
func (e *openError) Unwrap() error { return e.err }

// open opens the session on first use and returns it, or the open's error.
// It blocks for the driver's Open the first time only; forExec says the
// use is a command, whose runner (sandbox.Starter) it then starts too.
func (a *lazySession) open(ctx context.Context, forExec bool) (sandbox.Session, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.opened {
		return a.sess, a.err
	}
	if err := ctx.Err(); err != nil {
		return nil, err // not an open failure: a later use with a live context may open
	}
	a.opened = true
	t0 := a.now()
	if a.sess, a.err = a.d.Open(ctx, a.spec); a.err != nil {
		a.sess, a.err = nil, &openError{fmt.Errorf("sandbox open: %w", a.err)}
	} else if st, ok := a.sess.(sandbox.Starter); ok && forExec {
		// A driver that starts its shell at the first command starts it
		// here: the start is the open's time, not the command's.
		if err := st.Start(ctx); err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
			_ = a.sess.Close(cctx)
			cancel()
			a.sess, a.err = nil, &openError{fmt.Errorf("sandbox open: %w", err)}
		}
	}
	a.wait += a.now().Sub(t0)
	return a.sess, a.err
}

// waited returns the time spent opening the session so far.
func (a *lazySession) waited() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.wait
}

// take hands the open session (nil when none was opened) to the caller,
// who closes it; later uses fail as on a closed session.
func (a *lazySession) take() sandbox.Session {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sess
	a.sess, a.opened = nil, true
	if a.err == nil {
		a.err = &openError{fmt.Errorf("sandbox: the rollout's session is closed")}
	}
	return s
}

// Exec implements sandbox.Session.
func (a *lazySession) Exec(ctx context.Context, cmd sandbox.Cmd) (sandbox.Result, error) {
	s, err := a.open(ctx, true)
	if err != nil {
		return sandbox.Result{}, err
	}
	return s.Exec(ctx, cmd)
}

// Close closes the session if one was opened; it blocks for the driver's
// Close. The rollout closes through take instead, off its path.
func (a *lazySession) Close(ctx context.Context) error {
	if s := a.take(); s != nil {
		return s.Close(ctx)
	}
	return nil
}

// ReadRange implements sandbox.Files, opening the session first.
func (a *lazySession) ReadRange(ctx context.Context, path string, off int64, n int) ([]byte, int64, error) {
	s, err := a.open(ctx, false)
	if err != nil {
		return nil, 0, err
	}
	return s.ReadRange(ctx, path, off, n)
}

// Stat implements sandbox.Files, opening the session first.
func (a *lazySession) Stat(ctx context.Context, path string) (sandbox.FileInfo, error) {
	s, err := a.open(ctx, false)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	return s.Stat(ctx, path)
}

// WriteFile implements sandbox.Files, opening the session first.
func (a *lazySession) WriteFile(ctx context.Context, path string, data []byte, perm fs.FileMode) error {
	s, err := a.open(ctx, false)
	if err != nil {
		return err
	}
	return s.WriteFile(ctx, path, data, perm)
}

// closer closes rollouts' sessions off their path: Process hands the
// session over and returns, a goroutine closes it, and Stage.Close waits
// for every close still running. At most maxClosing closes run at once;
// past that a rollout closes its own session (and counts the wait).
type closer struct {
	wg  sync.WaitGroup
	sem chan struct{}
}

// maxClosing bounds the sessions closing in the background, so a driver
// whose Close is slower than the rollouts cannot pile up containers.
const maxClosing = 64

func newCloser() *closer { return &closer{sem: make(chan struct{}, maxClosing)} }

// closeTimeout bounds one session's Close.
const closeTimeout = 30 * time.Second

// close closes sess in the background when a slot is free (returns at
// once), otherwise in the caller's goroutine (blocks for the Close). ctx's
// values are kept, its cancellation is not: a session opened is always
// closed.
func (c *closer) close(ctx context.Context, sess sandbox.Session) {
	if sess == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	select {
	case c.sem <- struct{}{}:
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer func() { <-c.sem }()
			c.closeNow(ctx, sess)
		}()
	default:
		c.closeNow(ctx, sess)
	}
}

func (c *closer) closeNow(ctx context.Context, sess sandbox.Session) {
	cctx, cancel := context.WithTimeout(ctx, closeTimeout)
	defer cancel()
	// A failed close is not the record's: what it left is collected by the
	// driver's GC at the next run of the folder (collectPrevious).
	_ = sess.Close(cctx)
}

// wait blocks until every background close has returned, or ctx ends (an
// error then: sessions may be left to the driver's GC).
func (c *closer) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sandbox sessions still closing: %w", ctx.Err())
	}
}
