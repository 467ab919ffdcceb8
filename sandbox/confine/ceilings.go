package confine

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Per-session ceilings on by default (the caller fills them from these
// unless told otherwise):
//
//   - memory: a share of this machine per worker (DefaultMemory), held by
//     the session's cgroup: its processes and the tmpfs pages they write;
//   - disk: the session folder (home, /tmp, the shell's state) on a tmpfs
//     of DefaultDisk bytes (MountDisk): a command that fills it gets
//     ENOSPC, the host disk and every other session are untouched. tmpfs
//     rather than a disk-backed quota because it needs no file system
//     support (project quotas) nor loop devices, leaves nothing behind when
//     a run is killed but a mount gc removes, and is emptied in one step;
//     its pages count against the memory ceiling, which is why the default
//     disk is at most half the default memory: the disk fills (ENOSPC)
//     before the memory does (OOM);
//   - CPU: the session's cgroup CPU weight, DefaultCPUWeight.

// DefaultCPUWeight is the CPU weight of a session's cgroup unless told
// otherwise: a plain process's (cgroup v2's default), so busy sessions
// share the CPU evenly however many processes each runs.
const DefaultCPUWeight = 100

const (
	mib = int64(1) << 20
	gib = int64(1) << 30

	memoryFloor = 512 * mib // the least DefaultMemory gives
	diskFloor   = 256 * mib // the least DefaultDisk gives
	diskCeil    = 4 * gib   // the most DefaultDisk gives
)

// PhysicalMemory is this machine's memory in bytes (MemTotal), or this
// process's own cgroup memory limit when that is lower (a container); 0 when
// neither can be read.
func PhysicalMemory() int64 {
	total := memTotal()
	if l := ownMemoryLimit(); l > 0 && (total == 0 || l < total) {
		total = l
	}
	return total
}

// memTotal reads MemTotal from /proc/meminfo.
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// ownMemoryLimit is the memory limit of this process's own cgroup (v2
// memory.max, v1 memory.limit_in_bytes); 0 when there is none.
func ownMemoryLimit() int64 {
	own := ownGroups()
	for _, f := range []string{
		filepath.Join(cgroupRoot, own[""], "memory.max"),
		filepath.Join(cgroupRoot, "memory", own["memory"], "memory.limit_in_bytes"),
	} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n <= 0 || n >= math.MaxInt64/2 { // "max", or v1's "unlimited" (near MaxInt64)
			return 0
		}
		return n
	}
	return 0
}

// DefaultMemory is the memory ceiling of one session when workers sessions
// run at once: an even share of PhysicalMemory, at most half of it (one
// worker cannot take the machine) and at least 512 MiB, rounded down to a
// MiB. Unknown memory gives 2 GiB.
func DefaultMemory(workers int) int64 {
	total := PhysicalMemory()
	if total <= 0 {
		return 2 * gib
	}
	return shareOf(total, workers)
}

func shareOf(total int64, workers int) int64 {
	if workers < 1 {
		workers = 1
	}
	share := total / int64(workers)
	share = min(share, total/2)
	share = max(share, memoryFloor)
	return share / mib * mib
}

// DefaultDisk is the disk ceiling (session folder tmpfs size) of one
// session when workers sessions run at once: half of DefaultMemory, so the
// folder fills before the memory does, between 256 MiB and 4 GiB.
func DefaultDisk(workers int) int64 {
	return diskOf(DefaultMemory(workers))
}

func diskOf(memory int64) int64 {
	return min(max(memory/2/mib*mib, diskFloor), diskCeil)
}

// ParseBytes reads a size flag: "0" or "none" (no ceiling), a number of
// bytes, or a number with a binary unit (K, M, G, T, optionally followed by
// "i", "iB" or "B": 1.5G, 512MiB). Negative sizes are refused.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	if t == "none" || t == "" {
		return 0, nil
	}
	t = strings.TrimSuffix(t, "b")
	t = strings.TrimSuffix(t, "i")
	mult := int64(1)
	if n := len(t); n > 0 {
		if i := strings.IndexByte("kmgt", t[n-1]); i >= 0 {
			mult = int64(1) << (10 * (i + 1))
			t = strings.TrimSpace(t[:n-1])
		}
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		if n < 0 || n > math.MaxInt64/mult {
			return 0, fmt.Errorf("size %q: out of range", s)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) || f*float64(mult) >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q: want bytes, a size like 512M or 2G, or none", s)
	}
	return int64(f * float64(mult)), nil
}

