package confine

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Report is what Probe found about this machine.
type Report struct {
	Bwrap        string   // path of bubblewrap; "" = not found
	BwrapVersion string   // "bubblewrap 0.8.0"; set by Version, not by Probe
	Namespaces   error    // nil when bwrap ran a command in fresh user/pid/net/ipc/uts/mount namespaces
	Cgroup       string   // "v2" (delegated, writable), "v1" (pids/memory writable), "" (none usable)
	Controllers  []string // the usable cgroup controllers among pids, memory, cpu
	Rlimits      bool     // rlimits (ulimit) can be set: always on Linux
	Disk         error    // nil when a session folder can get a size-capped tmpfs (MountDisk: needs root)
	Seccomp      bool     // the test command ran under the seccomp filter (Seccomp)
}

// Usable reports whether confinement can start, and the reason when not.
func (r Report) Usable() error {
	if r.Bwrap == "" {
		return fmt.Errorf("bubblewrap (bwrap) not found on PATH: install the bubblewrap package")
	}
	if r.Namespaces != nil {
		return fmt.Errorf("bubblewrap cannot create namespaces: %w", r.Namespaces)
	}
	return nil
}

// String is the multi-line summary `sandbox check` prints.
func (r Report) String() string {
	var b strings.Builder
	if r.Bwrap == "" {
		b.WriteString("bubblewrap: not found\n")
	} else {
		fmt.Fprintf(&b, "bubblewrap: %s", r.Bwrap)
		if r.BwrapVersion != "" {
			fmt.Fprintf(&b, " (%s)", r.BwrapVersion)
		}
		b.WriteString("\n")
	}
	if r.Namespaces == nil && r.Bwrap != "" {
		b.WriteString("namespaces: user, mount, pid, net, ipc, uts usable\n")
	} else if r.Namespaces != nil {
		fmt.Fprintf(&b, "namespaces: refused: %v\n", r.Namespaces)
	}
	if r.Cgroup == "" {
		b.WriteString("cgroups: none usable (limits by rlimits only; root is exempt from the process limit)\n")
	} else {
		fmt.Fprintf(&b, "cgroups: %s, controllers %s\n", r.Cgroup, strings.Join(r.Controllers, ", "))
	}
	fmt.Fprintf(&b, "rlimits: %v\n", r.Rlimits)
	if r.Disk == nil {
		b.WriteString("session folder tmpfs (disk ceiling): usable\n")
	} else {
		fmt.Fprintf(&b, "session folder tmpfs (disk ceiling): unavailable: %v\n", r.Disk)
	}
	if r.Seccomp {
		fmt.Fprintf(&b, "seccomp: filter applied (%d system calls denied: ptrace, process_vm_readv, mount, bpf, ...)\n", len(SeccompDenied))
	}
	if err := r.Usable(); err != nil {
		fmt.Fprintf(&b, "confinement: unavailable: %v\n", err)
	} else {
		b.WriteString("confinement: available\n")
	}
	return b.String()
}

// Probe finds bwrap and runs it once with the namespaces a Policy asks for,
// and looks at which cgroup hierarchy this process may write to and
// whether a session folder can get a tmpfs. The checks are independent and
// run at once: a run waits for Probe before its first model call.
func Probe(ctx context.Context) Report {
	r := Report{Rlimits: true}
	var wg sync.WaitGroup
	wg.Go(func() { r.Cgroup, r.Controllers = probeCgroup() })
	wg.Go(func() { r.Disk = probeDisk() })
	probeBwrap(ctx, &r)
	wg.Wait()
	return r
}

// probeBwrap fills r's Bwrap, Namespaces and Seccomp: it finds bwrap and
// runs a test command under a Policy's namespaces and seccomp filter.
func probeBwrap(ctx context.Context, r *Report) {
	path, err := exec.LookPath("bwrap")
	if err != nil {
		r.Namespaces = err
		return
	}
	r.Bwrap = path
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "hermes-confine-probe-")
	if err != nil {
		r.Namespaces = err
		return
	}
	defer os.RemoveAll(dir)
	// The test command prints the seccomp mode it runs under (2: a filter).
	bw, err := Policy{SessionDir: dir, Env: []string{"PATH=/usr/bin:/bin"}}.Args(path, []string{"/bin/sh", "-c",
		`while read -r k v; do [ "$k" = Seccomp: ] && echo "seccomp $v"; done </proc/self/status; echo ok`})
	if err != nil {
		r.Namespaces = err
		return
	}
	c := exec.CommandContext(ctx, path)
	bw.Apply(c)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	bw.Close()
	switch {
	case err != nil:
		r.Namespaces = fmt.Errorf("%s: %v: %s", path, err, strings.TrimSpace(stderr.String()))
	case !strings.HasSuffix(strings.TrimSpace(string(out)), "ok"):
		r.Namespaces = fmt.Errorf("%s: test command printed %q", path, out)
	case !strings.Contains(string(out), "seccomp 2\n"):
		r.Namespaces = fmt.Errorf("%s: the test command did not run under the seccomp filter: %q", path, out)
	default:
		r.Seccomp = true
	}
}

// Version is what bwrap says its version is ("bubblewrap 0.8.0"), "" when
// it cannot say, for the summary of `sandbox check` (Report.BwrapVersion).
// Probe does not ask it: a run has no use for it, and every run's start
// waited for Probe, which then started one more process.
func Version(ctx context.Context, bwrap string) string {
	if bwrap == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bwrap, "--version").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// Check is Probe's verdict: nil when confinement can start.
func Check(ctx context.Context) error { return Probe(ctx).Usable() }

// probeCgroup reports the cgroup hierarchy this process can create child
// groups in: v2 when the unified hierarchy at /sys/fs/cgroup has the pids
// or memory controller enabled and is writable, else v1 controllers mounted
// under /sys/fs/cgroup/<controller> that are writable.
func probeCgroup() (string, []string) {
	const root = "/sys/fs/cgroup"
	if b, err := os.ReadFile(filepath.Join(root, "cgroup.controllers")); err == nil {
		var ctl []string
		for _, c := range strings.Fields(string(b)) {
			if c == "pids" || c == "memory" || c == "cpu" {
				ctl = append(ctl, c)
			}
		}
		if len(ctl) > 0 && writable(root) {
			return "v2", ctl
		}
		return "", nil
	}
	var ctl []string
	for _, c := range []string{"pids", "memory", "cpu"} {
		d := filepath.Join(root, c)
		if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err == nil && writable(d) {
			ctl = append(ctl, c)
		}
	}
	if len(ctl) > 0 {
		return "v1", ctl
	}
	return "", nil
}

// writable reports whether a folder can be created in dir (and removes it).
func writable(dir string) bool {
	d, err := os.MkdirTemp(dir, "hermes-probe-")
	if err != nil {
		return false
	}
	_ = os.Remove(d)
	return true
}
