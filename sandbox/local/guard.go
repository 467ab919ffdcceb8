package local

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
	"golang.org/x/sys/unix"
)

// A pooled sandbox serves row after row, so its supervisor (and the shell,
// when it is refreshed in place) must be out of the rows' reach: see the
// comment at the top of shell.go. This file holds the two host-side parts:
// the execute-only shell the supervisor runs from, and the check that the
// sandbox holds nothing a row left before it serves another.

// guardedName is the execute-only copy of bash in a pooled session's
// engine folder.
const guardedName = "bash"

// guardedShell returns the path inside the sandbox of the bash the
// supervisor and its shells run from: for a pooled session, an
// execute-only copy of the session's shell in its engine folder (read-only
// in the sandbox), written once per session. Running a program it cannot
// read makes a process not dumpable (the kernel's rule for execute-only
// programs), so that no other process of the sandbox, whose capabilities
// are all dropped, can open its /proc/<pid>/mem, trace it or read its
// environment. A session that is not pooled (no later row) runs the shell
// itself. It costs one copy of bash (about a megabyte) per sandbox.
func (s *Session) guardedShell() (string, error) {
	engine := filepath.Join(s.dir, engineDir)
	if fi, err := os.Stat(engine); err != nil || !fi.IsDir() {
		return s.shell, nil
	}
	if err := writeExecOnly(engine, guardedName, s.shell); err != nil {
		return "", fmt.Errorf("local sandbox: execute-only shell: %w", err)
	}
	return engineMount + "/" + guardedName, nil
}