// FormatBytes writes n as ParseBytes reads it, in the largest binary unit
// that keeps one decimal ("1.5 GiB"); 0 is "none".
func FormatBytes(n int64) string {
	if n <= 0 {
		return "none"
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i, v := 0, float64(n)
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + " " + units[i]
}

// diskSource names the tmpfs of a session folder (the mount's source, as
// /proc/mounts shows it).
const diskSource = "hermes-sbx"

// MountDisk mounts a tmpfs of size bytes at dir (an empty folder: the
// session folder, before anything is made in it), mode 0700, without
// set-user-id files or devices, with one inode per 4 KiB (so a row cannot
// spend the memory on empty files either). It needs CAP_SYS_ADMIN in this
// mount namespace. The mount goes away with UnmountDisk.
func MountDisk(dir string, size int64) error {
	if size <= 0 {
		return fmt.Errorf("confine: disk ceiling of %s: size %d", dir, size)
	}
	inodes := max(size/4096, 4096)
	opts := "size=" + strconv.FormatInt(size, 10) + ",nr_inodes=" + strconv.FormatInt(inodes, 10) + ",mode=0700"
	if err := unix.Mount(diskSource, dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("confine: mount a %s tmpfs at %s: %w", FormatBytes(size), dir, err)
	}
	return nil
}

// UnmountDisk takes the tmpfs MountDisk made at dir away (lazily: a file
// still open keeps its pages until closed); nothing when dir is no mount
// point.
func UnmountDisk(dir string) error {
	err := unix.Unmount(dir, unix.MNT_DETACH)
	if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("confine: unmount %s: %w", dir, err)
}

// DiskSize is the size of the tmpfs MountDisk made at dir; 0 when dir is
// not the root of such a mount.
func DiskSize(dir string) int64 {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil || st.Type != unix.TMPFS_MAGIC {
		return 0
	}
	var a, b unix.Stat_t
	if unix.Stat(dir, &a) != nil || unix.Stat(filepath.Dir(dir), &b) != nil || a.Dev == b.Dev {
		return 0
	}
	return int64(st.Blocks) * st.Bsize
}

// probeDisk mounts and unmounts a small session-folder tmpfs in a folder
// made for it under the system's temporary folder: nil when the disk
// ceiling can be set on this machine.
func probeDisk() error {
	dir, err := os.MkdirTemp("", "hermes-disk-probe-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	if err := MountDisk(dir, mib); err != nil {
		return err
	}
	return UnmountDisk(dir)
}

// Ceilings are the per-session ceilings a driver is given, as `sandbox
// check` shows them next to what the machine supports.
type Ceilings struct {
	MemoryBytes int64
	DiskBytes   int64
	CPUWeight   int
}

// Describe says, one line each, what the ceilings c become on this machine
// (r): enforced how, or why not.
func (r Report) Describe(c Ceilings) string {
	var b strings.Builder
	hasCtl := func(n string) bool { return r.Cgroup != "" && slices.Contains(r.Controllers, n) }
	switch {
	case c.MemoryBytes <= 0:
		b.WriteString("memory ceiling: none\n")
	case hasCtl("memory"):
		fmt.Fprintf(&b, "memory ceiling: %s per session (cgroup %s memory: processes and the tmpfs pages they write; past it the kernel kills the session's largest process)\n", FormatBytes(c.MemoryBytes), r.Cgroup)
	default:
		fmt.Fprintf(&b, "memory ceiling: %s of address space per process (rlimit: no cgroup memory controller usable)\n", FormatBytes(c.MemoryBytes))
	}
	switch {
	case c.DiskBytes <= 0:
		b.WriteString("disk ceiling: none (the session folder is on the base folder's disk)\n")
	case r.Disk != nil:
		fmt.Fprintf(&b, "disk ceiling: unavailable: %v (the session folder is on the base folder's disk; run as root for a %s tmpfs)\n", r.Disk, FormatBytes(c.DiskBytes))
	default:
		fmt.Fprintf(&b, "disk ceiling: %s per session folder (home, /tmp: a tmpfs; a command that fills it gets ENOSPC; it counts against the memory ceiling)\n", FormatBytes(c.DiskBytes))
	}
	switch {
	case c.CPUWeight <= 0:
		b.WriteString("cpu weight: none (the cgroup's default)\n")
	case hasCtl("cpu") && r.Cgroup == "v1":
		fmt.Fprintf(&b, "cpu weight: %d per session (cgroup v1 cpu.shares %d)\n", c.CPUWeight, shares(c.CPUWeight))
	case hasCtl("cpu"):
		fmt.Fprintf(&b, "cpu weight: %d per session (cgroup v2 cpu.weight, where the parent group delegates the cpu controller)\n", clampWeight(c.CPUWeight))
	default:
		fmt.Fprintf(&b, "cpu weight: unavailable (no cgroup cpu controller usable)\n")
	}
	return b.String()
}

// clampWeight keeps w in cgroup v2's range of cpu.weight.
func clampWeight(w int) int { return min(max(w, 1), 10000) }

// shares is the cgroup v1 cpu.shares of weight w (1024 for 100).
func shares(w int) int { return max(clampWeight(w)*1024/100, 2) }

// setCPUWeight writes weight w into the group folder dir: cpu.weight on v2
// (skipped when the parent group does not delegate the cpu controller: the
// file is then missing), cpu.shares on v1.
func setCPUWeight(dir string, v2 bool, w int) error {
	if v2 {
		f := filepath.Join(dir, "cpu.weight")
		if _, err := os.Stat(f); err != nil {
			return nil
		}
		return writeControl(f, strconv.Itoa(clampWeight(w)))
	}
	return writeControl(filepath.Join(dir, "cpu.shares"), strconv.Itoa(shares(w)))
}
