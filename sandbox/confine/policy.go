package confine

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Network modes of a Policy.
const (
	NetworkNone = "none" // a private network namespace with its own loopback only
	NetworkHost = "host" // the host's network
)

// HostDirs are the host folders a confined command sees, read-only. Missing
// ones are skipped; ones that are symbolic links (merged /usr) are recreated
// as the same links.
var HostDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// MaskedPaths are host files and folders under HostDirs that a confined
// command must not read: password hashes, sudo rules, ssh host keys, TLS
// private keys, stored credentials. Files are replaced by an empty file,
// folders by an empty read-only folder. Entries ending in "*" are globs.
var MaskedPaths = []string{
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
	"/etc/sudoers", "/etc/sudoers.d",
	"/etc/ssh/ssh_host_*",
	"/etc/ssl/private",
	"/etc/security/opasswd",
	"/etc/credstore", "/etc/credstore.encrypted",
	"/etc/wireguard",
	"/etc/NetworkManager/system-connections",
	"/etc/docker",
	"/etc/libvirt/secrets",
	"/etc/ipsec.secrets",
	"/etc/krb5.keytab",
	"/etc/letsencrypt",
	"/etc/pki/tls/private",
	"/etc/cups/ssl",
	"/etc/.pwd.lock",
}

// Mount is one extra folder or file made visible to a confined command.
type Mount struct {
	Src      string // host path
	Dst      string // path inside the sandbox
	ReadOnly bool
}

// ParseMount reads "SRC:DST[:ro]" (DST may be omitted: "SRC" mounts at
// the same path; ":rw" is accepted as the default). Both paths must be
// absolute.
func ParseMount(s string) (Mount, error) {
	parts := strings.Split(s, ":")
	var m Mount
	switch {
	case len(parts) == 1:
		m = Mount{Src: parts[0], Dst: parts[0]}
	case len(parts) == 2:
		m = Mount{Src: parts[0], Dst: parts[1]}
		if parts[1] == "ro" || parts[1] == "rw" {
			m = Mount{Src: parts[0], Dst: parts[0], ReadOnly: parts[1] == "ro"}
		}
	case len(parts) == 3 && (parts[2] == "ro" || parts[2] == "rw"):
		m = Mount{Src: parts[0], Dst: parts[1], ReadOnly: parts[2] == "ro"}
	default:
		return Mount{}, fmt.Errorf("mount %q: want SRC:DST[:ro]", s)
	}
	if !filepath.IsAbs(m.Src) || !filepath.IsAbs(m.Dst) {
		return Mount{}, fmt.Errorf("mount %q: SRC and DST must be absolute paths", s)
	}
	m.Src, m.Dst = filepath.Clean(m.Src), filepath.Clean(m.Dst)
	if m.Dst == "/" {
		return Mount{}, fmt.Errorf("mount %q: DST cannot be /", s)
	}
	return m, nil
}

// String gives the mount back as SRC:DST[:ro].
func (m Mount) String() string {
	s := m.Src + ":" + m.Dst
	if m.ReadOnly {
		s += ":ro"
	}
	return s
}

// Limits are per-session resource limits; zero means unlimited.
type Limits struct {
	Processes     int   // processes (and threads) of the session
	MemoryBytes   int64 // address space per process (rlimit) or the session's memory (cgroup)
	FileSizeBytes int64 // largest file a command may write
	CPUSeconds    int   // CPU time per process
	CPUWeight     int   // the session's cgroup CPU weight (1..10000; 0 = the cgroup's default), see NewCgroup
}

// Policy says what a confined command sees and may use.
type Policy struct {
	SessionDir string   // host folder of the session, read-write at the same path
	WorkDir    string   // the row's working folder, read-write at the same path; "" = none
	TmpDir     string   // host folder (normally inside SessionDir) mounted at /tmp
	Mounts     []Mount  // extra mounts
	Network    string   // NetworkNone ("" too) or NetworkHost
	Env        []string // the whole environment, KEY=VALUE; nothing else is inherited
	Chdir      string   // folder the command starts in; "" = WorkDir, else SessionDir
	Limits     Limits
	// Layout describes the machine bwrap runs on when that is not this one
	// (a remote host); nil = this machine, read by Args.
	Layout *Layout
	// SeccompFile is, with a Layout, where the seccomp filter (Seccomp)
	// lies on that machine: the command line then opens it itself. A file
	// inside a folder the command may write is mounted read-only over
	// itself.
	SeccompFile string
	// AsInit makes the command the PID namespace's init (pid 1, bwrap's
	// --as-pid-1) instead of bwrap's own: it then reaps what it adopts,
	// and no process of bwrap's stays in the sandbox.
	AsInit bool
}

