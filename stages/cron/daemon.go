package cron

import (
	"context"
	"time"
)

// DaemonOptions tune RunDaemon; the zero value means the defaults.
type DaemonOptions struct {
	// After is the timer seam (default time.After); tests pass a fake clock's.
	After func(d time.Duration) <-chan time.Time
	// ChangeCheck is how often jobs.json's stamp (one stat) is compared to
	// notice edits between fire times; default 1 s of real time.
	ChangeCheck time.Duration
	// MaxSleep caps one sleep so a wall-clock jump is noticed; default 5 min.
	MaxSleep time.Duration
	// BusyRetry is the wait after finding the tick lock held; default 1 s.
	BusyRetry time.Duration
	// ShutdownGrace is how long running jobs may finish after ctx ends
	// before they are cancelled; default 30 s.
	ShutdownGrace time.Duration
	// OnPass, if set, is called after every claiming pass (tests, logging).
	OnPass func(ClaimReport, error)
}

// RunDaemon runs the scheduler until ctx ends: a claiming pass, then a sleep
// until the earliest next_run_at (no fixed polling), woken early when
// jobs.json changes. Claimed occurrences run concurrently, at most
// Scheduler.MaxParallel at once. When ctx ends it
// stops claiming, lets running jobs finish for ShutdownGrace, then cancels
// them, and returns nil.
func (s *Scheduler) RunDaemon(ctx context.Context, o DaemonOptions) error {
	after := o.After
	if after == nil {
		after = time.After
	}
	check := o.ChangeCheck
	if check <= 0 {
		check = time.Second
	}
	maxSleep := o.MaxSleep
	if maxSleep <= 0 {
		maxSleep = 5 * time.Minute
	}
	busyRetry := o.BusyRetry
	if busyRetry <= 0 {
		busyRetry = time.Second
	}
	grace := o.ShutdownGrace
	if grace <= 0 {
		grace = 30 * time.Second
	}

	runCtx, cancelRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRuns()
	pool := s.newPool()

	changed := make(chan struct{}, 1)
	go func() {
		last := s.Store.Stamp()
		t := time.NewTicker(check)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if st := s.Store.Stamp(); st != last {
					last = st
					select {
					case changed <- struct{}{}:
					default:
					}
				}
			}
		}
	}()

	for ctx.Err() == nil {
		rep, err := s.ClaimDue(ctx)
		if o.OnPass != nil {
			o.OnPass(rep, err)
		}
		for _, p := range rep.Problems() {
			s.log().Error("job cannot be scheduled; the others run", "job", p.ID, "err", p.Error)
		}
		for _, c := range rep.Claims {
			pool.execute(runCtx, c, nil)
		}
		var wait time.Duration
		switch {
		case err != nil:
			s.log().Error("claiming pass failed", "err", err)
			wait = 5 * time.Second
		case rep.Busy:
			wait = busyRetry
		case rep.NextDue.IsZero():
			wait = maxSleep
		default:
			wait = min(max(rep.NextDue.Sub(s.now()), 0), maxSleep)
		}
		if wait == 0 {
			continue
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-after(wait):
		}
	}

	done := make(chan struct{})
	go func() { pool.wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		cancelRuns()
		<-done
	}
	return nil
}
