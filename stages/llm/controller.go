package llm

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// ControllerOptions configure a Controller. Zero values mean defaults.
type ControllerOptions struct {
	// Max is the ceiling on concurrent requests (default 64).
	Max int
	// Initial is the starting limit (default Max).
	Initial int
	// Window is how many successes raise the limit by one; 0 means the
	// current limit, i.e. +1 per "round" of requests (classic AIMD).
	Window int
	// Cooldown is the least time between two halvings (default 1s), so a
	// burst of 429s from one overload cuts the limit once.
	Cooldown time.Duration
	// Now is the clock seam for tests (default time.Now).
	Now func() time.Time
}

// Controller is an AIMD concurrency limiter shared by every worker that calls
// the LLM: Acquire bounds requests in flight; a 429 (OnRateLimit) halves the
// limit, at most once per cooldown and never below 1; successes (OnSuccess)
// add one per window back up to the maximum. The fast paths cost an atomic
// add and one short uncontended critical section; waiters queue in FIFO order.
type Controller struct {
	max      int64
	window   int64
	cooldown time.Duration
	now      func() time.Time

	limit     atomic.Int64 // read lock-free by Limit
	inflight  atomic.Int64 // read lock-free by InFlight
	successes atomic.Int64
	cuts      atomic.Int64

	mu      sync.Mutex
	lastCut time.Time
	waiters list.List // of chan struct{}
}

// NewController returns a controller filled with defaults.
func NewController(o ControllerOptions) *Controller {
	if o.Max <= 0 {
		o.Max = 64
	}
	if o.Initial <= 0 || o.Initial > o.Max {
		o.Initial = o.Max
	}
	if o.Cooldown <= 0 {
		o.Cooldown = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &Controller{max: int64(o.Max), window: int64(o.Window), cooldown: o.Cooldown, now: o.Now}
	c.limit.Store(int64(o.Initial))
	c.waiters.Init()
	return c
}

// Acquire blocks until a request slot is free or ctx ends. The returned
// release must be called exactly once when the request is over (extra calls
// are ignored).
func (c *Controller) Acquire(ctx context.Context) (release func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.waiters.Len() == 0 && c.inflight.Load() < c.limit.Load() {
		c.inflight.Add(1)
		c.mu.Unlock()
		return c.releaser(), nil
	}
	ch := make(chan struct{})
	elem := c.waiters.PushBack(ch)
	c.mu.Unlock()

	select {
	case <-ch:
		return c.releaser(), nil
	case <-ctx.Done():
		c.mu.Lock()
		select {
		case <-ch:
			// Granted while we were giving up: hand the slot back.
			c.mu.Unlock()
			c.release()
		default:
			c.waiters.Remove(elem)
			c.mu.Unlock()
		}
		return nil, ctx.Err()
	}
}

func (c *Controller) releaser() func() {
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			c.release()
		}
	}
}

func (c *Controller) release() {
	c.mu.Lock()
	c.inflight.Add(-1)
	c.grantLocked()
	c.mu.Unlock()
}

// grantLocked hands free slots to waiters in FIFO order.
func (c *Controller) grantLocked() {
	for c.waiters.Len() > 0 && c.inflight.Load() < c.limit.Load() {
		front := c.waiters.Front()
		c.waiters.Remove(front)
		c.inflight.Add(1)
		close(front.Value.(chan struct{}))
	}
}

// OnSuccess records a request that was not rate limited. Every window of
// successes raises the limit by one, up to the maximum. It does not block.
func (c *Controller) OnSuccess() {
	n := c.successes.Add(1)
	w := c.window
	if w <= 0 {
		w = c.limit.Load()
	}
	if n < w || c.limit.Load() >= c.max {
		if n >= w {
			c.successes.Store(0)
		}
		return
	}
	c.mu.Lock()
	if c.successes.Load() >= w {
		c.successes.Store(0)
		if l := c.limit.Load(); l < c.max {
			c.limit.Store(l + 1)
			c.grantLocked()
		}
	}
	c.mu.Unlock()
}

// OnRateLimit records a 429: the limit halves (not below 1) unless it was
// already cut within the cooldown. Requests in flight are not interrupted;
// new ones wait until the count falls under the new limit.
func (c *Controller) OnRateLimit() {
	c.mu.Lock()
	now := c.now()
	if c.lastCut.IsZero() || now.Sub(c.lastCut) >= c.cooldown {
		old := c.limit.Load()
		l := max(old/2, 1)
		if l < old {
			c.limit.Store(l)
			c.cuts.Add(1)
		}
		c.lastCut = now
		c.successes.Store(0)
	}
	c.mu.Unlock()
}

// Limit returns the current concurrency limit, for progress display.
func (c *Controller) Limit() int { return int(c.limit.Load()) }

// InFlight returns how many slots are held right now.
func (c *Controller) InFlight() int { return int(c.inflight.Load()) }

// Max returns the ceiling the limit climbs back to.
func (c *Controller) Max() int { return int(c.max) }

// Cuts returns how many times a 429 lowered the limit.
func (c *Controller) Cuts() int { return int(c.cuts.Load()) }
