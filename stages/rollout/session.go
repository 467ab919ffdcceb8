package rollout

import (
	"context"
	"fmt"
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
			a.err = fmt.Errorf("sandbox open: %w", a.err)
		}
	}()
	return a
}

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