// Layout is what Args must know of the machine bwrap runs on: which of
// HostDirs are folders or symbolic links there, and which MaskedPaths exist.
type Layout struct {
	Dirs   map[string]bool   // entries of HostDirs that are folders
	Links  map[string]string // entries of HostDirs that are symbolic links, with their targets
	Masked []MaskedPath      // MaskedPaths present (globs expanded; links left out)
}

// MaskedPath is one present entry of MaskedPaths.
type MaskedPath struct {
	Path string
	Dir  bool
}

// LocalLayout reads the Layout of this machine.
func LocalLayout() *Layout {
	l := &Layout{Dirs: map[string]bool{}, Links: map[string]string{}, Masked: maskedExisting()}
	for _, d := range HostDirs {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			if t, err := os.Readlink(d); err == nil {
				l.Links[d] = t
			}
			continue
		}
		if fi.IsDir() {
			l.Dirs[d] = true
		}
	}
	return l
}

// Validate checks the policy's paths and network mode.
func (p Policy) Validate() error {
	if !filepath.IsAbs(p.SessionDir) {
		return fmt.Errorf("confine: session folder %q is not an absolute path", p.SessionDir)
	}
	if p.TmpDir != "" && !filepath.IsAbs(p.TmpDir) {
		return fmt.Errorf("confine: tmp folder %q is not an absolute path", p.TmpDir)
	}
	if p.WorkDir != "" && !filepath.IsAbs(p.WorkDir) {
		return fmt.Errorf("confine: working folder %q is not an absolute path", p.WorkDir)
	}
	if p.WorkDir != "" {
		if err := checkWorkDir(filepath.Clean(p.WorkDir), p.TmpDir != ""); err != nil {
			return err
		}
	}
	switch p.Network {
	case "", NetworkNone, NetworkHost:
	default:
		return fmt.Errorf("confine: network %q: want %s or %s", p.Network, NetworkNone, NetworkHost)
	}
	for _, m := range p.Mounts {
		if !filepath.IsAbs(m.Src) || !filepath.IsAbs(m.Dst) {
			return fmt.Errorf("confine: mount %s: paths must be absolute", m)
		}
	}
	return nil
}

// checkWorkDir refuses a working folder that cannot be mounted read-write
// at its own path without undoing the policy: the root, a system folder
// (HostDirs, which would become writable), the kernel's file systems, and
// /tmp itself when the session has a private /tmp.
func checkWorkDir(w string, privateTmp bool) error {
	if w == "/" {
		return fmt.Errorf("confine: working folder /: the whole file system cannot be made writable (give a project folder)")
	}
	for _, sys := range append([]string{"/proc", "/sys", "/dev", "/run"}, HostDirs...) {
		if within(w, sys) {
			return fmt.Errorf("confine: working folder %s is inside the system folder %s, which confined commands see read-only (give a project folder, or a --local-mount)", w, sys)
		}
	}
	if privateTmp && w == "/tmp" {
		return fmt.Errorf("confine: working folder /tmp: a confined session has a private /tmp (give a folder inside it, or a project folder)")
	}
	return nil
}

// Cmd is a bubblewrap command line and the descriptors it reads.
type Cmd struct {
	Args  []string   // the command line, bwrap's path first
	Files []*os.File // bwrap's descriptors 3, 4, ... (exec.Cmd.ExtraFiles): the caller's, then the seccomp filter's
	own   *os.File   // the filter's descriptor, closed by Close
}

// Apply makes c the command c runs: its Path, Args and ExtraFiles.
func (c *Cmd) Apply(cmd *exec.Cmd) {
	cmd.Path, cmd.Args, cmd.ExtraFiles = c.Args[0], c.Args, c.Files
	cmd.Err = nil
}

// Close closes the descriptor Args opened for the filter, once bwrap
// started (it has its own copy) or will not start. A Cmd not closed leaks
// that descriptor until the garbage collector finds it.
func (c *Cmd) Close() {
	if c != nil && c.own != nil {
		c.own.Close()
	}
}

