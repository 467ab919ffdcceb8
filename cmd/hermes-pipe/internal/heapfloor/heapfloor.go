// Package heapfloor keeps the garbage collector's heap goal from falling
// below a floor while a run goes on.
//
// With Go's default GOGC=100 the collector runs each time the heap doubles
// its live size. A generate run keeps little alive (10-15 MB for 200 rollouts
// in flight) but allocates it over and over (request bodies, replies,
// records), so the collector ran a dozen times in a 3-second run of 6,000
// model calls, its mark workers taking a core while the first waves of
// requests go out, and every cycle's assists and write barriers landing on
// the rollouts' own path. Keeping the goal at or above a floor (64 MiB)
// leaves a few cycles per run (3 instead of 12 there; CPU per model call
// 0.11-0.12 ms instead of 0.13-0.16, the run 7.7 ms shorter: mean of ten
// interleaved runs each way, GOGC=100 turning the floor off); once the live
// heap is past half the floor the goal is GOGC=100's again, so the floor
// costs at most its own size in memory (peak RSS there 118 MB instead of
// 86; the 1,000-rollout memory benchmark stays at 100 MB, the 1,000,000-row
// resume at 158 MB).
//
// The program's start keeps the floor too, for its first startFor or until
// a run keeps its own: package initialisation alone allocates ~3 MB, which
// at the runtime's first goal (4 MB) started a collection in the middle of
// it (`hermes-pipe version`: 13.0 ms without the start's floor, 10.9 ms
// with it, `perf stat -r 30` three times each).
//
// A GOGC set in the environment is the user's choice and is left alone.
package heapfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// Default is the floor a run keeps (Keep).
const Default = 64 << 20

// runtimeHeapMinimum is the runtime's smallest heap goal at GOGC=100
// (defaultHeapMinimum in runtime/mgcpacer.go).
const runtimeHeapMinimum = 4 << 20

// minPercent is GOGC's default, the percent kept once the live heap is
// past half the floor.
const minPercent = 100

// startFor is how long the floor kept from the program's start lasts when
// no run keeps its own: past the package inits and the flags, with a bound
// on what a command that is not a run holds above its own needs.
const startFor = 50 * time.Millisecond

func init() {
	if os.Getenv("GOGC") == "" {
		time.AfterFunc(startFor, keep(Default, false))
	}
}

var (
	mu      sync.Mutex
	current *keeper // the floor kept; nil when none
)

type keeper struct {
	floor  uint64
	sample []metrics.Sample
}

// Keep keeps the heap goal at floor bytes or more, until the returned stop
// is called (stop puts GOGC's default back). It does nothing, and its stop
// nothing, when the environment sets GOGC. Only one floor is kept at a time:
// a second Keep replaces the first.
func Keep(floor uint64) (stop func()) {
	if os.Getenv("GOGC") != "" || floor == 0 {
		return func() {}
	}
	return keep(floor, true)
}

// keep is Keep; measured says whether to read the heap for the first
// percent. The program's start does not: nothing is collected yet, so the
// percent is percentFor's cap whatever the heap, and the runtime's first
// metrics read (~30-60 µs) is spared to every command.
func keep(floor uint64, measured bool) (stop func()) {
	k := &keeper{floor: floor, sample: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}}
	mu.Lock()
	defer mu.Unlock()
	current = k
	if measured {
		k.adjust()
	} else {
		debug.SetGCPercent(percentFor(floor, 0, 0))
	}
	k.arm()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if current == k {
			current = nil
			debug.SetGCPercent(minPercent)
		}
	}
}

// arm calls adjust after the next collection: the cleanup of an object
// nothing refers to runs once a cycle has found it unreachable, and arms
// the next one.
func (k *keeper) arm() {
	// Not a tiny allocation (16 bytes and up, with a pointer): the tiny
	// allocator shares blocks between objects, which delays their cleanup.
	type token struct {
		_ *byte
		_ [8]byte
	}
	runtime.AddCleanup(&token{}, func(k *keeper) {
		mu.Lock()
		defer mu.Unlock()
		if current == k {
			k.adjust()
			k.arm()
		}
	}, k)
}

// adjust sets GOGC (with mu held) so that the next goal is the floor, or GOGC's default
// once that is higher. Go's goal is live + (live + stacks + globals) ×
// GOGC/100, with the stacks and globals the last cycle scanned.
func (k *keeper) adjust() {
	metrics.Read(k.sample)
	u := func(i int) uint64 {
		if v := k.sample[i].Value; v.Kind() == metrics.KindUint64 {
			return v.Uint64()
		}
		return 0
	}
	live := u(0)
	if live == 0 { // before the first cycle: the heap in use
		live = u(1)
	}
	debug.SetGCPercent(percentFor(k.floor, live, live+u(2)+u(3)))
}

// percentFor is the GOGC that puts the next goal, live + scanned ×
// GOGC/100, at floor, and never less than minPercent.
func percentFor(floor, live, scanned uint64) int {
	if scanned == 0 {
		scanned = 1
	}
	if floor <= live+scanned*minPercent/100 {
		return minPercent
	}
	p := (floor - live) * 100 / scanned
	// The runtime's goal is never under 4 MiB × GOGC/100 (its heap
	// minimum, scaled with GOGC): past floor / 4 MiB × 100 that alone
	// would put the goal over the floor.
	p = min(p, floor*100/runtimeHeapMinimum)
	return max(int(p), minPercent)
}