// writeExecOnly copies the program src to name in dir with mode 0111,
// through an os.Root of dir; an existing copy (a shell restarted in the
// same session) is kept.
func writeExecOnly(dir, name, src string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	if fi, err := root.Lstat(name); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm() == 0o111 {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	// While the copy is open for writing, a process another goroutine
	// starts holds it open too until that process execs, and executing the
	// copy then fails with ETXTBSY ("text file busy": seen when several
	// sandboxes start at once). No process starts while it is open:
	// syscall.ForkLock is what os/exec takes to start one.
	syscall.ForkLock.Lock()
	err = createIn(root, name, 0o111, in) // local.go
	syscall.ForkLock.Unlock()
	if err == nil {
		// The mask may have taken bits away, never added any: set it exactly.
		err = root.Chmod(name, 0o111)
	}
	if err != nil {
		_ = root.Remove(name)
	}
	return err
}

// liveChildOf returns the first child of pid that is not a zombie, 0 if
// none: the supervisor, the namespace's init, may hold zombies it adopted
// beside the shell for a moment.
func liveChildOf(pid int) int {
	b, err := confine.ReadKernelFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	if err != nil {
		return childOf(pid)
	}
	return firstLive(b, readStat)
}

// firstLive returns the first pid of the list children (a children file's
// text) that stat finds and is not a zombie, 0 if none.
func firstLive(children []byte, stat func(pid int) (procInfo, bool)) int {
	for _, f := range strings.Fields(string(children)) {
		c, _ := strconv.Atoi(f)
		if st, ok := stat(c); ok && !st.zombie {
			return c
		}
	}
	return 0
}

// readSupervisorState reads the supervisor's procState; its descriptors are
// left out where this process may not list them (a driver that is not
// root: the supervisor is not dumpable). Only builtins run in it and no
// process of the sandbox can write its memory, so its descriptors change
// only with its code.
func readSupervisorState(f *procFiles, pid int) (*procState, error) {
	return f.state(pid, fdsIfPermitted)
}

// checkSandbox checks, before the sandbox serves another row, what a row
// could have left beside the shell: a process in the sandbox other than
// the supervisor and the shell (zombies aside), or a supervisor that is not
// as it was when it started (mask, signal dispositions, limits, name,
// descriptors: see procState). Any of these means the sandbox is closed
// instead of reused. It reads a few /proc files of each process of the
// session's cgroup, or of every process of the machine when the session
// has none.
func (p *shellProc) checkSandbox() error {
	if p.supv == nil {
		return errors.New("local sandbox reset: the supervisor's state is unknown")
	}
	if p.shell == 0 {
		if err := p.find(); err != nil {
			return err
		}
	}
	if err := p.supervisorSettled(); err != nil {
		return fmt.Errorf("local sandbox reset: %w", err)
	}
	if extra := p.others(); len(extra) > 0 {
		return fmt.Errorf("local sandbox reset: processes left in the sandbox: %v", extra)
	}
	return nil
}

// supervisorSettle bounds how long checkSandbox waits for a supervisor
// that was woken to be back where it waits.
const supervisorSettle = 2 * time.Second

// supervisorSettled checks that the supervisor is as it was when it
// started. One that was woken (a token to print) prints the token and then
// runs a few builtins before it waits for the shell again, with SIGCHLD
// blocked and its own SIGINT handler, as it was read when it started: the
// driver may already be reading it in between, so a difference is read
// again, every millisecond, until it is gone or supervisorSettle has
// passed (a row's change never goes away).
func (p *shellProc) supervisorSettled() error {
	deadline := time.Now().Add(supervisorSettle)
	for {
		now, err := readSupervisorState(&p.supFiles, p.sup)
		if err != nil {
			return fmt.Errorf("the supervisor: %w", err)
		}
		err = p.supv.differs(now, "supervisor")
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

// others lists the live processes of the sandbox other than bwrap, the
// supervisor and the shell, by host pid.
func (p *shellProc) others() []int {
	var cand []int
	if cg := p.s.cgroupIfAny(); cg != nil {
		if p.onlyKnown(cg) {
			return nil
		}
		cand = (&confine.Cgroup{Dirs: cg.Dirs[:1]}).Procs()
	} else {
		ns, err := os.Readlink("/proc/" + strconv.Itoa(p.sup) + "/ns/pid")
		if err != nil {
			return []int{p.sup} // gone: the caller fails either way
		}
		for _, pid := range pids() {
			if l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid"); err == nil && l == ns {
				cand = append(cand, pid)
			}
		}
	}
	var out []int
	for _, pid := range cand {
		if pid == p.pid || pid == p.init || pid == p.sup || pid == p.shell {
			continue
		}
		if st, ok := readStat(pid); ok && !st.zombie {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

// maskShellMem closes the shell's own /proc/<pid>/mem to the shell itself
// where the kernel does not: a process may always open its own memory file
// when it owns it, which a not-dumpable process does when the sandbox runs
// as root (the sandbox's root is then the owner). A row could then have
// the shell open it in a redirection ({ cmd; } 3<>/proc/$$/mem) and a
// child rewrite the shell through that descriptor, and a shell refreshed
// in place (sandbox.Shell.Refresh) would carry that to the next row. The
// driver, root too, mounts a read-only, nodev /dev/null over the file (and
// its task entry) in the sandbox's mount namespace (inMountNS): opening
// it then fails. Where the shell cannot open its memory anyway nothing is
// done. An error means the shell must not be refreshed in place. As root
// only.
func (p *shellProc) maskShellMem() error {
	if p.shell == 0 {
		if err := p.find(); err != nil {
			return err
		}
	}
	pid := strconv.Itoa(p.shell)
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/"+pid+"/mem", &st); err != nil {
		return err
	}
	status, err := p.shellFiles.file(p.shell, "status")
	if err != nil {
		return err
	}
	var fsuid, nspid string
	for _, l := range strings.Split(string(status), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 5 && f[0] == "Uid:":
			fsuid = f[4]
		case len(f) > 1 && f[0] == "NSpid:":
			nspid = f[len(f)-1]
		}
	}
	if fsuid != strconv.FormatUint(uint64(st.Uid), 10) {
		return nil // the owner is another user: the kernel refuses the shell
	}
	if nspid == "" {
		return errors.New("the shell's pid in its namespace is unknown")
	}
	if err := inMountNS(p.sup, func() error {
		for _, f := range []string{"/proc/" + nspid + "/mem", "/proc/" + nspid + "/task/" + nspid + "/mem"} {
			if err := unix.Mount("/dev/null", f, "", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("bind /dev/null over %s: %w", f, err)
			}
			if err := unix.Mount("", f, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NODEV, ""); err != nil {
				return fmt.Errorf("remount %s read-only: %w", f, err)
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("mask the shell's memory: %w", err)
	}
	return nil
}

// inMountNS runs fn in the mount namespace of the process pid (paths in fn
// are the sandbox's), on the driver's mount thread (mountWorker). It
// replaces nsenter and mount(8), six processes and some ten milliseconds of
// CPU per new shell.
func inMountNS(pid int, fn func() error) error { return inNS(pid, unix.CLONE_NEWNS, fn) }

// inIPCNS runs fn in the System V IPC namespace of the process pid, on the
// driver's mount thread: a /proc/sysvipc file it opens shows that
// namespace's objects for as long as it is open (see ipcFiles).
func inIPCNS(pid int, fn func() error) error { return inNS(pid, unix.CLONE_NEWIPC, fn) }

// inNS runs fn in the namespace of kind nstype (CLONE_NEWNS or
// CLONE_NEWIPC) of the process pid, on the mount thread.
func inNS(pid, nstype int, fn func() error) error {
	mountStart.Do(func() { go mountWorker() })
	j := mountJob{pid: pid, nstype: nstype, fn: fn, done: make(chan error, 1)}
	mountJobs <- j
	return <-j.done
}

type mountJob struct {
	pid    int
	nstype int // unix.CLONE_NEWNS or unix.CLONE_NEWIPC
	fn     func() error
	done   chan error
}

// nsFiles are the /proc/<pid>/ns names of the namespaces a mount job
// enters.
var nsFiles = map[int]string{unix.CLONE_NEWNS: "mnt", unix.CLONE_NEWIPC: "ipc"}

var (
	mountStart sync.Once
	mountJobs  = make(chan mountJob)
)

// mountWorker runs the mount jobs, one after another, on one thread that it
// keeps for good: entering another mount namespace needs a thread whose
// file system context (root, folder) no other thread shares, so the thread
// leaves the process's (unshare CLONE_FS) and never runs other code. It
// never ends either: a process started with a parent-death signal
// (bubblewrap) gets it when the thread that started it ends, and this
// thread may have started one before it was locked.
func mountWorker() {
	runtime.LockOSThread()
	m := mountThread{home: map[int]int{}}
	for t, name := range nsFiles {
		fd, err := unix.Open("/proc/thread-self/ns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			m.broken = err
			break
		}
		m.home[t] = fd
	}
	if m.broken == nil {
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			m.broken = fmt.Errorf("unshare: %w", err)
		}
	}
	for j := range mountJobs {
		j.done <- m.run(j)
	}
}

// mountThread is the mount thread's own state: its home namespaces (mount
// and IPC), and why it can serve no job (it could not leave the process's
// file system context, or come back from a sandbox's namespace).
type mountThread struct {
	home   map[int]int // nstype → descriptor of the thread's own namespace
	broken error
}

// run runs j in its process's namespace and comes back home.
func (m *mountThread) run(j mountJob) error {
	if m.broken != nil {
		return m.broken
	}
	name, ok := nsFiles[j.nstype]
	if !ok {
		return fmt.Errorf("namespace kind %#x", j.nstype)
	}
	ns, err := unix.Open("/proc/"+strconv.Itoa(j.pid)+"/ns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(ns)
	if err := unix.Setns(ns, j.nstype); err != nil {
		return fmt.Errorf("enter the sandbox's %s namespace: %w", name, err)
	}
	err = j.fn()
	if berr := unix.Setns(m.home[j.nstype], j.nstype); berr != nil {
		m.broken = fmt.Errorf("the mount thread is stuck in a sandbox's %s namespace: %w", name, berr)
	}
	return err
}

// ipcFiles are /proc/sysvipc/shm, sem and msg opened (openIPC) in the
// System V IPC namespace of a sandbox: read again from their start, they
// list that namespace's objects, so the driver sees from the host whether
// a row left any (a shell refreshed in place without the supervisor, which
// removes them, being woken: shellProc.alone) instead of the shell looking
// at each file in its state report (sandbox.ShellConfig.HostIPC).
type ipcFiles struct {
	mu  sync.Mutex
	fds [3]int // -1 once closed
	buf []byte // read into (preadAll), kept
}

// ipcKinds name the files of ipcFiles, in order.
var ipcKinds = [3]string{"shm", "sem", "msg"}

// openIPC opens the IPC files of the namespace of the process pid (root
// only: entering it needs CAP_SYS_ADMIN).
func openIPC(pid int) (*ipcFiles, error) {
	f := &ipcFiles{fds: [3]int{-1, -1, -1}}
	err := inIPCNS(pid, func() error {
		for i, k := range ipcKinds {
			fd, err := unix.Open("/proc/sysvipc/"+k, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			f.fds[i] = fd
		}
		return nil
	})
	if err != nil {
		f.close()
		return nil, fmt.Errorf("local sandbox: the sandbox's System V IPC objects: %w", err)
	}
	return f, nil
}

// empty fails when the namespace holds an object: a file is more than its
// heading line, read from its start to its end.
func (f *ipcFiles) empty() error {
	if f == nil {
		return errors.New("the sandbox's System V IPC objects are not known")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, fd := range f.fds {
		if fd < 0 {
			return errors.New("the sandbox's System V IPC files are closed")
		}
		b, err := preadAll(fd, &f.buf)
		if err != nil {
			return fmt.Errorf("/proc/sysvipc/%s: %w", ipcKinds[i], err)
		}
		// The heading alone, and nothing after it.
		if len(b) == 0 || bytes.IndexByte(b, '\n') != len(b)-1 {
			return fmt.Errorf("the sandbox holds System V IPC objects (%s)", ipcKinds[i])
		}
	}
	return nil
}

// close closes the files; safe on nil and more than once.
func (f *ipcFiles) close() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, fd := range f.fds {
		if fd >= 0 {
			_ = unix.Close(fd)
			f.fds[i] = -1
		}
	}
}
