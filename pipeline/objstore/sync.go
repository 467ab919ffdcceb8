package objstore

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Syncer pushes an output folder to a store periodically while a run writes
// it. Start it with StartSync; Stop ends it with a last push.
type Syncer struct {
	store *Store
	dir   string
	log   *slog.Logger
	stop  chan struct{}
	done  sync.WaitGroup
}

// StartSync pushes dir to s every interval (default 30s) in a goroutine
// until Stop. A failed periodic push is logged and tried again at the next
// tick: the run goes on, the spool keeps the data.
func StartSync(ctx context.Context, s *Store, dir string, interval time.Duration, log *slog.Logger) *Syncer {
	if interval <= 0 {
		interval = 30 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	y := &Syncer{store: s, dir: dir, log: log, stop: make(chan struct{})}
	y.done.Add(1)
	go func() {
		defer y.done.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-y.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if _, err := s.Push(ctx, dir); err != nil {
					log.Warn("periodic upload failed; will retry", "store", s.URL(), "err", err)
				}
			}
		}
	}()
	return y
}

// Stop ends the periodic pushes and makes a last one with ctx, whose error it
// returns: after a nil error the store holds everything dir committed.
func (y *Syncer) Stop(ctx context.Context) error {
	close(y.stop)
	y.done.Wait()
	_, err := y.store.Push(ctx, y.dir)
	return err
}
