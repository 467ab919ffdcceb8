package rollout

import (
	"context"
	"fmt"
	"io/fs"
	"sync"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// asyncSession opens the sandbox session in the background while the first
// LLM call is in flight, so a container start costs no extra latency, and a
// rollout that never calls a tool pays only for the open itself. Exec waits
// for the open; an open failure is returned by the first Exec (the rollout
// then ends as sandbox_error).
type asyncSession struct {
	done chan struct{}
	sess sandbox.Session
	err  error
	once sync.Once
}

func openAsync(ctx context.Context, d sandbox.Driver, spec sandbox.Spec) *asyncSession {
	a := &asyncSession{done: make(chan struct{})}
	go func() {
		defer close(a.done)
		if a.sess, a.err = d.Open(ctx, spec); a.err != nil {
			a.err = &openError{fmt.Errorf("sandbox open: %w", a.err)}
		}
	}()
	return a
}

// openError is a failed open, returned by every later call: a driver
// failure whatever it wraps.
type openError struct{ err error }

func (e *openError) Error() string { return e.err.Error() }
func (e *openError) Unwrap() error { return e.err }

func (a *asyncSession) wait(ctx context.Context) (sandbox.Session, error) {
	select {
	case <-a.done:
		return a.sess, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Exec implements sandbox.Session.
func (a *asyncSession) Exec(ctx context.Context, cmd sandbox.Cmd) (sandbox.Result, error) {
	s, err := a.wait(ctx)
	if err != nil {
		return sandbox.Result{}, err
	}
	return s.Exec(ctx, cmd)
}

// Close waits for the open to finish and closes what it opened.
func (a *asyncSession) Close(ctx context.Context) error {
	var err error
	a.once.Do(func() {
		<-a.done
		if a.sess != nil {
			err = a.sess.Close(ctx)
		}
	})
	return err
}

// ReadRange implements sandbox.Files once the session is open.
func (a *asyncSession) ReadRange(ctx context.Context, path string, off int64, n int) ([]byte, int64, error) {
	s, err := a.wait(ctx)
	if err != nil {
		return nil, 0, err
	}
	return s.ReadRange(ctx, path, off, n)
}

// Stat implements sandbox.Files once the session is open.
func (a *asyncSession) Stat(ctx context.Context, path string) (sandbox.FileInfo, error) {
	s, err := a.wait(ctx)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	return s.Stat(ctx, path)
}

// WriteFile implements sandbox.Files once the session is open.
func (a *asyncSession) WriteFile(ctx context.Context, path string, data []byte, perm fs.FileMode) error {
	s, err := a.wait(ctx)
	if err != nil {
		return err
	}
	return s.WriteFile(ctx, path, data, perm)
}
