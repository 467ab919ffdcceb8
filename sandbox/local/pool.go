package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
	"golang.org/x/sys/unix"
)

// A confined session costs a bubblewrap start (namespaces, mounts: tens of
// milliseconds of CPU) and a cgroup. The driver keeps the sessions its
// rollouts closed and hands them to the next Open with the same Spec
// instead of starting new ones: a warm pool. Before a session goes back to
// the pool, Close resets it so that nothing of the row that used it is left
// for the next one:
//   - every process of its PID namespace is killed except bwrap's init and
//     the supervisor (the shell's parent, see supervisor), by the
//     supervisor itself (kill -9 -1 in the namespace), and System V IPC
//     objects are removed;
//   - a new bash starts under the supervisor, with the session's initial
//     environment and folder and no function, alias, trap or option of the
//     old one; what the old row left in the shell's input is read away;
//   - the session folder (home, tmp mounted at /tmp, the shell's state) is
//     emptied, and what the row wrote in the sandbox's own file systems
//     (the root, /dev, /dev/shm, /dev/mqueue, all tmpfs) is removed by
//     comparing them with a snapshot taken when the sandbox started;
//   - a session where any step fails, or whose snapshot entries were
//     changed, is closed for good instead.
//
// Only sessions of confined persistent bash shells without a row's own
// working folder are pooled. The reset runs in the background after Close
// returns, and an Open with no idle session of its Spec waits for a reset
// in flight rather than starting a new sandbox (the rollout stage opens
// while the first model call is in flight, so the wait costs no time
// there): a driver's sessions number at most the most that were open at
// once (the run's workers). LocalConfig.Pool bounds the idle ones further,
// and Release waits for the resets and closes the idle sessions.

// pool is a driver's idle sessions by Spec key.
type pool struct {
	max int // most idle sessions kept; <0 = no pool, 0 = no bound beyond the sessions ever open at once

	mu      sync.Mutex
	back    *sync.Cond // signalled when a reset ends
	idle    map[string][]*Session
	pending map[string]int // resets in flight by key
	n       int
	closed  bool
	wg      sync.WaitGroup // resets in flight
}

func newPool(max int) *pool {
	p := &pool{max: max, idle: map[string][]*Session{}, pending: map[string]int{}}
	p.back = sync.NewCond(&p.mu)
	return p
}

// take returns an idle session for key, waiting for a reset of one in
// flight rather than letting the caller start a new sandbox; nil if there
// is none.
func (p *pool) take(key string) *Session {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if p.closed {
			return nil
		}
		if l := p.idle[key]; len(l) > 0 {
			s := l[len(l)-1]
			p.idle[key] = l[:len(l)-1]
			p.n--
			return s
		}
		if p.pending[key] == 0 {
			return nil
		}
		p.back.Wait()
	}
}

// put keeps s; false when the pool is closed or full (the caller then
// closes s for good).
func (p *pool) put(key string, s *Session) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.max > 0 && p.n >= p.max {
		return false
	}
	p.idle[key] = append(p.idle[key], s)
	p.n++
	return true
}

// begin counts a reset of a session of key in flight; false when the pool
// is closed.
func (p *pool) begin(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.pending[key]++
	p.wg.Add(1)
	return true
}

// end ends what begin counted, once the session is back or closed.
func (p *pool) end(key string) {
	p.mu.Lock()
	p.pending[key]--
	p.mu.Unlock()
	p.back.Broadcast()
	p.wg.Done()
}

// drain closes the pool and returns its sessions once no reset is in
// flight.
func (p *pool) drain() []*Session {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.back.Broadcast()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*Session
	for _, l := range p.idle {
		out = append(out, l...)
	}
	p.idle, p.n = map[string][]*Session{}, 0
	return out
}

// specKey is what two Specs must share for a session of one to serve the
// other; "" = the Spec's sessions are not pooled (a row's own working
// folder).
func specKey(spec specView) string {
	if spec.Cwd != "" {
		return ""
	}
	var b strings.Builder
	b.WriteString(strconv.FormatInt(int64(spec.Timeout), 10) + "\x00" + strconv.Itoa(spec.MaxOutput) + "\x00")
	ro := slices.Clone(spec.ReadOnly)
	sort.Strings(ro)
	for _, r := range ro {
		b.WriteString("r" + r + "\x00")
	}
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString("e" + k + "=" + spec.Env[k] + "\x00")
	}
	return b.String()
}

