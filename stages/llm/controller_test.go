package llm

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a settable clock for cooldown tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestControllerHalvesOncePerCooldown(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	c := NewController(ControllerOptions{Max: 40, Cooldown: time.Second, Now: clk.now})
	if c.Limit() != 40 || c.Max() != 40 {
		t.Fatalf("limit %d", c.Limit())
	}
	c.OnRateLimit()
	c.OnRateLimit() // same overload: ignored
	if c.Limit() != 20 {
		t.Fatalf("after burst: %d", c.Limit())
	}
	for _, want := range []int{10, 5, 2, 1, 1} {
		clk.add(time.Second)
		c.OnRateLimit()
		if c.Limit() != want {
			t.Fatalf("limit %d, want %d", c.Limit(), want)
		}
	}
	if c.Cuts() != 5 { // 40→20→10→5→2→1; staying at 1 is no cut
		t.Fatalf("cuts %d", c.Cuts())
	}
}

func TestControllerAdditiveIncrease(t *testing.T) {
	c := NewController(ControllerOptions{Max: 6, Initial: 2, Window: 3})
	for i := 0; i < 2; i++ {
		c.OnSuccess()
	}
	if c.Limit() != 2 {
		t.Fatalf("rose early: %d", c.Limit())
	}
	c.OnSuccess()
	if c.Limit() != 3 {
		t.Fatalf("after one window: %d", c.Limit())
	}
	for i := 0; i < 100; i++ {
		c.OnSuccess()
	}
	if c.Limit() != 6 {
		t.Fatalf("should stop at max: %d", c.Limit())
	}
	// Window 0 means "one per current limit" (classic AIMD).
	c = NewController(ControllerOptions{Max: 10, Initial: 4})
	for i := 0; i < 4; i++ {
		c.OnSuccess()
	}
	if c.Limit() != 5 {
		t.Fatalf("window=limit: %d", c.Limit())
	}
}

func TestControllerBoundsConcurrency(t *testing.T) {
	const max = 8
	c := NewController(ControllerOptions{Max: max, Initial: 3, Cooldown: time.Millisecond})
	var cur, peak atomic.Int64
	var wg sync.WaitGroup
	var violations atomic.Int64
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				rel, err := c.Acquire(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				n := cur.Add(1)
				if n > max {
					violations.Add(1)
				}
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				if i%50 == 7 {
					c.OnRateLimit()
				} else {
					c.OnSuccess()
				}
				cur.Add(-1)
				rel()
				rel() // a second release is ignored
			}
		}()
	}
	wg.Wait()
	if violations.Load() != 0 || peak.Load() > max {
		t.Fatalf("peak %d > max %d", peak.Load(), max)
	}
	if c.InFlight() != 0 {
		t.Fatalf("in flight after all released: %d", c.InFlight())
	}
	if c.Limit() < 1 || c.Limit() > max {
		t.Fatalf("limit %d", c.Limit())
	}
}

func TestControllerLimitIsRespectedExactly(t *testing.T) {
	c := NewController(ControllerOptions{Max: 4, Initial: 2})
	r1, _ := c.Acquire(context.Background())
	r2, _ := c.Acquire(context.Background())
	got := make(chan func(), 1)
	go func() {
		r, err := c.Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	select {
	case <-got:
		t.Fatal("third acquire passed a limit of 2")
	case <-time.After(50 * time.Millisecond):
	}
	r1()
	r3 := <-got
	// Raising the limit admits a waiter without any release.
	go func() {
		r, _ := c.Acquire(context.Background())
		got <- r
	}()
	// Wait until it queues: the limit must rise under a waiter, not before.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		queued := c.waiters.Len()
		c.mu.Unlock()
		if queued == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fourth acquire did not queue: %d waiters", queued)
		}
	}
	c.OnSuccess()
	c.OnSuccess() // window = limit 2: +1
	select {
	case r4 := <-got:
		r4()
	case <-time.After(30 * time.Second):
		t.Fatal("raised limit did not admit the waiter")
	}
	r2()
	r3()
	if c.InFlight() != 0 {
		t.Fatalf("in flight %d", c.InFlight())
	}
}

func TestControllerAcquireCancelled(t *testing.T) {
	c := NewController(ControllerOptions{Max: 1})
	rel, _ := c.Acquire(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := c.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	rel()
	if c.InFlight() != 0 {
		t.Fatalf("cancelled waiter kept a slot: %d", c.InFlight())
	}
	rel2, err := c.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rel2()
	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := c.Acquire(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}
}

func BenchmarkControllerAcquireRelease(b *testing.B) {
	c := NewController(ControllerOptions{Max: 1 << 20})
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rel, _ := c.Acquire(ctx)
			c.OnSuccess()
			rel()
		}
	})
}
