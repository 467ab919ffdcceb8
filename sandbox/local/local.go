package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
	"golang.org/x/sys/unix"
)

// folderPrefix starts the name of every session folder; the run id follows,
// so GC finds a run's folders by name.
const folderPrefix = "hermes-sbx-"

// allowedEnv are the parent variables a command may see. HOME, TMPDIR and
// SHELL are set to the session's own values instead.
var allowedEnv = []string{"PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TERM", "TZ", "USER", "LOGNAME"}

// secretWords make a variable name refused even when allowlisted.
var secretWords = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"}

// engineDir is the folder of a pooled session's folder where the driver
// writes the scripts its shell sources between rows (sandbox.Shell's
// WriteFile); it is mounted read-only over itself and at engineMount, a
// short path (the shell reads that path a byte per system call), so no
// command can change what a later row's refresh runs.
const (
	engineDir   = "engine"
	engineMount = "/.hs"
)

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Driver opens local sessions. It is safe for concurrent use.
type Driver struct {
	cfg   sandbox.Config
	base  string
	shell string

	bwrap  string // bubblewrap's path; "" = commands run unconfined (Isolation "none")
	mounts []confine.Mount
	cgroup string // cgroup version usable here ("v2", "v1"), "" = limits by rlimits only

	pool *pool    // closed confined sessions kept for reuse (pool.go)
	ceil ceilings // how the per-session ceilings are held here (ceilings.go)

	// probe is the confinement probe New starts in the background (nil
	// with Isolation "none"); settle waits for it once and sets bwrap,
	// cgroup and ceil, or probeErr. Every exported method that reads those
	// calls settle first.
	probe    chan confine.Report
	settled  sync.Once
	probeErr error
}

// optOut names the flag that runs commands unconfined, for errors.
const optOut = "--local-isolation none"

// Factory is the sandbox.Factory of the "local" scheme.
func Factory(cfg sandbox.Config) (sandbox.Driver, error) { return New(cfg) }

