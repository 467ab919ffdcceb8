package confine

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupRoot is where the cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// Cgroup is one session's control group: a folder in the v2 hierarchy, or
// one per v1 controller (pids, memory, and cpu when a CPU weight is set). Its processes can be listed and
// killed together, and its limits hold for the whole session, root
// included.
type Cgroup struct {
	Version string   // "v2" or "v1"
	Dirs    []string // the group's folders (one for v2)
}

// NewCgroup creates the group name under this process's own group, in the
// hierarchy Probe found usable (version "v2" or "v1"), and sets l's process
// and memory limits and CPU weight in it (setCPUWeight). Its memory limit
// holds for the group's processes and the tmpfs pages they write; when it
// is reached the kernel kills the group's largest process (memory.oom.group
// stays 0 on v2: the one process, not the whole group).
func NewCgroup(version, name string, l Limits) (*Cgroup, error) {
	c := &Cgroup{Version: version}
	var ctls []string
	switch version {
	case "v2":
		ctls = []string{""}
	case "v1":
		ctls = []string{"pids", "memory"}
		if l.CPUWeight > 0 {
			ctls = append(ctls, "cpu")
		}
	default:
		return nil, fmt.Errorf("confine: cgroup version %q: want v2 or v1", version)
	}
	own := ownGroups()
	for _, ctl := range ctls {
		parent := filepath.Join(cgroupRoot, ctl, own[ctl])
		if _, err := os.Stat(filepath.Join(parent, "cgroup.procs")); err != nil {
			continue // controller not mounted here
		}
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			_ = c.Remove()
			return nil, fmt.Errorf("confine: create cgroup %s: %w", dir, err)
		}
		c.Dirs = append(c.Dirs, dir)
		var err error
		switch {
		case (ctl == "pids" || ctl == "") && l.Processes > 0:
			err = os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(l.Processes)), 0)
		}
		if err == nil && l.MemoryBytes > 0 {
			switch ctl {
			case "memory":
				err = os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(strconv.FormatInt(l.MemoryBytes, 10)), 0)
			case "":
				err = os.WriteFile(filepath.Join(dir, "memory.max"), []byte(strconv.FormatInt(l.MemoryBytes, 10)), 0)
			}
		}
		if err == nil && l.CPUWeight > 0 && (ctl == "" || ctl == "cpu") {
			err = setCPUWeight(dir, ctl == "", l.CPUWeight)
		}
		if err != nil {
			_ = c.Remove()
			return nil, fmt.Errorf("confine: set limits of cgroup %s: %w", dir, err)
		}
	}
	if len(c.Dirs) == 0 {
		return nil, fmt.Errorf("confine: no %s cgroup controller usable under %s", version, cgroupRoot)
	}
	return c, nil
}

// ownGroups reads /proc/self/cgroup: controller → this process's group
// path ("" key for the v2 hierarchy).
func ownGroups() map[string]string {
	out := map[string]string{}
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			out[ctl] = parts[2]
		}
	}
	return out
}

// Wrap returns argv prefixed with a tiny shell that moves itself into the
// group before exec'ing argv, so the command and everything it starts are
// in the group from their first instruction (no window after start in which
// a fork could escape).
func (c *Cgroup) Wrap(argv []string) []string {
	a := []string{"/bin/sh", "-c", `for g in "$@"; do [ "$g" = -- ] && break; echo $$ >"$g" || exit 125; done
while [ "$1" != -- ]; do shift; done; shift; exec "$@"`, "sh"}
	for _, d := range c.Dirs {
		a = append(a, filepath.Join(d, "cgroup.procs"))
	}
	return append(append(a, "--"), argv...)
}

// Join moves the processes pids (whole thread groups) into the group. A
// caller that starts a process outside the group and joins it later must be
// sure that nothing it does not control runs, or forks, in between (a
// confined shell before its first command: see sandbox/local); Wrap and FD
// are for the others.
func (c *Cgroup) Join(pids ...int) error {
	for _, d := range c.Dirs {
		for _, pid := range pids {
			if err := writeControl(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
				return fmt.Errorf("confine: move %d into cgroup %s: %w", pid, d, err)
			}
		}
	}
	return nil
}

// writeControl writes value to a cgroup control file in one write.
func writeControl(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// FD opens the group's folder for SysProcAttr.UseCgroupFD, which starts a
// process in the group (clone3 CLONE_INTO_CGROUP) without Wrap's shell;
// only a v2 group has one folder to start in (ok false otherwise). The
// caller closes fd once the process started.
func (c *Cgroup) FD() (fd int, ok bool, err error) {
	if c.Version != "v2" || len(c.Dirs) != 1 {
		return -1, false, nil
	}
	fd, err = syscall.Open(c.Dirs[0], syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, false, fmt.Errorf("confine: open cgroup %s: %w", c.Dirs[0], err)
	}
	return fd, true, nil
}

// Procs lists the processes in the group.
func (c *Cgroup) Procs() []int {
	seen := map[int]bool{}
	var out []int
	for _, d := range c.Dirs {
		b, err := ReadKernelFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
				seen[pid] = true
				out = append(out, pid)
			}
		}
	}
	return out
}

// KillAll sends SIGKILL to every process in the group except those in
// keep, in rounds until none is left (a fork bomb forks between rounds),
// for up to 30 s.
func (c *Cgroup) KillAll(keep ...int) error {
	skip := map[int]bool{}
	for _, k := range keep {
		skip[k] = true
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		left := 0
		for _, pid := range c.Procs() {
			if skip[pid] {
				continue
			}
			left++
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("confine: %d processes of cgroup %s still alive after 30 s", left, c.Dirs[0])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Remove kills what is left in the group and removes its folders.
func (c *Cgroup) Remove() error {
	if len(c.Dirs) == 0 {
		return nil
	}
	kerr := c.KillAll()
	var errs []error
	for _, d := range c.Dirs {
		// A killed process leaves the group a moment after it died.
		var err error
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			err = os.Remove(d)
			if err == nil || errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
				break
			}
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("confine: remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(append([]error{kerr}, errs...)...)
}

// RemoveStale removes the groups under this process's own group whose name
// starts with prefix (left by a killed run), killing what is in them, and
// returns how many it removed.
func RemoveStale(prefix string) int {
	own := ownGroups()
	n := 0
	for _, ctl := range []string{"", "pids", "memory", "cpu"} {
		matches, _ := filepath.Glob(filepath.Join(cgroupRoot, ctl, own[ctl], prefix+"*"))
		for _, d := range matches {
			if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
				continue
			}
			if (&Cgroup{Dirs: []string{d}}).Remove() == nil {
				n++
			}
		}
	}
	return n
}
