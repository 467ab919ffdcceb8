package pipeline

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// ShutdownOnSignal wires SIGINT and SIGTERM to Run's two stops. The first
// signal closes the returned stop channel (pass it as Options.Stop: no more
// input is read, records in flight finish and are committed); the returned
// context is cancelled (the hard stop) when grace has passed after it, or at
// once on a second signal. notify, when not nil, is told what happens so the
// CLI can say it. The caller must call release when the run is over; it stops
// listening and cancels the context. It does not block.
func ShutdownOnSignal(parent context.Context, grace time.Duration, notify func(msg string)) (ctx context.Context, stop <-chan struct{}, release func()) {
	if notify == nil {
		notify = func(string) {}
	}
	ctx, cancel := context.WithCancel(parent)
	stopCh := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		defer signal.Stop(sigs)
		var timeout <-chan time.Time
		first := true
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case s := <-sigs:
				if first {
					first = false
					close(stopCh)
					t := time.NewTimer(grace)
					defer t.Stop()
					timeout = t.C
					notify(fmt.Sprintf("%v: finishing the records in flight for up to %v; send it again to stop now", s, grace))
					continue
				}
				notify(fmt.Sprintf("%v again: stopping now", s))
				cancel()
				return
			case <-timeout:
				notify(fmt.Sprintf("grace period of %v over: stopping now", grace))
				cancel()
				return
			}
		}
	}()
	var once bool
	release = func() {
		if !once {
			once = true
			close(done)
			cancel()
		}
	}
	return ctx, stopCh, release
}
