package local

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// procState is what a row could change of its shell's process from inside
// that a refresh script cannot see or undo (sandbox.Shell.Refresh): the
// mask, signal dispositions, CPU set, capabilities, limits, OOM score,
// name, niceness and open file descriptors. The driver reads it on the host
// when the shell is new and again after a refresh; any difference means a
// new shell instead.
type procState struct {
	status, limits, oom, comm, nice string
	fds                             []string // "fd -> target"
}

// statusFields are the lines of /proc/<pid>/status kept in procState.
var statusFields = []string{"Umask:", "SigBlk:", "SigIgn:", "SigCgt:", "Cpus_allowed_list:", "Mems_allowed_list:",
	"NoNewPrivs:", "Seccomp:", "CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"}

// procFiles are the /proc files of one process that its procState is read
// from, kept open from one read to the next (a pooled sandbox's shell and
// supervisor are read at start and at every reset): each is read again from
// its start (the kernel makes it anew then), which spares an open and a
// close, and the path's look-up, per file and read. They stay bound to the
// process they were opened for: once it is gone they fail, whatever process
// gets its pid.
type procFiles struct {
	mu    sync.Mutex
	pid   int
	files map[string]int // name in /proc/<pid> → descriptor
	buf   []byte         // read into, kept: a reset's reads allocate nothing
}

// What state reads of a process's descriptors.
const (
	withFDs        = iota // all of them; not permitted is an error
	fdsIfPermitted        // all of them, or none where this process may not list them
)

// state reads the procState of pid through the kept files, opening them
// for pid first when they were open for another process; fds says what it
// reads of the descriptors.
func (f *procFiles) state(pid int, fds int) (*procState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forLocked(pid)
	var st procState
	b, err := f.readLocked("status")
	if err != nil {
		return nil, err
	}
	status := string(b)
	var keep []string
	for _, l := range strings.Split(status, "\n") {
		for _, f := range statusFields {
			if strings.HasPrefix(l, f) {
				keep = append(keep, l)
			}
		}
	}
	st.status = strings.Join(keep, "\n")
	if b, err = f.readLocked("limits"); err != nil {
		return nil, err
	}
	st.limits = string(b)
	if b, err = f.readLocked("oom_score_adj"); err != nil {
		return nil, err
	}
	st.oom = string(b)
	// The name is status's first line (comm, escaped), and the niceness
	// comes from getpriority(2): two files fewer to read per process.
	if name, _, ok := strings.Cut(status, "\n"); ok && strings.HasPrefix(name, "Name:") {
		st.comm = name
	} else {
		return nil, fmt.Errorf("/proc/%d/status: no name", pid)
	}
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, pid)
	if err != nil {
		return nil, err
	}
	st.nice = strconv.Itoa(prio)
	st.fds, err = f.fdsLocked()
	if fds == fdsIfPermitted && errors.Is(err, fs.ErrPermission) {
		st.fds, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// fdsLocked lists the kept process's descriptors, sorted, as "fd ->
// target".
func (f *procFiles) fdsLocked() ([]string, error) {
	dir := "/proc/" + strconv.Itoa(f.pid) + "/fd"
	dfd, err := f.openLocked("fd", unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	names, err := readDirNames(dfd, &f.buf)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: err}
	}
	buf := f.buf[:4096]
	var fds []string
	for _, n := range names {
		m, err := unix.Readlinkat(dfd, n, buf)
		if err != nil {
			return nil, &fs.PathError{Op: "readlink", Path: dir + "/" + n, Err: err}
		}
		fds = append(fds, n+" -> "+string(buf[:m]))
	}
	slices.Sort(fds)
	return fds, nil
}

// readLocked reads the kept file name into f.buf and returns that part of
// it (valid until the next read).
func (f *procFiles) readLocked(name string) ([]byte, error) {
	fd, err := f.openLocked(name, 0)
	if err != nil {
		return nil, err
	}
	b, err := preadAll(fd, &f.buf)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: "/proc/" + strconv.Itoa(f.pid) + "/" + name, Err: err}
	}
	return b, nil
}

