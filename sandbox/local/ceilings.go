package local

import (
	"fmt"
	"os"
	"slices"

	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
)

// ceilings are how the driver holds LocalConfig.Limits' per-session
// ceilings on this machine (see confine's ceilings.go for the defaults):
//   - memory: the session's cgroup where a memory controller is usable
//     (then no address-space rlimit, which breaks programs that reserve
//     address space: Go, JVMs, sanitizers), else `ulimit -v` per process;
//   - disk: each confined session folder is a tmpfs of Limits.DiskBytes
//     (mounted when the folder is made, unmounted when it is removed), so
//     its home, /tmp and the shell's state share that size: a command that
//     fills it gets ENOSPC and leaves nothing for the next row, whose reset
//     empties the folder (pool.go). Where mounting is not allowed (not
//     root) the folder stays on the base folder's disk and Warnings says so;
//   - CPU: the cgroup's weight (confine.NewCgroup).
type ceilings struct {
	disk      int64 // tmpfs size of each confined session folder; 0 = none
	memCgroup bool  // MemoryBytes is the cgroup's, not an rlimit
	warnings  []string
}

// setCeilings decides, from what Probe found (r), how the limits l are
// held; it runs once, in settle, for a confined driver.
func (d *Driver) setCeilings(r confine.Report, l confine.Limits, disk int64) {
	ctl := func(n string) bool { return r.Cgroup != "" && slices.Contains(r.Controllers, n) }
	d.ceil.memCgroup = ctl("memory")
	if l.MemoryBytes > 0 && !d.ceil.memCgroup {
		d.ceil.warnings = append(d.ceil.warnings, fmt.Sprintf("memory ceiling %s is an address-space rlimit per process: no cgroup memory controller is usable here", confine.FormatBytes(l.MemoryBytes)))
	}
	if l.CPUWeight > 0 && !ctl("cpu") {
		d.ceil.warnings = append(d.ceil.warnings, "cpu weight not set: no cgroup cpu controller is usable here")
	}
	if disk > 0 {
		if r.Disk != nil {
			d.ceil.warnings = append(d.ceil.warnings, fmt.Sprintf("no disk ceiling: %v (session folders stay on the disk of %s)", r.Disk, d.base))
		} else {
			d.ceil.disk = disk
		}
	}
}

// Warnings lists the ceilings of LocalConfig.Limits this machine cannot
// hold as asked (no cgroup controller, no right to mount a tmpfs); the CLI
// prints them when a run starts. It waits for New's probe.
func (d *Driver) Warnings() []string {
	_ = d.settle()
	return slices.Clone(d.ceil.warnings)
}

// DiskBytes is the size of each confined session folder's tmpfs; 0 when
// session folders have no disk ceiling. Tests and `sandbox check` use it.
func (d *Driver) DiskBytes() int64 {
	_ = d.settle()
	return d.ceil.disk
}

// rlimits are the limits l as the confined shell sets them with ulimit:
// without the memory ceiling when the cgroup holds it.
func (d *Driver) rlimits(l confine.Limits) confine.Limits {
	if d.ceil.memCgroup {
		l.MemoryBytes = 0
	}
	return l
}

// mountDisk gives the new, empty session folder dir its disk ceiling.
func (d *Driver) mountDisk(dir string) error {
	if d.bwrap == "" || d.ceil.disk <= 0 {
		return nil
	}
	return confine.MountDisk(dir, d.ceil.disk)
}

// removeSessionDir removes a session folder: its tmpfs first (everything
// in it goes at once), then what is left on the base folder's disk.
func removeSessionDir(dir string) error {
	if err := confine.UnmountDisk(dir); err != nil {
		return err
	}
	if err := removeAll(dir); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