// New checks the base folder and finds bash, and starts probing whether
// commands can be confined here (see settle). It does not create anything.
func New(cfg sandbox.Config) (*Driver, error) {
	base := cfg.Local.BaseDir
	if base == "" {
		base = os.TempDir()
	}
	if fi, err := os.Stat(base); err != nil {
		return nil, fmt.Errorf("local sandbox: base folder: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("local sandbox: base folder %s is not a folder", base)
	}
	shell := cfg.Local.Shell
	if shell == "" {
		shell = "bash"
	}
	path, err := exec.LookPath(shell)
	if err != nil {
		return nil, fmt.Errorf("local sandbox: find shell: %w", err)
	}
	d := &Driver{cfg: cfg, base: base, shell: path, pool: newPool(cfg.Local.Pool)}
	if err := sandbox.CheckShellMode(cfg.ShellMode); err != nil {
		return nil, fmt.Errorf("local sandbox: %w", err)
	}
	switch cfg.Local.Isolation {
	case "none":
		return d, nil
	case "", "bwrap":
	default:
		return nil, fmt.Errorf("local sandbox: isolation %q: want bwrap or none", cfg.Local.Isolation)
	}
	switch cfg.Local.Network {
	case "", confine.NetworkNone, confine.NetworkHost:
	default:
		return nil, fmt.Errorf("local sandbox: network %q: want none or host", cfg.Local.Network)
	}
	for _, m := range cfg.Local.Mounts {
		mt, err := confine.ParseMount(m)
		if err != nil {
			return nil, fmt.Errorf("local sandbox: %w", err)
		}
		if _, err := os.Stat(mt.Src); err != nil {
			return nil, fmt.Errorf("local sandbox: mount %s: %w", m, err)
		}
		d.mounts = append(d.mounts, mt)
	}
	// The probe starts bubblewrap a few times (a few hundred ms of wall
	// time); it runs while the caller goes on (a resumed run reads its
	// ledger meanwhile) and is waited for by the first method that needs
	// it: Preflight, Open, Confined, Warnings or DiskBytes.
	d.probe = takeProbe()
	return d, nil
}

// early is the confinement probe StartProbe started, not yet taken by a
// New.
var early struct {
	mu sync.Mutex
	ch chan confine.Report
}

// StartProbe starts now the confinement probe the next New that confines
// commands would start (bubblewrap run once with the sandbox's policy, some
// 10 ms of wall time), so that it runs while the caller parses its flags and
// reads its inputs; that New takes its result. A command calls it as soon as
// it knows it will probably open a confined local driver: when no New takes
// the probe, it cost its own run and nothing else. A second call before a
// New takes the first probe does nothing.
func StartProbe() {
	early.mu.Lock()
	defer early.mu.Unlock()
	if early.ch == nil {
		early.ch = startProbe()
	}
}

// takeProbe returns StartProbe's probe, once, or starts a new one.
func takeProbe() chan confine.Report {
	early.mu.Lock()
	defer early.mu.Unlock()
	ch := early.ch
	early.ch = nil
	if ch == nil {
		ch = startProbe()
	}
	return ch
}

func startProbe() chan confine.Report {
	ch := make(chan confine.Report, 1)
	go func() { ch <- confine.Probe(context.Background()) }()
	return ch
}

// settle waits for New's confinement probe (once) and applies its result.
// It returns why commands cannot be confined, nil when they can or when the
// driver runs them unconfined.
func (d *Driver) settle() error {
	d.settled.Do(func() {
		if d.probe == nil {
			return
		}
		r := <-d.probe
		if err := r.Usable(); err != nil {
			d.probeErr = fmt.Errorf("local sandbox: cannot confine commands: %v (%s runs them unconfined, as the invoking user)", err, optOut)
			return
		}
		d.bwrap = r.Bwrap
		d.cgroup = r.Cgroup
		l := d.cfg.Local.Limits
		d.setCeilings(r, confine.Limits{MemoryBytes: l.MemoryBytes, CPUWeight: l.CPUWeight}, l.DiskBytes)
	})
	return d.probeErr
}

// Preflight is the driver's sandbox.Preflighter: it fails when commands
// cannot be confined here (the error names the opt-out). It blocks until
// New's probe has finished; later calls return at once.
func (d *Driver) Preflight(context.Context) error { return d.settle() }

// Confined reports whether the driver's commands run confined (false when
// they cannot be: see Preflight).
func (d *Driver) Confined() bool {
	_ = d.settle()
	return d.bwrap != ""
}

// Open creates the session's private folder (home, tmp and state inside,
// all mode 0700). A confined session whose ReadOnly folder is missing is
// refused (openable). It costs a few system calls and starts no process.
func (d *Driver) Open(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	spec = sandbox.Resolve(spec, d.cfg)
	if err := d.openable(ctx, spec); err != nil {
		return nil, fmt.Errorf("local sandbox open: %w", err)
	}
	key := ""
	if d.bwrap != "" && d.cfg.ShellMode != sandbox.ShellFresh && isBash(d.shell) && d.pool.max >= 0 {
		key = specKey(specView{Cwd: spec.Cwd, ReadOnly: spec.ReadOnly, Env: spec.Env, Timeout: spec.Timeout, MaxOutput: spec.MaxOutput})
	}
	if key != "" {
		if s := d.pool.take(key); s != nil {
			return s, nil
		}
	}
	run := spec.RunID
	if run == "" {
		run = d.cfg.RunID
	}
	dir, err := os.MkdirTemp(d.base, folderPrefix+sandbox.SafeName(run)+"-*")
	if err != nil {
		return nil, fmt.Errorf("local sandbox open: %w", err)
	}
	if err := d.mountDisk(dir); err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("local sandbox open: %w", err)
	}
	s := &Session{
		spec:   spec,
		dir:    dir,
		home:   filepath.Join(dir, "home"),
		state:  filepath.Join(dir, "state"),
		marker: filepath.Base(dir),
		shell:  d.shell,
		box:    &box{},
	}
	kept := []string{"home", "tmp", "state"}
	if key != "" {
		kept = append(kept, engineDir)
	}
	for _, p := range kept {
		if err := os.Mkdir(filepath.Join(dir, p), 0o700); err != nil {
			_ = removeSessionDir(dir)
			return nil, fmt.Errorf("local sandbox open: %w", err)
		}
	}
	if s.folder, err = newFolder(dir, kept...); err != nil {
		_ = removeSessionDir(dir)
		return nil, fmt.Errorf("local sandbox open: %w", err)
	}
	s.cwd = s.home
	if spec.Cwd != "" {
		fi, err := os.Stat(spec.Cwd)
		if err != nil || !fi.IsDir() {
			_ = removeSessionDir(dir)
			return nil, fmt.Errorf("local sandbox open: working folder %q is not a folder", spec.Cwd)
		}
		s.cwd = spec.Cwd
	}
	s.env = d.environ(s, spec.Env)
	s.script = sandbox.StateScript(s.state, "")
	var prelude string // the confined shell's ulimits (ShellLimits), for each command's script and each shell's start; none unconfined
	if d.bwrap != "" {
		s.bwrap = d.bwrap
		l := d.cfg.Local.Limits
		s.policy = confine.Policy{
			SessionDir: dir,
			TmpDir:     filepath.Join(dir, "tmp"),
			Mounts:     append(append(slices.Clip(d.mounts), readOnly(spec.ReadOnly)...), s.engineMounts(key != "")...),
			Network:    d.cfg.Local.Network,
			Env:        s.env,
			Chdir:      s.cwd,
			Limits: confine.Limits{Processes: l.Processes, MemoryBytes: l.MemoryBytes,
				FileSizeBytes: l.FileSizeBytes, CPUSeconds: l.CPUSeconds, CPUWeight: l.CPUWeight},
		}
		if spec.Cwd != "" {
			s.policy.WorkDir = spec.Cwd
		}
		if err := s.policy.Validate(); err != nil {
			_ = removeSessionDir(dir)
			return nil, fmt.Errorf("local sandbox open: %w", err)
		}
		s.mapper = s.policy.Mapper()
		s.folder.mountPoints(s.policy)
		if d.cgroup != "" && (l.Processes > 0 || l.MemoryBytes > 0 || l.CPUWeight > 0) {
			s.box.cgVersion = d.cgroup // created with the first process (cgroup)
		}
		if prelude = d.rlimits(s.policy.Limits).ShellLimits(); prelude != "" {
			s.script = prelude + "\n" + s.script
		}
		// The bwrap process itself gets only the marker, so gc finds it.
		s.hostEnv = []string{"PATH=" + defaultPath, sandbox.MarkerVar + "=" + s.marker}
	}
	if d.cfg.ShellMode != sandbox.ShellFresh {
		s.newShell(prelude, key)
		if s.supervised() {
			s.pool, s.key = d.pool, key
		}
	}
	return s, nil
}

