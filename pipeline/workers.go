package pipeline

import (
	"fmt"
	"runtime/debug"
	"sync"
)

// workers runs the dispatcher's tasks on at most max goroutines, each kept
// for the next task (a rollout's grown stack is reused). Go never waits for
// a goroutine to take its task: the dispatcher, whose semaphore admits at
// most max tasks queued or running, goes on to the next row while the task
// starts. A pool that hands each task over on an unbuffered channel makes
// the dispatcher wait, for every row of the first wave, until the task has
// run to its first blocking call (a rollout: its first request sent):
// dispatching 200 rows took 22-33 ms at d345d28^ (instrumented runs of
// scripts/bench-generate.sh scheduling), now about 1 ms; the tests check
// that Go returns before its task runs. (Where the rollouts'
// own CPU fills the machine, as in the scheduling benchmark, the wave's
// last rollout starts no sooner for it.)
type workers struct {
	tasks   chan func()
	wg      sync.WaitGroup
	max     int
	started int // goroutines started; only Go's caller touches it

	panicMu  sync.Mutex
	panicked any // the first task's panic, with its stack, raised again by Wait
}

func newWorkers(max int) *workers {
	return &workers{tasks: make(chan func(), max), max: max}
}

// Go queues f. Its caller keeps at most max tasks queued or running, so Go
// does not block.
func (w *workers) Go(f func()) {
	if w.started < w.max {
		w.started++
		w.wg.Go(w.run)
	}
	w.tasks <- f
}

func (w *workers) run() {
	for f := range w.tasks {
		w.do(f)
	}
}

// do runs f; a panic is kept for Wait (the runtime's stages recover their
// own, runner.call: this is for the runtime's own code).
func (w *workers) do(f func()) {
	defer func() {
		if v := recover(); v != nil {
			w.panicMu.Lock()
			if w.panicked == nil {
				w.panicked = fmt.Sprintf("%v\n\ngoroutine's stack:\n%s", v, debug.Stack())
			}
			w.panicMu.Unlock()
		}
	}()
	f()
}

// Wait waits for every queued task to end and raises the first panic of one
// again; Go must not be called after it.
func (w *workers) Wait() {
	close(w.tasks)
	w.wg.Wait()
	if w.panicked != nil {
		panic(w.panicked)
	}
}