// specView is the part of a sandbox.Spec that decides pooling.
type specView struct {
	Cwd       string
	ReadOnly  []string
	Env       map[string]string
	Timeout   time.Duration
	MaxOutput int
}

// Release closes the pooled sessions (the driver's sandbox.Releaser);
// sessions opened later are not pooled.
//
// Every idle sandbox is sent SIGKILL first, and then each is waited for and
// removed, a few at a time: the kernel tears the namespaces of all of them
// down at once instead of one after another (at the end of a run of 200
// workers, seconds of wall time).
func (d *Driver) Release() error {
	idle := d.pool.drain()
	for _, s := range idle {
		s.box.mu.Lock()
		if p := s.box.proc; p != nil {
			_ = syscall.Kill(-p.pid, syscall.SIGKILL)
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
		s.box.mu.Unlock()
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, releaseParallel)
	)
	for _, s := range idle {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := s.teardown(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// releaseParallel is how many sandboxes Release removes at once.
const releaseParallel = 16

// Reused reports whether the session was handed out from the pool (a
// previous row used its sandbox). Tests use it.
func (s *Session) Reused() bool { return s.reused }

// Refreshed reports whether the reused session's shell is the previous
// row's, refreshed in place (sandbox.Shell.Refresh), rather than a new one.
// Tests use it.
func (s *Session) Refreshed() bool { return s.refreshed }

// reuse returns a new handle on the pooled session s for a new row: the old
// handle stays closed.
func (s *Session) reuse() *Session {
	n := &Session{
		spec: s.spec, dir: s.dir, home: s.home, state: s.state, cwd: s.cwd,
		marker: s.marker, shell: s.shell, env: s.env, script: s.script,
		bwrap: s.bwrap, policy: s.policy, mapper: s.mapper, hostEnv: s.hostEnv,
		sh: s.sh, box: s.box, pool: s.pool, key: s.key, folder: s.folder,
		ran: s.ran, reused: true, refreshed: s.refreshed, hostIPC: s.hostIPC,
	}
	return n
}

// recycle resets s for the next row and puts it back in the pool; a session
// that cannot be reset is closed for good. It runs after Close marked s
// closed, with s.mu held by the caller's goroutine.
func (s *Session) recycle() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.reset(ctx)
	if err == nil && s.pool.put(s.key, s.reuse()) {
		return
	}
	_ = s.teardown()
}

// reset empties the session: see the package comment above pool.
func (s *Session) reset(ctx context.Context) error {
	p := s.proc()
	if !s.sh.Started() {
		// No shell ever ran (or it ended with its bwrap): only the folder
		// holds what the row left.
		if p != nil {
			p.kill()
		}
		return s.folder.clean()
	}
	if p == nil || p.snap == nil || p.ctl == nil || p.supv == nil {
		return errors.New("local sandbox reset: the shell's supervisor is unknown")
	}
	s.box.mu.Lock()
	tainted := s.box.tainted
	s.box.tainted = false
	s.box.mu.Unlock()
	if !tainted && p.host != nil {
		s.refreshed = false
		err := s.sh.Refresh(ctx, func(token string) (bool, error) {
			if p.alone() {
				return false, nil
			}
			return true, p.signal(token, syscall.SIGUSR2)
		}, func() error {
			if s.hostIPC {
				if err := p.ipc.empty(); err != nil {
					return err
				}
			}
			return p.host.same(p)
		}, func() error {
			if err := s.folder.clean(); err != nil {
				return err
			}
			return p.snap.restore()
		})
		if !errors.Is(err, sandbox.ErrNotFresh) {
			s.refreshed = err == nil
			if err == nil {
				err = p.checkSandbox() // guard.go: nothing else left, the supervisor unchanged
			}
			return err
		}
		// What the refresh could not undo: a new shell instead.
	}
	err := s.sh.Reset(ctx, func(token string) error {
		return p.signal(token, syscall.SIGUSR1)
	}, func() error {
		p.shell = 0 // a new shell runs under the supervisor
		if err := s.folder.clean(); err != nil {
			return err
		}
		return p.snap.restore()
	})
	if err == nil {
		err = p.checkSandbox()
	}
	if err == nil && p.host != nil && p.maskShellMem() != nil {
		p.host = nil // the new shell is not refreshed in place (guard.go)
	}
	return err
}

// alone reports whether the session's cgroup holds no process but bwrap,
// its init, the supervisor and the shell: then the supervisor has nothing
// to kill before a refresh, and is not woken (its sweep of /proc costs more
// than the refresh itself). Without a cgroup the supervisor always runs.
// The System V IPC objects it would remove fail the refresh instead (the
// driver's look at the namespace, ipcFiles, or the state report's
// comparison: sandbox.Shell.Refresh), so the session gets a new shell,
// whose reset removes them.
func (p *shellProc) alone() bool {
	cg := p.s.cgroupIfAny()
	if cg == nil || p.shell == 0 && p.find() != nil {
		return false
	}
	if p.onlyKnown(cg) {
		return true
	}
	// The group's folders (one per v1 controller) hold the same processes:
	// the first is enough.
	for _, pid := range (&confine.Cgroup{Dirs: cg.Dirs[:1]}).Procs() {
		if pid != p.pid && pid != p.init && pid != p.sup && pid != p.shell {
			return false
		}
	}
	return true
}

// onlyKnown reports whether the session's cgroup cg counts exactly as many
// tasks as the sandbox's known processes (bwrap, the supervisor, which is
// its init, and the shell, one thread each): its pids.current, one kept
// file read again, where listing its processes and looking at each costs
// some ten system calls more. Those three are in the group for as long as
// the sandbox lives (its namespace ends with bwrap or the supervisor, and
// the supervisor with its shell unless the driver has it start another:
// shellProc.find), so no other task is. Any other count (a process left,
// a zombie not yet reaped, no pids controller) says nothing: the caller
// lists the processes.
func (p *shellProc) onlyKnown(cg *confine.Cgroup) bool {
	if len(cg.Dirs) == 0 || p.shell == 0 {
		return false
	}
	known := map[int]bool{p.pid: true, p.init: true, p.sup: true, p.shell: true}
	delete(known, 0)
	p.pidsCurrent.mu.Lock()
	if p.pidsCurrent.path == "" {
		p.pidsCurrent.path = filepath.Join(cg.Dirs[0], "pids.current")
	}
	p.pidsCurrent.mu.Unlock()
	b, err := p.pidsCurrent.read()
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return err == nil && n == len(known)
}

// signal passes token to the supervisor and wakes it with sig.
func (p *shellProc) signal(token string, sig syscall.Signal) error {
	// The token goes first, so the supervisor finds it when the signal
	// wakes it; the supervisor uses the last line it finds.
	if _, err := p.ctl.WriteString(token + "\n"); err != nil {
		return err
	}
	return syscall.Kill(p.sup, sig)
}

// teardown ends s's sandbox and removes its folder and cgroup.
func (s *Session) teardown() error {
	s.sh.Close()
	p := s.proc()
	if p != nil {
		p.kill()
	}
	if cg := s.cgroupIfAny(); cg != nil {
		if err := cg.Remove(); err != nil {
			return fmt.Errorf("local sandbox close: %w", err)
		}
	}
	if err := removeSessionDir(s.dir); err != nil {
		return fmt.Errorf("local sandbox close: %w", err)
	}
	return nil
}

// folder is a session folder's layout, to be emptied between rows: the
// folder itself and its home, tmp (mounted at /tmp: it must stay the same
// folder) and state folders stay, the engine folder with its files, as do
// the mount points bwrap makes in it (the session folder's own when it lies
// under /tmp, read-only mounts under /tmp); everything else goes, and state
// is emptied (its shell's two state files made neutral: emptyState).
type folder struct {
	buf    []byte // folder entries are read into it (kept)
	dir    string
	state  string
	engine string            // the engine folder (engineDir): kept with what it holds
	main   map[string]uint64 // dir, home, tmp, state, engine → inode
	mounts map[string]bool   // host paths of bwrap's mount points in the folder, and their parents
}

func newFolder(dir string, names ...string) (*folder, error) {
	f := &folder{dir: dir, state: filepath.Join(dir, "state"), engine: filepath.Join(dir, engineDir), main: map[string]uint64{}, mounts: map[string]bool{}}
	var st unix.Stat_t
	for _, p := range append([]string{dir}, names...) {
		if p != dir {
			p = filepath.Join(dir, p)
		}
		if err := unix.Lstat(p, &st); err != nil {
			return nil, err
		}
		f.main[p] = st.Ino
	}
	return f, nil
}

// mountPoints records where bwrap makes mount points in the folder for the
// binds of pol (see confine.Policy.Args: /tmp, then the session folder,
// then the extra mounts).
func (f *folder) mountPoints(pol confine.Policy) {
	dsts := []string{pol.SessionDir}
	for _, m := range pol.Mounts {
		dsts = append(dsts, m.Dst)
	}
	for _, dst := range dsts {
		host := ""
		switch {
		case dst != pol.SessionDir && within(dst, pol.SessionDir):
			host = dst
		case pol.TmpDir != "" && within(dst, "/tmp") && dst != "/tmp":
			host = filepath.Join(pol.TmpDir, strings.TrimPrefix(dst, "/tmp/"))
		}
		for host != "" && within(host, f.dir) && host != f.dir {
			f.mounts[host] = true
			host = filepath.Dir(host)
		}
	}
}

// within reports whether p is dir or inside it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// clean empties the folder; it fails when a kept folder was replaced or
// removed. It works through folder descriptors, each opened relative to
// its parent without following a link: a path of a dozen names resolved
// again for each look at a folder cost more than the look.
func (f *folder) clean() error {
	fd, err := unix.Open(f.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("local sandbox reset: %s was replaced: %w", f.dir, err)
	}
	defer unix.Close(fd)
	if err := keptDir(fd, f.dir, f.main[f.dir], 0o700); err != nil {
		return err
	}
	seen := 0
	if err := f.cleanIn(fd, f.dir, &seen); err != nil {
		return err
	}
	if seen != len(f.main)-1 {
		return fmt.Errorf("local sandbox reset: a folder of %s was removed", f.dir)
	}
	return nil
}

// cleanIn empties the folder dfd (dir).
func (f *folder) cleanIn(dfd int, dir string, seen *int) error {
	names, err := readDirNames(dfd, &f.buf)
	if err != nil {
		return fmt.Errorf("local sandbox reset: %s: %w", dir, err)
	}
	for _, n := range names {
		p := filepath.Join(dir, n)
		ino, main := f.main[p]
		if !main && !f.mounts[p] {
			if err := removeAt(dfd, n); err != nil {
				return fmt.Errorf("local sandbox reset: %s: %w", p, err)
			}
			continue
		}
		sub, err := unix.Openat(dfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil && !main && (errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)) {
			// Not a folder where bwrap makes a mount point: it goes.
			if err := removeAt(dfd, n); err != nil {
				return fmt.Errorf("local sandbox reset: %s: %w", p, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("local sandbox reset: %s was replaced: %w", p, err)
		}
		err = f.cleanKept(sub, p, ino, main, seen)
		_ = unix.Close(sub)
		if err != nil {
			return err
		}
	}
	return nil
}

// cleanKept empties the kept folder fd (p): one of the folder's own (main,
// inode ino) or a mount point of bwrap's.
func (f *folder) cleanKept(fd int, p string, ino uint64, main bool, seen *int) error {
	if !main {
		if err := keptDir(fd, p, 0, 0o755); err != nil {
			return err
		}
		return f.cleanIn(fd, p, seen)
	}
	*seen++
	if err := keptDir(fd, p, ino, 0o700); err != nil {
		return err
	}
	switch p {
	case f.state:
		return f.emptyState(fd, p)
	case f.engine:
		return nil // read-only in the sandbox: only the driver writes there
	}
	return f.cleanIn(fd, p, seen)
}

// keptDir checks that the open file fd (p) is still a folder (with inode
// ino unless 0) and gives it back mode and no user extended attributes.
func keptDir(fd int, p string, ino uint64, mode uint32) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("local sandbox reset: %s: %w", p, err)
	}
	if ino != 0 && st.Ino != ino || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("local sandbox reset: %s was replaced", p)
	}
	if st.Mode&0o7777 != mode {
		if err := unix.Fchmod(fd, mode); err != nil {
			return fmt.Errorf("local sandbox reset: %s: %w", p, err)
		}
	}
	return clearXattrsFD(fd, p)
}

// emptyState empties the session's state folder fd (p: sandbox.Shell's
// saved environment and folder) for the next row. The shell's two state
// files, env and cwd, are given neutral content in place (neutralState)
// rather than removed: on a disk's file system (ext4: the session folder is
// on the base folder's disk when it has no tmpfs of its own) a file made
// and removed per row costs more than all the rest of the folder's clean,
// and the next row's first command writes both again. Anything else, and a
// state file a row changed in any other way (a link, another kind of file,
// a second name, another owner or mode, an extended attribute), is removed.
func (f *folder) emptyState(fd int, p string) error {
	names, err := readDirNames(fd, &f.buf)
	if err != nil {
		return fmt.Errorf("local sandbox reset: %s: %w", p, err)
	}
	for _, n := range names {
		if stateFiles[n] && neutralize(fd, n) {
			continue
		}
		if err := removeAt(fd, n); err != nil {
			return fmt.Errorf("local sandbox reset: %s: %w", filepath.Join(p, n), err)
		}
	}
	return nil
}

// stateFiles are the shell's state files (sandbox.Shell's env and cwd).
var stateFiles = map[string]bool{"env": true, "cwd": true}

// neutralState is what a kept state file holds for the next row: one byte
// and no newline, a comment to the shell that sources env and a line that
// read refuses for cwd, so that a shell started before the next row's
// first command saved its own state restores nothing, as with no file
// (sandbox.Shell's set-up). Not empty: on ext4 a file cut to nothing and
// written again is flushed to the disk when it is closed.
const neutralState = "#"

// neutralize gives the state file name of the folder dirfd neutralState in
// place, not following a link; false (the caller removes it) unless it is a
// regular file with one name, owned by this process's user, with the mode a
// new shell gives it (0666 less the umask) and no extended attribute.
func neutralize(dirfd int, name string) bool {
	var st unix.Stat_t
	// Nothing but a regular file is opened (a device node, a FIFO).
	if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 ||
		int(st.Uid) != os.Geteuid() || fs.FileMode(st.Mode&0o7777) != 0o666&^umask() {
		return false
	}
	if n, err := unix.Flistxattr(fd, nil); err != nil && !errors.Is(err, unix.ENOTSUP) || n > 0 {
		return false
	}
	if n, err := unix.Pwrite(fd, []byte(neutralState), 0); err != nil || n != len(neutralState) {
		return false
	}
	return unix.Ftruncate(fd, int64(len(neutralState))) == nil
}

// clearXattrsFD removes the user.* extended attributes of the open file fd
// (shown as p); file systems without them are fine, and a file without
// attributes costs one system call and no buffer.
func clearXattrsFD(fd int, p string) error {
	n, err := unix.Flistxattr(fd, nil)
	for err == nil && n > 0 {
		buf := make([]byte, n)
		if n, err = unix.Flistxattr(fd, buf); err == nil {
			buf = buf[:n]
			n = 0
			for _, name := range strings.Split(string(buf), "\x00") {
				if strings.HasPrefix(name, "user.") {
					if err := unix.Fremovexattr(fd, name); err != nil {
						return fmt.Errorf("local sandbox reset: remove attribute %s of %s: %w", name, p, err)
					}
				}
			}
			return nil
		}
		if errors.Is(err, unix.ERANGE) { // grown since: again
			n, err = unix.Flistxattr(fd, nil)
		}
	}
	if err != nil {
		if errors.Is(err, unix.ENOTSUP) {
			return nil
		}
		return fmt.Errorf("local sandbox reset: list attributes of %s: %w", p, err)
	}
	return nil
}

// fsSnap is what the sandbox's own writable file systems (tmpfs: the root,
// /dev, /dev/shm, /dev/mqueue) held when it started, seen from the host
// through /proc/<pid>/root of a process inside. It is walked through
// folder descriptors relative to that root, opened once.
type fsSnap struct {
	root  string              // /proc/<pid>/root
	fd    int                 // the root, opened when the sandbox started
	devs  map[uint64]bool     // the devices of those file systems
	files map[string]snapFile // path below root → what it was
	buf   []byte              // folder entries are read into it (kept)
}

type snapFile struct {
	ino, size  int64
	mode       uint32
	mtimeNanos int64
}

// sandboxFS are the sandbox's own file systems, as paths inside it.
var sandboxFS = []string{"/", "/dev", "/dev/shm", "/dev/mqueue"}

// snapshot records the sandbox file systems of the process pid.
func snapshot(pid int) (*fsSnap, error) {
	root := "/proc/" + strconv.Itoa(pid) + "/root"
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("local sandbox: cannot see the sandbox's file systems: %w", err)
	}
	sn := &fsSnap{root: root, fd: fd, devs: map[uint64]bool{}, files: map[string]snapFile{}}
	var st unix.Stat_t
	for _, p := range sandboxFS {
		if err := unix.Fstatat(fd, "."+p, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			sn.devs[st.Dev] = true
		}
	}
	err = sn.walk(fd, "", func(int, string, string, snapFile) error { return nil }, func(rel string, f snapFile) {
		sn.files[rel] = f
	}, nil)
	if err != nil {
		sn.close()
		return nil, err
	}
	return sn, nil
}