// forLocked makes the kept files those of pid, closing another process's.
func (f *procFiles) forLocked(pid int) {
	if f.pid != pid {
		f.closeLocked()
		f.pid = pid
	}
	if f.files == nil {
		f.files = map[string]int{}
	}
}

// openLocked returns the kept descriptor of the file name of /proc/<f.pid>,
// opening it (with flags besides read-only) the first time.
func (f *procFiles) openLocked(name string, flags int) (int, error) {
	if fd, ok := f.files[name]; ok {
		return fd, nil
	}
	path := "/proc/" + strconv.Itoa(f.pid) + "/" + name
	fd, err := unix.Open(path, flags|unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f.files[name] = fd
	return fd, nil
}

// file reads the file name of /proc/<pid> through the kept files, like
// state.
func (f *procFiles) file(pid int, name string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forLocked(pid)
	b, err := f.readLocked(name)
	if err != nil {
		return nil, err
	}
	return slices.Clone(b), nil
}

// close closes the kept files; safe on nil and more than once.
func (f *procFiles) close() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closeLocked()
}

func (f *procFiles) closeLocked() {
	for _, fd := range f.files {
		_ = unix.Close(fd)
	}
	f.files, f.pid = nil, 0
}

// preadAll reads the kernel file fd from its start to its end (a read that
// returns nothing) into *buf (grown as needed, at least 8 KiB), and returns
// that part of it.
func preadAll(fd int, buf *[]byte) ([]byte, error) {
	if len(*buf) < 8192 {
		*buf = make([]byte, 8192)
	}
	b := *buf
	n := 0
	for {
		if n == len(b) {
			b = append(b, make([]byte, len(b))...)
			*buf = b
		}
		m, err := unix.Pread(fd, b[n:], int64(n))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			return b[:n], nil
		}
		n += m
	}
}

// readDirNames lists the folder fd from its start (not . and ..), reading
// into *buf (made 8 KiB when smaller).
func readDirNames(fd int, into *[]byte) ([]string, error) {
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		return nil, err
	}
	if len(*into) < 8192 {
		*into = make([]byte, 8192)
	}
	buf := (*into)[:8192]
	var names []string
	for {
		n, err := unix.ReadDirent(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// same checks that the session's shell, as the host sees it now, is as it
// was when new.
func (h *procState) same(p *shellProc) error {
	if err := p.find(); err != nil {
		return err
	}
	now, err := p.shellFiles.state(p.shell, withFDs)
	if err != nil {
		return err
	}
	return h.differs(now, "shell")
}

// differs reports how now differs from h, naming the process who.
func (h *procState) differs(now *procState, who string) error {
	switch {
	case now.status != h.status:
		return fmt.Errorf("the %s's status changed: %s", who, now.status)
	case now.limits != h.limits:
		return fmt.Errorf("the %s's limits changed", who)
	case now.oom != h.oom, now.comm != h.comm, now.nice != h.nice:
		return fmt.Errorf("the %s's OOM score, name or niceness changed", who)
	case !slices.Equal(now.fds, h.fds):
		return fmt.Errorf("the %s's file descriptors changed: %v", who, now.fds)
	}
	return nil
}

// keptFile is one kernel file kept open and read again from its start (a
// cgroup's pids.current): see procFiles.
type keptFile struct {
	mu   sync.Mutex
	path string // set once, before the first read
	fd   int    // 0 = not open yet, -1 = closed for good
	buf  []byte
}

// read reads the file from its start, opening it first.
func (k *keptFile) read() ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fd < 0 {
		return nil, errors.New("closed")
	}
	if k.fd == 0 {
		fd, err := unix.Open(k.path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: k.path, Err: err}
		}
		k.fd = fd
	}
	return preadAll(k.fd, &k.buf)
}

// close closes the file for good; safe more than once.
func (k *keptFile) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fd > 0 {
		_ = unix.Close(k.fd)
	}
	k.fd = -1
}