// newShell gives the session its long-lived shell (persistent mode), with
// the ulimits prelude; key is the session's pool key ("" = not pooled).
func (s *Session) newShell(prelude, key string) {
	refresh := key != "" && s.bwrap != "" && isBash(s.shell)
	// As root the driver can enter the sandbox's IPC namespace and look at
	// its objects itself (ipcFiles); the shell's state report then leaves
	// them out.
	s.hostIPC = refresh && os.Geteuid() == 0
	s.sh = sandbox.NewShell(sandbox.ShellConfig{
		Start:      s.startShell,
		StateDir:   s.state,
		Prelude:    prelude,
		MaxOutput:  s.spec.MaxOutput,
		Refresh:    refresh,
		WriteFile:  s.engineWriter(key != ""),
		ReadReport: s.readReport,
		ReportDir:  reportDir,
		HostIPC:    s.hostIPC,
	})
}

// engineMounts are the read-only mounts of a pooled session's engine
// folder (engineDir), none when the session is not pooled.
func (s *Session) engineMounts(pooled bool) []confine.Mount {
	if !pooled {
		return nil
	}
	e := filepath.Join(s.dir, engineDir)
	return []confine.Mount{{Src: e, Dst: e, ReadOnly: true}, {Src: e, Dst: engineMount, ReadOnly: true}}
}