// close closes the root descriptor.
func (sn *fsSnap) close() {
	if sn != nil && sn.fd >= 0 {
		_ = unix.Close(sn.fd)
		sn.fd = -1
	}
}

// walk visits every entry of the sandbox file systems in the folder dirfd
// (rel below the root), not entering other mounts: fn decides about each
// (errSkip: do not enter it), keep records it when fn said nothing, and
// dir, when set, gets each folder's descriptor before the walk enters it.
// The folder is listed from its start with plain system calls (an *os.File
// would cost a dup, a poller's try and a close more per folder).
func (sn *fsSnap) walk(dirfd int, rel string, fn func(dirfd int, name, rel string, f snapFile) error, keep func(rel string, f snapFile), dir func(fd int, rel string) error) error {
	names, err := readDirNames(dirfd, &sn.buf)
	if err != nil {
		return fmt.Errorf("local sandbox: %s/%s: %w", sn.root, rel, err)
	}
	for _, n := range names {
		r := n
		if rel != "" {
			r = rel + "/" + n
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("local sandbox: /%s: %w", r, err)
		}
		if !sn.devs[st.Dev] {
			continue // another mount: a host folder, /proc, the session's
		}
		f := snapFile{ino: int64(st.Ino), mode: st.Mode}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			f.size, f.mtimeNanos = st.Size, st.Mtim.Nano()
		}
		if err := fn(dirfd, n, r, f); errors.Is(err, errSkip) {
			continue
		} else if err != nil {
			return err
		}
		if keep != nil {
			keep(r, f)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			sub, err := unix.Openat(dirfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("local sandbox: /%s: %w", r, err)
			}
			if dir != nil {
				err = dir(sub, r)
			}
			if err == nil {
				err = sn.walk(sub, r, fn, keep, dir)
			}
			_ = unix.Close(sub)
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// restore removes what was added to the sandbox file systems since the
// snapshot and clears user attributes of what stays; an entry of the
// snapshot that was changed (other than a folder's mode) or removed is an
// error.
func (sn *fsSnap) restore() error {
	if sn.fd < 0 {
		return errors.New("local sandbox reset: the sandbox's root is closed")
	}
	seen := 0
	err := sn.walk(sn.fd, "", func(dirfd int, name, rel string, f snapFile) error {
		old, ok := sn.files[rel]
		if !ok {
			if err := removeAt(dirfd, name); err != nil {
				return fmt.Errorf("local sandbox reset: /%s: %w", rel, err)
			}
			return errSkip
		}
		seen++
		if old != f {
			if old.ino != f.ino || old.mode&unix.S_IFMT != unix.S_IFDIR || f.mode&unix.S_IFMT != unix.S_IFDIR {
				return fmt.Errorf("local sandbox reset: /%s was changed", rel)
			}
			// A folder's mode comes back.
			if err := unix.Fchmodat(dirfd, name, old.mode&0o7777, 0); err != nil {
				return fmt.Errorf("local sandbox reset: /%s: %w", rel, err)
			}
		}
		return nil
	}, nil, func(fd int, rel string) error {
		// Every folder kept: its user attributes go.
		return clearXattrsFD(fd, sn.root+"/"+rel)
	})
	if err != nil {
		return err
	}
	if seen != len(sn.files) {
		return errors.New("local sandbox reset: a file of the sandbox's own file systems was removed")
	}
	return nil
}

// removeAt removes name in the folder dirfd and, for a folder, everything
// in it (first giving folders their permissions back), never following a
// symbolic link.
func removeAt(dirfd int, name string) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	_ = unix.Fchmodat(dirfd, name, 0o700, 0)
	sub, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(sub), name)
	names, err := d.Readdirnames(-1)
	if err == nil {
		for _, n := range names {
			if err = removeAt(sub, n); err != nil {
				break
			}
		}
	}
	d.Close()
	if err != nil {
		return err
	}
	return unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
}

// errSkip tells walk's caller an entry is gone; walk then does not enter it.
var errSkip = errors.New("skip")
