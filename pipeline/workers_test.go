package pipeline

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestWorkersGoDoesNotWait: Go returns for each of max tasks while every
// started task is still blocked (the dispatcher reads the next row while a
// rollout starts), every task runs, and at most max goroutines run them.
func TestWorkersGoDoesNotWait(t *testing.T) {
	const max = 5
	w := newWorkers(max)
	release := make(chan struct{})
	var running, peak, done atomic.Int64
	var started sync.WaitGroup
	started.Add(max)
	for range max {
		w.Go(func() {
			n := running.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			started.Done()
			<-release
			running.Add(-1)
			done.Add(1)
		})
	}
	// Every Go above returned while no task could end: the tasks are all
	// running, blocked, at once.
	started.Wait()
	close(release)
	for range 3 * max { // more tasks than goroutines: they are reused
		w.Go(func() { done.Add(1) })
	}
	w.Wait()
	if done.Load() != 4*max || peak.Load() != max || w.started != max {
		t.Errorf("done %d tasks (want %d), %d at once (want %d), %d goroutines (want %d)", done.Load(), 4*max, peak.Load(), max, w.started, max)
	}
}

// TestWorkersGoReturnsBeforeTheTaskRuns: on one CPU, Go hands its task to
// a new goroutine and returns without yielding to it (a pool that hands a
// task over on an unbuffered channel runs it first, to its first block).
func TestWorkersGoReturnsBeforeTheTaskRuns(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	w := newWorkers(2)
	var ran atomic.Bool
	release := make(chan struct{})
	w.Go(func() {
		ran.Store(true)
		<-release
	})
	if ran.Load() {
		t.Error("Go waited for its task to start")
	}
	close(release)
	w.Wait()
	if !ran.Load() {
		t.Error("the task never ran")
	}
}

// TestWorkersPanic: a task's panic does not stop the others and Wait
// raises it again, with its value.
func TestWorkersPanic(t *testing.T) {
	w := newWorkers(2)
	var done atomic.Int64
	w.Go(func() { panic("kaboom") })
	w.Go(func() { done.Add(1) })
	defer func() {
		v := recover()
		if s, ok := v.(string); !ok || !strings.Contains(s, "kaboom") {
			t.Errorf("Wait raised %v, want the task's panic", v)
		}
		if done.Load() != 1 {
			t.Errorf("%d other tasks ran, want 1", done.Load())
		}
	}()
	w.Wait()
	t.Error("Wait returned after a task panicked")
}