// Args returns the bubblewrap command line (bwrap is its path) that runs
// argv under the policy, with the seccomp filter (Seccomp): bwrap reads it
// from a descriptor after the caller's extra files (which become 3, 4,
// ... as in exec.Cmd.ExtraFiles), so the caller must start it with
// Cmd.Files (Cmd.Apply does) and Close it after the start. With a Layout
// (a remote machine) the filter is read from SeccompFile there by a
// /bin/sh that execs bwrap, and no descriptor is passed; extra must then
// be empty. Without a Layout it reads this machine (which HostDirs exist,
// which MaskedPaths exist) to build the command line.
func (p Policy) Args(bwrap string, argv []string, extra ...*os.File) (*Cmd, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if len(argv) == 0 {
		return nil, errors.New("confine: empty command")
	}
	c := &Cmd{Files: append([]*os.File(nil), extra...)}
	var a []string
	if p.Layout != nil {
		if !filepath.IsAbs(p.SeccompFile) || len(extra) > 0 {
			return nil, errors.New("confine: a remote command line needs the seccomp filter's path there and takes no descriptors")
		}
		// The descriptor is opened by the shell that becomes bwrap (exec
		// keeps the process, so its pid is bwrap's).
		a = []string{"/bin/sh", "-c", `exec "$@" 3<"$0"`, p.SeccompFile, bwrap, "--seccomp", "3"}
	} else {
		f, err := seccompFile()
		if err != nil {
			return nil, err
		}
		c.own = f
		c.Files = append(c.Files, f)
		a = []string{bwrap, "--seccomp", strconv.Itoa(2 + len(c.Files))}
	}
	a = append(a, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
		"--cap-drop", "ALL",
	)
	if p.AsInit {
		a = append(a, "--as-pid-1")
	}
	if p.Network == NetworkHost {
		a = append(a, "--share-net")
	}
	l := p.Layout
	if l == nil {
		l = LocalLayout()
	}
	for _, d := range HostDirs {
		if t, ok := l.Links[d]; ok {
			a = append(a, "--symlink", t, d)
		} else if l.Dirs[d] {
			a = append(a, "--ro-bind", d, d)
		}
	}
	for _, m := range l.Masked {
		if m.Dir {
			a = append(a, "--tmpfs", m.Path, "--remount-ro", m.Path)
		} else {
			a = append(a, "--ro-bind", "/dev/null", m.Path)
		}
	}
	// The session's own POSIX message queues (its IPC namespace's) are
	// mounted, so that they can be seen and removed like files.
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--mqueue", "/dev/mqueue")
	// The namespace's init (bwrap's own, or the command with AsInit) is
	// dumpable: its memory is masked (a device node on a nodev mount:
	// opening it fails), so no command can rewrite the process every other
	// one descends from.
	a = append(a, "--ro-bind", "/dev/null", "/proc/1/mem", "--ro-bind", "/dev/null", "/proc/1/task/1/mem")
	if p.TmpDir != "" {
		a = append(a, "--bind", p.TmpDir, "/tmp")
	} else {
		a = append(a, "--tmpfs", "/tmp")
	}
	a = append(a, "--bind", p.SessionDir, p.SessionDir)
	if p.WorkDir != "" && p.WorkDir != p.SessionDir {
		a = append(a, "--bind", p.WorkDir, p.WorkDir)
	}
	for _, m := range p.Mounts {
		op := "--bind"
		if m.ReadOnly {
			op = "--ro-bind"
		}
		a = append(a, op, m.Src, m.Dst)
	}
	if f := p.SeccompFile; p.Layout != nil && (within(f, p.SessionDir) || p.WorkDir != "" && within(f, p.WorkDir)) {
		a = append(a, "--ro-bind", f, f)
	}
	env := append([]string(nil), p.Env...)
	sort.Strings(env)
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			c.Close()
			return nil, fmt.Errorf("confine: environment entry %q is not KEY=VALUE", kv)
		}
		a = append(a, "--setenv", k, v)
	}
	chdir := p.Chdir
	if chdir == "" {
		chdir = p.WorkDir
	}
	if chdir == "" {
		chdir = p.SessionDir
	}
	a = append(a, "--chdir", chdir, "--")
	c.Args = append(a, argv...)
	return c, nil
}

// maskedExisting expands MaskedPaths to the entries present on this host.
func maskedExisting() []MaskedPath {
	var out []MaskedPath
	for _, p := range MaskedPaths {
		paths := []string{p}
		if strings.ContainsAny(p, "*?[") {
			paths, _ = filepath.Glob(p)
		}
		for _, q := range paths {
			fi, err := os.Lstat(q)
			if err != nil || fi.Mode()&os.ModeSymlink != 0 {
				continue
			}
			out = append(out, MaskedPath{Path: q, Dir: fi.IsDir()})
		}
	}
	return out
}

// ShellLimits returns bash code setting the policy's limits as rlimits
// (`ulimit`), to run in the confined shell before any command; "" when no
// limit is set. Root is exempt from the process limit: a cgroup enforces it
// there (Cgroup).
func (l Limits) ShellLimits() string {
	var b []string
	if l.FileSizeBytes > 0 {
		b = append(b, "ulimit -f "+strconv.FormatInt((l.FileSizeBytes+1023)/1024, 10)) // bash: 1024-byte blocks
	}
	if l.CPUSeconds > 0 {
		b = append(b, "ulimit -t "+strconv.Itoa(l.CPUSeconds))
	}
	if l.MemoryBytes > 0 {
		b = append(b, "ulimit -v "+strconv.FormatInt((l.MemoryBytes+1023)/1024, 10))
	}
	if l.Processes > 0 {
		b = append(b, "ulimit -u "+strconv.Itoa(l.Processes))
	}
	if len(b) == 0 {
		return ""
	}
	return strings.Join(b, " 2>/dev/null; ") + " 2>/dev/null"
}