// engineWriter is a pooled session's sandbox.ShellConfig.WriteFile: into
// its engine folder, as the shell sees it at engineMount.
func (s *Session) engineWriter(pooled bool) func(name string, data []byte) (string, error) {
	if !pooled {
		return nil
	}
	return func(name string, data []byte) (string, error) {
		return engineMount + "/" + name, writeInside(filepath.Join(s.dir, engineDir), name, data)
	}
}

// reportDir is where a refreshed shell writes its state reports
// (sandbox.ShellConfig.ReportDir): the sandbox's own memory file system,
// where a file made and removed per row costs nothing of the disk's.
const reportDir = "/dev/shm"

// readReport reads and removes the file name of the sandbox's reportDir
// (sandbox.ShellConfig.ReadReport), through the supervisor's
// /proc/<pid>/root: what the shell wrote there. The folders and the file
// are opened without following a link, the file without blocking (a FIFO a
// row left is no report), and only a regular file of at most a mebibyte is
// read.
func (s *Session) readReport(name string) ([]byte, error) {
	p := s.proc()
	if p == nil {
		return nil, errors.New("local sandbox: no sandbox to read a report from")
	}
	if p.sup == 0 {
		if err := p.find(); err != nil || p.sup == 0 {
			return nil, fmt.Errorf("local sandbox: the supervisor is unknown: %v", err)
		}
	}
	root := "/proc/" + strconv.Itoa(p.sup) + "/root"
	// The snapshot's descriptor of that root, opened when the sandbox
	// started (no process of it can change its root: chroot and
	// pivot_root are refused), spares resolving the link again.
	fd := -1
	if p.snap != nil {
		fd = p.snap.fd
	}
	if fd < 0 {
		var err error
		if fd, err = unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return nil, &fs.PathError{Op: "open", Path: root, Err: err}
		}
		defer unix.Close(fd)
	}
	return takeFile(fd, root, reportDirs, name)
}

// reportDirs are reportDir's folders.
var reportDirs = strings.Split(strings.TrimPrefix(reportDir, "/"), "/")

