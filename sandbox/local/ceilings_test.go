package local

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
)

// Small ceilings for the tests: a row writes and allocates past them.
const (
	testDisk   = 64 << 20
	testMemory = 128 << 20
)

// ceilingDriver is a pooled confined driver with the test ceilings; it
// fails (in CI) or skips when this machine cannot hold them.
func ceilingDriver(t *testing.T) *Driver {
	t.Helper()
	d, err := New(sandbox.Config{RunID: "ceilings", Local: sandbox.LocalConfig{BaseDir: t.TempDir(),
		Limits: sandbox.LocalLimits{Processes: 256, MemoryBytes: testMemory, DiskBytes: testDisk, CPUWeight: 100}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Release(); err != nil {
			t.Errorf("Release: %v", err)
		}
	})
	if w := d.Warnings(); len(w) > 0 || d.DiskBytes() != testDisk {
		if os.Getenv("CI") != "" {
			t.Fatalf("ceilings not held in CI: %v", w)
		}
		t.Skipf("ceilings not held here: %v", w)
	}
	return d
}

func run(t *testing.T, s sandbox.Session, cmd string) sandbox.Result {
	t.Helper()
	r, err := s.Exec(context.Background(), sandbox.Cmd{Command: cmd})
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return r
}

// TestDiskCeilingENOSPC: a row writing past its disk ceiling to /tmp and
// its home gets "No space left on device", its session folder on the host
// is a tmpfs of the ceiling's size, the row's next command still runs, a
// row running beside it completes, and the next row of the same sandbox
// finds /tmp and home empty and the whole ceiling free again.
func TestDiskCeilingENOSPC(t *testing.T) {
	d := ceilingDriver(t)
	a := openIn(t, d, sandbox.Spec{})
	b := openIn(t, d, sandbox.Spec{})
	defer a.Close(context.Background())
	defer b.Close(context.Background())
	if got := confine.DiskSize(a.Dir()); got != testDisk {
		t.Fatalf("session folder %s: tmpfs of %d bytes, want %d", a.Dir(), got, testDisk)
	}
	var wg sync.WaitGroup
	var other sandbox.Result
	wg.Add(1)
	go func() {
		defer wg.Done()
		other = run(t, b, `head -c 32M /dev/zero >/tmp/mine && wc -c </tmp/mine`)
	}()
	r := run(t, a, `head -c 100M /dev/zero >/tmp/big; echo "tmp=$?"; head -c 10M /dev/zero >"$HOME/more"; echo "home=$?"`)
	out := r.Stdout + r.Stderr
	if !strings.Contains(out, "No space left on device") || !strings.Contains(out, "tmp=1") || !strings.Contains(out, "home=1") {
		t.Fatalf("writing past the disk ceiling: exit %d, output %q", r.ExitCode, out)
	}
	if r := run(t, a, `echo still here`); strings.TrimSpace(r.Stdout) != "still here" {
		t.Fatalf("the row's next command: %+v", r)
	}
	wg.Wait()
	if strings.TrimSpace(other.Stdout) != strconv.Itoa(32<<20) {
		t.Fatalf("the row beside it: %+v", other)
	}
	dir := a.Dir()
	next, next2 := reopenPair(t, d, a, b)
	if next.Dir() != dir || !next.Reused() {
		t.Fatalf("the next row did not get the full sandbox again (dir %s, reused %v)", next.Dir(), next.Reused())
	}
	r = run(t, next, `[ ! -e /tmp/big ] && [ -z "$(ls -A "$HOME")" ] && head -c 48M /dev/zero >/tmp/again && wc -c </tmp/again`)
	if strings.TrimSpace(r.Stdout) != strconv.Itoa(48<<20) || r.ExitCode != 0 {
		t.Fatalf("the next row of the sandbox: exit %d, stdout %q, stderr %q", r.ExitCode, r.Stdout, r.Stderr)
	}
	for _, s := range []*Session{next, next2} {
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("session folder %s still there after Release (%v)", dir, err)
	}
	if mounted(t, dir) {
		t.Errorf("session folder %s still mounted after Release", dir)
	}
}

// TestMemoryCeilingOOM: a row allocating past its memory ceiling has its
// command killed by the kernel (an OOM kill in the session's cgroup), its
// shell and supervisor live on (its next command runs), a row beside it
// completes, and the next row of the same sandbox works.
func TestMemoryCeilingOOM(t *testing.T) {
	if _, err := os.Stat("/usr/bin/perl"); err != nil {
		t.Skip("no perl")
	}
	d := ceilingDriver(t)
	a := openIn(t, d, sandbox.Spec{})
	b := openIn(t, d, sandbox.Spec{})
	defer a.Close(context.Background())
	defer b.Close(context.Background())
	var wg sync.WaitGroup
	var other sandbox.Result
	wg.Add(1)
	go func() {
		defer wg.Done()
		other = run(t, b, `head -c 32M /dev/zero | wc -c`)
	}()
	r := run(t, a, `perl -e '$x = "a" x (512 << 20); print "allocated\n"'`)
	if r.ExitCode != 137 || strings.Contains(r.Stdout, "allocated") {
		t.Fatalf("allocating 512 MiB under a %d-byte ceiling: exit %d, stdout %q, stderr %q", testMemory, r.ExitCode, r.Stdout, r.Stderr)
	}
	if n := oomKills(t, a); n < 1 {
		t.Errorf("the session's cgroup counted %d OOM kills, want at least 1", n)
	}
	if r := run(t, a, `echo still here`); strings.TrimSpace(r.Stdout) != "still here" {
		t.Fatalf("the row's next command: %+v", r)
	}
	wg.Wait()
	if strings.TrimSpace(other.Stdout) != strconv.Itoa(32<<20) {
		t.Fatalf("the row beside it: %+v", other)
	}
	next, next2 := reopenPair(t, d, a, b)
	if !next.Reused() {
		t.Fatalf("the next row did not get a pooled sandbox")
	}
	if r := run(t, next, `perl -e '$x = "a" x (32 << 20); print "ok\n"'`); strings.TrimSpace(r.Stdout) != "ok" {
		t.Fatalf("the next row of the sandbox: %+v", r)
	}
	for _, s := range []*Session{next, next2} {
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// reopenPair closes the rows a and b, waits until the pool holds both
// sandboxes, and opens the next two rows; next is the one in a's sandbox
// folder when either is (both are closed when the test ends).
func reopenPair(t *testing.T, d *Driver, a, b *Session) (next, next2 *Session) {
	t.Helper()
	dir := a.Dir()
	for _, s := range []*Session{a, b} {
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	idle(t, d, 2)
	next = openIn(t, d, sandbox.Spec{})
	next2 = openIn(t, d, sandbox.Spec{})
	t.Cleanup(func() {
		next.Close(context.Background())
		next2.Close(context.Background())
	})
	if next.Dir() != dir {
		next, next2 = next2, next
	}
	return next, next2
}

// oomKills reads the OOM kill count of s's cgroup (v1 memory.oom_control,
// v2 memory.events).
func oomKills(t *testing.T, s *Session) int {
	t.Helper()
	cg := s.cgroupIfAny()
	if cg == nil {
		t.Fatal("the session has no cgroup")
	}
	for _, dir := range cg.Dirs {
		for _, f := range []string{"memory.oom_control", "memory.events"} {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				continue
			}
			for _, l := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(l, "oom_kill "); ok {
					n, _ := strconv.Atoi(strings.TrimSpace(v))
					return n
				}
			}
		}
	}
	t.Fatalf("no OOM count in %v", cg.Dirs)
	return 0
}

// mounted reports whether dir is a mount point in /proc/self/mountinfo.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// TestGCRemovesMountedFolder: the folder of a session a killed run never
// closed is still a tmpfs; gc unmounts and removes it.
func TestGCRemovesMountedFolder(t *testing.T) {
	d := ceilingDriver(t)
	s := openIn(t, d, sandbox.Spec{})
	if r := run(t, s, `echo left >/tmp/f && echo ok`); strings.TrimSpace(r.Stdout) != "ok" {
		t.Fatalf("exec: %+v", r)
	}
	dir := s.Dir()
	// What a kill -9 of the run leaves: the sandbox gone, its folder not.
	p := s.proc()
	p.kill()
	if !mounted(t, dir) {
		t.Fatalf("%s is not mounted", dir)
	}
	n, err := d.GC(context.Background(), "ceilings")
	if err != nil || n < 1 {
		t.Fatalf("GC = %d, %v", n, err)
	}
	if mounted(t, dir) {
		t.Errorf("%s still mounted after GC", dir)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still there after GC (%v)", dir, err)
	}
	_ = s.Close(context.Background())
}
