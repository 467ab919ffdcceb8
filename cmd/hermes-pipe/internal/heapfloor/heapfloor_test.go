package heapfloor

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// gogc is the collector's current GOGC.
func gogc() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		floor, live, scanned uint64
		want                 int
	}{
		// goal = live + scanned × p/100 = 2 + 31 × 2 = 64 MiB
		{64 * mib, 2 * mib, 31 * mib, 200},
		// the formula's 3100 would leave the runtime's minimum,
		// 4 MiB × 31, over the floor: capped at 64 / 4 × 100
		{64 * mib, 2 * mib, 2 * mib, 1600},
		// past half the floor: GOGC's default
		{64 * mib, 40 * mib, 41 * mib, 100},
		{64 * mib, 30 * mib, 34 * mib, 100},
		// nothing measured yet
		{64 * mib, 0, 0, 1600},
	} {
		if got := percentFor(c.floor, c.live, c.scanned); got != c.want {
			t.Errorf("percentFor(%d MiB, %d MiB, %d MiB) = %d, want %d", c.floor/mib, c.live/mib, c.scanned/mib, got, c.want)
		}
	}
}

// waitPercent waits for the collector's GOGC to satisfy ok, collecting
// between looks so the floor's cleanup runs.
func waitPercent(t *testing.T, what string, ok func(int) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok(gogc()) {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC is %d, want %s", gogc(), what)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

// endStartFloor ends the floor the package's init keeps (if the test runs
// within its startFor), so its timer cannot set GOGC during the test.
func endStartFloor() { Keep(Default)() }

func TestStartFloor(t *testing.T) {
	// The init's floor, kept from the program's start: GOGC over 100
	// until startFor has passed, then 100 again.
	mu.Lock()
	k := current
	mu.Unlock()
	if k == nil {
		t.Skip("the start's floor already ended")
	}
	if p := gogc(); p <= minPercent {
		t.Errorf("GOGC is %d during the start's floor", p)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		k = current
		mu.Unlock()
		if k == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the start's floor did not end")
		}
		time.Sleep(time.Millisecond)
	}
	if p := gogc(); p != minPercent {
		t.Errorf("after the start's floor GOGC is %d, want %d", p, minPercent)
	}
}

func TestKeepFollowsTheLiveHeap(t *testing.T) {
	endStartFloor()
	t.Setenv("GOGC", "")
	defer debug.SetGCPercent(gogc())
	stop := Keep(Default)
	defer stop()
	runtime.GC()
	waitPercent(t, "over 100 with a small live heap", func(p int) bool { return p > minPercent })

	// A live heap past half the floor: the default again, after a cycle.
	big := make([][]byte, 48)
	for i := range big {
		big[i] = make([]byte, 1<<20)
	}
	waitPercent(t, "100 with 48 MiB live", func(p int) bool { return p == minPercent })
	runtime.KeepAlive(big)
	big = nil
	waitPercent(t, "over 100 once the heap is small again", func(p int) bool { return p > minPercent })

	stop()
	if p := gogc(); p != minPercent {
		t.Errorf("after stop GOGC is %d, want %d", p, minPercent)
	}
	// Stopped: collections leave GOGC alone.
	debug.SetGCPercent(150)
	runtime.GC()
	runtime.GC()
	if p := gogc(); p != 150 {
		t.Errorf("a stopped floor changed GOGC to %d", p)
	}
}

func TestKeepLeavesTheUsersGOGC(t *testing.T) {
	endStartFloor()
	t.Setenv("GOGC", "150")
	defer debug.SetGCPercent(gogc())
	debug.SetGCPercent(150)
	stop := Keep(Default)
	runtime.GC()
	runtime.GC()
	if p := gogc(); p != 150 {
		t.Errorf("with GOGC=150 in the environment, Keep set GOGC to %d", p)
	}
	stop()
	if p := gogc(); p != 150 {
		t.Errorf("with GOGC=150 in the environment, stop set GOGC to %d", p)
	}
}