// takeFile reads and removes the regular file name in the folder dirs
// below the folder dirfd (shown as at), opening each without following a
// link (see readReport).
func takeFile(dirfd int, at string, dirs []string, name string) ([]byte, error) {
	if !plainName(name) {
		return nil, fmt.Errorf("local sandbox: report file name %q", name)
	}
	dfd, err := unix.Dup(dirfd)
	if err != nil {
		return nil, err
	}
	defer func() { unix.Close(dfd) }()
	for _, d := range dirs {
		at += "/" + d
		next, err := unix.Openat(dfd, d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: at, Err: err}
		}
		unix.Close(dfd)
		dfd = next
	}
	path := at + "/" + name
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if err := unix.Unlinkat(dfd, name, 0); err != nil {
		return nil, &fs.PathError{Op: "remove", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	const most = 1 << 20
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > most {
		return nil, fmt.Errorf("local sandbox: %s is not a state report", path)
	}
	b, err := confine.ReadFDSize(fd, int(st.Size)+512, most) // a file that grew since is read to its end, within the limit
	if errors.Is(err, confine.ErrTooLong) {
		return nil, fmt.Errorf("local sandbox: %s is not a state report", path)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	return b, nil
}

// plainName reports whether name is a file name of its own folder: not
// empty, no slash, not . or .. (the driver's engine and report files).
func plainName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsRune(name, '/')
}

// writeInside writes data to a new file named name in dir (the engine
// folder), from the host, without following a link: what is there is
// removed first (a link itself, not its target), and the file is created
// exclusively, relative to the folder opened without following a link.
// Commands cannot write the engine folder (it is mounted read-only); this
// is the second wall. A refresh writes one such file per row (its end
// markers), so it is made with plain system calls, where an os.Root and an
// *os.File cost some fifteen.
func writeInside(dir, name string, data []byte) error {
	if !plainName(name) {
		return fmt.Errorf("local sandbox: engine file name %q", name)
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(dfd)
	if fd, ok := sameSizeFile(dfd, name, len(data)); ok {
		// A refresh's report file changes only in its markers, so it keeps
		// its size: written over in place, the file system allocates and
		// frees nothing (on ext4 a new file and the removal of the old one
		// cost more than all the rest).
		return writeAll(fd, data, filepath.Join(dir, name))
	}
	if err := unix.Unlinkat(dfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return &fs.PathError{Op: "remove", Path: filepath.Join(dir, name), Err: err}
	}
	fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &fs.PathError{Op: "open", Path: filepath.Join(dir, name), Err: err}
	}
	return writeAll(fd, data, filepath.Join(dir, name))
}

// sameSizeFile opens name in the folder dirfd for writing when it is a
// regular file of size bytes with one link, not following a link.
func sameSizeFile(dirfd int, name string, size int) (int, bool) {
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, false
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != int64(size) || st.Nlink != 1 {
		unix.Close(fd)
		return -1, false
	}
	return fd, true
}

// writeAll writes data to fd from its start and closes it.
func writeAll(fd int, data []byte, path string) error {
	var err error
	for off := 0; off < len(data) && err == nil; {
		var n int
		if n, err = unix.Pwrite(fd, data[off:], int64(off)); err == nil {
			off += n
		} else if errors.Is(err, unix.EINTR) {
			err = nil
		}
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

// createIn replaces what is at rel in root (a link itself, not its target)
// with a new file of mode perm (less the umask) holding what r reads.
func createIn(root *os.Root, rel string, perm fs.FileMode, r io.Reader) error {
	if err := root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// environ builds a command environment from the allowlist, the session's own
// folders and the Spec's variables.
func (d *Driver) environ(s *Session, extra map[string]string) []string {
	vars := map[string]string{}
	names := append(append([]string(nil), allowedEnv...), d.cfg.Local.PassEnv...)
	for _, k := range names {
		if v, ok := os.LookupEnv(k); ok && !secretName(k) {
			vars[k] = v
		}
	}
	if vars["PATH"] == "" {
		vars["PATH"] = defaultPath
	}
	if vars["LANG"] == "" {
		vars["LANG"] = "C.UTF-8"
	}
	if vars["TERM"] == "" {
		vars["TERM"] = "dumb"
	}
	vars["HOME"] = s.home
	vars["TMPDIR"] = filepath.Join(s.dir, "tmp")
	if d.bwrap != "" {
		vars["TMPDIR"] = "/tmp" // the session's tmp folder, mounted there
	}
	vars["SHELL"] = d.shell
	for k, v := range extra {
		vars[k] = v
	}
	vars[sandbox.MarkerVar] = s.marker
	env := make([]string, 0, len(vars))
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}

func secretName(name string) bool {
	up := strings.ToUpper(name)
	for _, w := range secretWords {
		if strings.Contains(up, w) {
			return true
		}
	}
	return false
}

// GC kills processes and removes folders left in the base folder by sessions
// of runID ("" = every run) that were never closed, e.g. after kill -9. It is
// safe only when that run is no longer running.
func (d *Driver) GC(ctx context.Context, runID string) (int, error) {
	prefix := folderPrefix
	if runID != "" {
		prefix += sandbox.SafeName(runID) + "-"
	}
	killTree(0, prefix)
	confine.RemoveStale(prefix)
	ents, err := os.ReadDir(d.base)
	if err != nil {
		return 0, fmt.Errorf("local sandbox gc: %w", err)
	}
	n := 0
	var errs []error
	for _, e := range ents {
		if ctx.Err() != nil {
			return n, fmt.Errorf("local sandbox gc: %w", ctx.Err())
		}
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		if err := removeSessionDir(filepath.Join(d.base, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("local sandbox gc: %w", err)
	}
	return n, nil
}

// Session is one private folder and the state of its shell. Exec calls are
// serialized.
type Session struct {
	spec   sandbox.Spec
	dir    string // private folder; holds home, tmp, state
	home   string
	state  string
	cwd    string // starting working folder
	marker string
	shell  string
	env    []string
	script string

	// Confined sessions only (bwrap != ""):
	bwrap   string
	policy  confine.Policy
	mapper  *confine.Mapper
	hostEnv []string // environment of the bwrap process on the host

	sh     *sandbox.Shell // the long-lived shell (persistent mode); nil in fresh mode
	box    *box           // what every handle on this session shares
	folder *folder        // the folder's layout, for emptying it between rows

	// Pooled sessions only (see pool.go):
	pool   *pool
	key    string // the Spec's pool key; "" = not pooled
	reused bool   // handed out from the pool
	// refreshed: the last reset kept the shell (refreshed in place).
	refreshed bool
	// hostIPC: the shell's state report leaves out System V IPC objects,
	// which the driver checks itself (sandbox.ShellConfig.HostIPC).
	hostIPC bool

	mu sync.Mutex // serializes Exec and the final part of Close

	smu     sync.Mutex // guards closed and running
	closed  bool
	running int  // pid of the running command's shell, 0 when idle
	ran     bool // a command was started: Close must sweep for leftovers
}

// box is the mutable part of a session that its handles share (a pooled
// session gets a new handle per row).
type box struct {
	mu        sync.Mutex
	cgVersion string          // cgroup version to create the session's group in; "" = none needed
	cg        *confine.Cgroup // the session's cgroup once created
	proc      *shellProc      // the running long-lived shell (confined), nil if none
	tainted   bool            // a command since the last reset was not sandbox.RefreshSafe
}

// proc is the session's running long-lived shell (confined), nil if none.
func (s *Session) proc() *shellProc {
	s.box.mu.Lock()
	defer s.box.mu.Unlock()
	return s.box.proc
}

// cgroup returns the session's cgroup, creating it on first use when its
// limits need one; nil when they do not. A session that never starts a
// process costs no cgroup.
func (s *Session) cgroup() (*confine.Cgroup, error) {
	s.box.mu.Lock()
	defer s.box.mu.Unlock()
	if s.box.cg != nil || s.box.cgVersion == "" {
		return s.box.cg, nil
	}
	cg, err := confine.NewCgroup(s.box.cgVersion, filepath.Base(s.dir), s.policy.Limits)
	if err != nil {
		return nil, err
	}
	s.box.cg = cg
	return cg, nil
}

// cgroupIfAny returns the session's cgroup if it was created.
func (s *Session) cgroupIfAny() *confine.Cgroup {
	s.box.mu.Lock()
	defer s.box.mu.Unlock()
	return s.box.cg
}

// Dir returns the session's private folder. Tests use it to check that Close
// removed it.
func (s *Session) Dir() string { return s.dir }

// Marker returns the value of HERMES_SANDBOX in every command's environment.
func (s *Session) Marker() string { return s.marker }

// Exec runs cmd and blocks until it ends, times out or ctx is cancelled. In
// the persistent mode (the default) it is written to the session's one
// long-lived shell (see sandbox.Shell): a timeout kills the command's
// processes and returns exit 124 with the output so far, background jobs
// keep running until a timeout or Close. In the fresh mode every command is
// a new bash restoring the saved state; a timeout kills the whole process
// tree, and background jobs still running when the shell exits are killed.
// Cancellation kills the command and returns ctx's error.
func (s *Session) Exec(ctx context.Context, cmd sandbox.Cmd) (sandbox.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx, "exec"); err != nil {
		return sandbox.Result{}, err
	}
	timeout := cmd.Timeout
	if timeout <= 0 {
		timeout = s.spec.Timeout
	}
	if s.sh != nil {
		if s.key != "" && !sandbox.RefreshSafe(cmd.Command) {
			s.box.mu.Lock()
			s.box.tainted = true
			s.box.mu.Unlock()
		}
		res, err := s.sh.Exec(ctx, cmd.Command, timeout)
		if err != nil {
			return sandbox.Result{}, fmt.Errorf("local sandbox exec: %w", err)
		}
		return res, nil
	}
	start := time.Now()

	rOut, wOut, err := os.Pipe()
	if err != nil {
		return sandbox.Result{}, fmt.Errorf("local sandbox exec: %w", err)
	}
	rErr, wErr, err := os.Pipe()
	if err != nil {
		rOut.Close()
		wOut.Close()
		return sandbox.Result{}, fmt.Errorf("local sandbox exec: %w", err)
	}
	c := exec.Command(s.shell, "-c", s.script, "bash", cmd.Command)
	c.Dir = s.cwd
	c.Env = s.env
	if s.bwrap != "" {
		bw, err := s.policy.Args(s.bwrap, c.Args)
		if err != nil {
			rOut.Close()
			wOut.Close()
			rErr.Close()
			wErr.Close()
			return sandbox.Result{}, fmt.Errorf("local sandbox exec: %w", err)
		}
		defer bw.Close() // the seccomp filter's descriptor
		args := bw.Args
		cg, err := s.cgroup()
		if err != nil {
			rOut.Close()
			wOut.Close()
			rErr.Close()
			wErr.Close()
			return sandbox.Result{}, fmt.Errorf("local sandbox exec: %w", err)
		}
		if cg != nil {
			args = cg.Wrap(args)
		}
		c = exec.Command(args[0], args[1:]...)
		c.ExtraFiles = bw.Files
		c.Env = s.hostEnv
		c.Dir = s.dir
	}
	c.Stdout = wOut
	c.Stderr = wErr
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	err = c.Start()
	wOut.Close()
	wErr.Close()
	if err != nil {
		rOut.Close()
		rErr.Close()
		return sandbox.Result{}, fmt.Errorf("local sandbox exec: %w", err)
	}
	pid := c.Process.Pid
	s.smu.Lock()
	s.running = pid
	s.ran = true
	closedNow := s.closed
	s.smu.Unlock()
	defer func() {
		s.smu.Lock()
		s.running = 0
		s.smu.Unlock()
	}()
	if closedNow {
		s.kill(pid) // Close ran between the check and the start
	}

	outCap, errCap := sandbox.NewCapture(s.spec.MaxOutput), sandbox.NewCapture(s.spec.MaxOutput)
	var readers sync.WaitGroup
	readers.Add(2)
	go copyAll(&readers, outCap, rOut)
	go copyAll(&readers, errCap, rErr)

	waited := make(chan error, 1)
	go func() { waited <- c.Wait() }()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var timedOut bool
	var ctxErr error
	select {
	case <-waited:
		// The shell ended: kill what it left in its group.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	case <-timer.C:
		timedOut = true
		s.kill(pid)
		<-waited
	case <-ctx.Done():
		ctxErr = ctx.Err()
		s.kill(pid)
		<-waited
	}

	// A process that escaped the group may still hold the pipes: give the
	// readers a moment, then kill by marker and cut the pipes.
	readDone := make(chan struct{})
	go func() { readers.Wait(); close(readDone) }()
	select {
	case <-readDone:
	case <-time.After(200 * time.Millisecond):
		s.kill(pid)
		select {
		case <-readDone:
		case <-time.After(time.Second):
			rOut.Close()
			rErr.Close()
			<-readDone
		}
	}
	rOut.Close()
	rErr.Close()

	if ctxErr != nil {
		return sandbox.Result{}, fmt.Errorf("local sandbox exec: %w", ctxErr)
	}
	res := sandbox.Result{Duration: time.Since(start), TimedOut: timedOut}
	var to, te bool
	res.Stdout, to = outCap.Text()
	res.Stderr, te = errCap.Text()
	res.Truncated = to || te
	switch {
	case timedOut:
		res.ExitCode = 124
	case c.ProcessState.ExitCode() >= 0:
		res.ExitCode = c.ProcessState.ExitCode()
	default:
		if ws, ok := c.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.ExitCode = 128 + int(ws.Signal())
		} else {
			res.ExitCode = -1
		}
	}
	return res, nil
}

func copyAll(wg *sync.WaitGroup, w io.Writer, r io.Reader) {
	defer wg.Done()
	_, _ = io.Copy(w, r)
}

// kill ends the command started as pid and everything it started: for a
// confined session, the bwrap process, whose PID namespace dies with it;
// otherwise the process tree, found by group and marker.
func (s *Session) kill(pid int) {
	if s.bwrap != "" {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if cg := s.cgroupIfAny(); cg != nil {
			_ = cg.KillAll()
		}
		return
	}
	killTree(pid, s.marker)
}

// Start implements sandbox.Starter: it starts the session's shell (a
// pooled session's is running already). Without a long-lived shell
// (ShellFresh) it does nothing.
func (s *Session) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx, "start"); err != nil {
		return err
	}
	if s.sh == nil {
		return nil
	}
	if err := s.sh.Start(ctx); err != nil {
		return fmt.Errorf("local sandbox start: %w", err)
	}
	return nil
}

// HostDir is the session's working folder as a folder of this machine; a
// confined session sees it at the same path. Callers that start helpers
// beside the session (a rollout's MCP servers, as ${workdir}) use it.
func (s *Session) HostDir() string { return s.cwd }

// isClosed reports whether Close was called.
func (s *Session) isClosed() bool {
	s.smu.Lock()
	defer s.smu.Unlock()
	return s.closed
}

// Close kills the running command, if any, and every process the session's
// commands left, then removes the private folder. It does not wait for a
// running command to end on its own, and is safe to call more than once.
func (s *Session) Close(ctx context.Context) error {
	s.smu.Lock()
	if s.closed {
		s.smu.Unlock()
		return nil
	}
	s.closed = true
	pid := s.running
	s.smu.Unlock()
	// An idle pooled session is reset in the background and kept for the
	// next row (pool.go).
	if s.key != "" && pid == 0 && s.mu.TryLock() {
		if s.pool.begin(s.key) {
			go func() {
				defer s.pool.end(s.key)
				defer s.mu.Unlock()
				s.recycle()
			}()
			return nil
		}
		s.mu.Unlock()
	}
	if pid > 0 {
		s.kill(pid)
	}
	if s.sh != nil {
		s.sh.Close()
	}
	s.mu.Lock() // the running Exec, if any, ends now
	defer s.mu.Unlock()
	s.smu.Lock()
	ran := s.ran
	s.smu.Unlock()
	if ran && s.bwrap == "" { // a session that never ran a command has no process to sweep for; a confined one none left
		killTree(0, s.marker)
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

// removeAll removes dir, first making folders writable again in case a
// command removed their permissions.
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if e != nil && e.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// openable reports why a session of spec cannot open: commands cannot be
// confined here (settle), ctx is done, or
// (confined) a ReadOnly folder is not one (checkReadOnly).
func (d *Driver) openable(ctx context.Context, spec sandbox.Spec) error {
	if err := d.settle(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if d.bwrap == "" {
		return nil // unconfined, nothing is mounted
	}
	return checkReadOnly(spec.ReadOnly)
}

// checkReadOnly reports the first of paths (a spec's ReadOnly) that is not
// a folder on this host. bubblewrap cannot mount such a path: it would
// exit before the sandbox starts, so the session is refused here with the
// path named instead. It costs one stat per path.
func checkReadOnly(paths []string) error {
	for _, p := range paths {
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("folder to read %s does not exist", p)
		case err != nil:
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err // the path is named already
			}
			return fmt.Errorf("folder to read %s: %w", p, err)
		case !fi.IsDir():
			return fmt.Errorf("folder to read %s is not a folder", p)
		}
	}
	return nil
}

// readOnly mounts each of paths read-only at its own path.
func readOnly(paths []string) []confine.Mount {
	ms := make([]confine.Mount, 0, len(paths))
	for _, p := range paths {
		ms = append(ms, confine.Mount{Src: p, Dst: p, ReadOnly: true})
	}
	return ms
}
