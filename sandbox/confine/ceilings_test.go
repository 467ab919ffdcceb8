package confine

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestParseBytes(t *testing.T) {
	good := map[string]int64{
		"0": 0, "none": 0, "NONE": 0, "1234": 1234, "64M": 64 << 20, "64MiB": 64 << 20, "64mb": 64 << 20,
		"2G": 2 << 30, "1.5GiB": 3 << 29, "512k": 512 << 10, "1T": 1 << 40, " 3 G ": 3 << 30,
	}
	for in, want := range good {
		got, err := ParseBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"-1", "lots", "1X", "G", "-2G", "99999999999T"} {
		if got, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) = %d, want an error", in, got)
		}
	}
	for n, want := range map[int64]string{0: "none", 64 << 20: "64 MiB", 3 << 29: "1.5 GiB", 1000: "1000 B"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
		if n > 0 {
			if back, err := ParseBytes(strings.ReplaceAll(FormatBytes(n), " ", "")); err != nil || back != n {
				t.Errorf("ParseBytes(FormatBytes(%d)) = %d, %v", n, back, err)
			}
		}
	}
}

// TestDefaultShares: the memory share per worker of a 24 GiB machine, its
// bounds, and the disk default below it.
func TestDefaultShares(t *testing.T) {
	const g = int64(1) << 30
	for _, c := range []struct {
		total   int64
		workers int
		mem     int64
	}{
		{24 * g, 8, 3 * g},
		{24 * g, 1, 12 * g},      // at most half the machine
		{24 * g, 0, 12 * g},      // workers < 1 counts as 1
		{24 * g, 200, 512 << 20}, // at least the floor
		{24 * g, 7, 24 * g / 7 / (1 << 20) * (1 << 20)},
	} {
		if got := shareOf(c.total, c.workers); got != c.mem {
			t.Errorf("shareOf(%d, %d) = %d, want %d", c.total, c.workers, got, c.mem)
		}
	}
	for mem, disk := range map[int64]int64{3 * g: 3 * g / 2, 12 * g: 4 * g, 512 << 20: 256 << 20, 100 << 20: 256 << 20} {
		if got := diskOf(mem); got != disk {
			t.Errorf("diskOf(%d) = %d, want %d", mem, got, disk)
		}
	}
	if m := DefaultMemory(8); m < memoryFloor || (PhysicalMemory() > 0 && m > PhysicalMemory()/2 && m != memoryFloor) {
		t.Errorf("DefaultMemory(8) = %d of %d", m, PhysicalMemory())
	}
	if d, m := DefaultDisk(8), DefaultMemory(8); d > m/2 && d != diskFloor {
		t.Errorf("DefaultDisk(8) = %d above half of DefaultMemory(8) = %d", d, m)
	}
}

// TestMountDiskENOSPC: a file written past the folder's tmpfs size stops
// with ENOSPC, at the size; unmounting leaves the plain folder.
func TestMountDiskENOSPC(t *testing.T) {
	r := Probe(context.Background())
	if r.Disk != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no session folder tmpfs in CI: %v", r.Disk)
		}
		t.Skipf("no session folder tmpfs here: %v", r.Disk)
	}
	dir := filepath.Join(t.TempDir(), "s")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := MountDisk(dir, 8<<20); err != nil {
		t.Fatal(err)
	}
	defer UnmountDisk(dir)
	if got := DiskSize(dir); got != 8<<20 {
		t.Errorf("DiskSize = %d, want %d", got, 8<<20)
	}
	out, err := exec.Command("dd", "if=/dev/zero", "of="+filepath.Join(dir, "big"), "bs=1M", "count=32").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "No space left on device") {
		t.Fatalf("dd past the ceiling: err %v, output %s", err, out)
	}
	if fi, err := os.Stat(filepath.Join(dir, "big")); err != nil || fi.Size() > 8<<20 {
		t.Fatalf("file past the ceiling: %v %v", fi, err)
	}
	if err := UnmountDisk(dir); err != nil {
		t.Fatal(err)
	}
	if DiskSize(dir) != 0 {
		t.Error("still a tmpfs after UnmountDisk")
	}
	if _, err := os.Stat(filepath.Join(dir, "big")); !os.IsNotExist(err) {
		t.Errorf("the tmpfs' file is still there: %v", err)
	}
	if err := UnmountDisk(dir); err != nil {
		t.Errorf("UnmountDisk of a plain folder: %v", err)
	}
}

// TestCgroupCPUWeight: a group made with a CPU weight carries it
// (cpu.shares on v1, cpu.weight on v2 where delegated), and Remove takes
// the cpu folder away too.
func TestCgroupCPUWeight(t *testing.T) {
	r := Probe(context.Background())
	if r.Cgroup == "" {
		t.Skip("no usable cgroup here")
	}
	name := "hermes-confine-cpu-" + strconv.Itoa(os.Getpid())
	c, err := NewCgroup(r.Cgroup, name, Limits{Processes: 20, CPUWeight: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Remove()
	found := false
	for _, d := range c.Dirs {
		for f, want := range map[string]string{"cpu.shares": "512", "cpu.weight": "50"} {
			if b, err := os.ReadFile(filepath.Join(d, f)); err == nil {
				found = true
				if got := strings.TrimSpace(string(b)); got != want {
					t.Errorf("%s/%s = %s, want %s", d, f, got, want)
				}
			}
		}
	}
	hasCPU := false
	for _, ctl := range r.Controllers {
		hasCPU = hasCPU || ctl == "cpu"
	}
	if r.Cgroup == "v1" && hasCPU && !found {
		t.Errorf("no cpu.shares in %v", c.Dirs)
	}
	if err := c.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, d := range c.Dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("cgroup %s still there", d)
		}
	}
	if !strings.Contains(r.Describe(Ceilings{MemoryBytes: 1 << 30, DiskBytes: 1 << 29, CPUWeight: 50}), "cpu weight: 50") {
		t.Errorf("Describe does not show the weight:\n%s", r.Describe(Ceilings{CPUWeight: 50}))
	}
}
