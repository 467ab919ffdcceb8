package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// ErrClosed is returned (wrapped) by Exec on a session that was closed.
var ErrClosed = errors.New("sandbox session closed")

// Config carries the options of every driver; each driver reads its own part
// and ignores the rest. The zero value means secure defaults everywhere.
type Config struct {
	RunID          string        // labels what a run creates, for gc
	DefaultTimeout time.Duration // per-command timeout when neither Cmd nor Spec sets one; 0 = DefaultTimeout
	MaxOutput      int           // bytes kept per stream when Spec does not say; 0 = DefaultMaxOutput

	// ShellMode is ShellPersistent ("" too): one long-lived shell per
	// session (see Shell); or ShellFresh: one shell per command restoring
	// the saved working folder and exported variables. Every driver with a
	// shell honours it.
	ShellMode string

	Local  LocalConfig
	Docker DockerConfig
	SSH    SSHConfig
}

// Shell modes of Config.ShellMode.
const (
	ShellPersistent = "persistent"
	ShellFresh      = "fresh"
)

// CheckShellMode refuses a shell mode other than "", ShellPersistent and
// ShellFresh.
func CheckShellMode(mode string) error {
	switch mode {
	case "", ShellPersistent, ShellFresh:
		return nil
	}
	return fmt.Errorf("shell mode %q: want %s or %s", mode, ShellPersistent, ShellFresh)
}

// DefaultTimeout is the per-command timeout when nothing else sets one.
const DefaultTimeout = 180 * time.Second

// LocalConfig holds options of the local driver.
type LocalConfig struct {
	BaseDir string   // parent of the per-session private folders; "" = os.TempDir()
	Shell   string   // shell binary; "" = bash found on PATH
	PassEnv []string // extra parent variable names passed through (secret-looking names are still refused)

	// Isolation is "bwrap" ("" too): every command runs confined by
	// bubblewrap (read-only host system, the session folder writable, no
	// network, a PID namespace per session); or "none": commands run as the
	// invoking user with the whole machine in reach.
	Isolation string
	Mounts    []string    // extra mounts for confined commands, each SRC:DST[:ro]
	Network   string      // "none" ("" too) or "host", for confined commands
	Limits    LocalLimits // per-session limits of confined commands

	// Pool bounds the closed confined sessions kept to serve later rows
	// with the same Spec (and no Cwd of their own) instead of starting a
	// new sandbox: 0 = as many as were open at once (so at most the
	// run's workers), negative = none. A session is emptied before it is
	// reused: nothing of the previous row is left (processes, files in its
	// folder, /tmp and the sandbox's own file systems, environment,
	// working folder, shell functions and aliases). Release closes them.
	Pool int
}

// LocalLimits are resource limits of a confined local session; zero means
// unlimited.
type LocalLimits struct {
	Processes int // processes of the session (root is exempt where only rlimits apply)
	// MemoryBytes is the session's memory (its cgroup: processes, and the
	// tmpfs pages it writes, DiskBytes included); where no cgroup memory
	// controller is usable, the address space of each process (rlimit).
	MemoryBytes   int64
	FileSizeBytes int64 // largest file a command may write
	CPUSeconds    int   // CPU time per process
	// DiskBytes is the size of the session folder (home, /tmp, the shell's
	// state): a tmpfs of that size mounted at the folder, so a command that
	// fills it gets ENOSPC and nothing else runs short. Its pages count
	// against MemoryBytes. Mounting needs root (CAP_SYS_ADMIN); elsewhere
	// the folder stays on the base folder's disk (Driver.Ceilings says so).
	DiskBytes int64
	// CPUWeight is the session's cgroup CPU weight (cgroup v2 cpu.weight,
	// 1..10000, 100 being a plain process's; cpu.shares = weight×1024/100
	// on v1): under contention each busy session gets CPU in proportion to
	// it, however many processes it runs.
	CPUWeight int
}

// DockerConfig holds options of the docker driver. Zero values are the
// secure defaults: all capabilities dropped, no-new-privileges, 256 pids,
// 512 MiB memory, 1 CPU, no network.
type DockerConfig struct {
	Host               string   // daemon address; "" = DOCKER_HOST or the default socket, as the docker CLI
	DefaultImage       string   // image when a Spec names none
	CapAdd             []string // capabilities added back after dropping all
	KeepCaps           bool     // do not drop the default capabilities
	AllowNewPrivileges bool     // do not set no-new-privileges
	PidsLimit          int64    // 0 = 256, negative = unlimited
	MemoryBytes        int64    // 0 = 512 MiB, negative = unlimited
	CPUs               float64  // 0 = 1, negative = unlimited
	Network            string   // "" = "none"
	User               string   // user inside the container; "" = the image's
}

// SSHConfig holds options of the ssh driver.
type SSHConfig struct {
	Host           string // host or host:port
	User           string
	KeyFile        string // private key; "" = agent only
	KnownHosts     string // known_hosts file; "" = ~/.ssh/known_hosts
	AcceptNewHosts bool   // add unknown host keys to KnownHosts instead of refusing
	BaseDir        string // remote parent of the per-session folders; "" = /tmp

	// Isolation is "bwrap" ("" too): commands run confined by bubblewrap
	// on the remote host; or "none": they run as the login with everything
	// it may reach.
	Isolation string
	Network   string      // "none" ("" too) or "host", for confined commands
	Limits    LocalLimits // per-session limits of confined commands (rlimits)
}

// Factory builds a driver from a Config. cmd registers one per scheme.
type Factory func(cfg Config) (Driver, error)

// Collector is implemented by drivers that can find and remove what a killed
// run left behind (containers, folders). runID "" means every run.
type Collector interface {
	GC(ctx context.Context, runID string) (removed int, err error)
}

// Releaser is implemented by drivers holding process-wide resources (a daemon
// client, an ssh connection) that are released when the run ends.
type Releaser interface {
	Release() error
}

// ImageChecker is implemented by drivers that run container images
// (docker): CheckImages settles each image (present, or pulled) and returns
// the unavailable ones with their reason, nothing for usable ones. Modes call
// it once before any model call.
type ImageChecker interface {
	CheckImages(ctx context.Context, images []string) map[string]error
}

// Preflighter is implemented by drivers that can check themselves before a
// run (ssh: host key, login, remote folder), so a broken setup fails before
// any token is spent.
type Preflighter interface {
	Preflight(ctx context.Context) error
}

// Registry maps schemes ("local", "docker", "ssh", "fake") to factories.
// Drivers are added explicitly by cmd; there is no init() registration. A
// Registry is safe for concurrent use.
type Registry struct {
	mu sync.RWMutex
	m  map[string]Factory
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{m: map[string]Factory{}} }

// Register adds a factory under scheme. It panics on an empty scheme, a nil
// factory or a scheme registered twice: those are programming errors.
func (r *Registry) Register(scheme string, f Factory) {
	if scheme == "" || f == nil {
		panic("sandbox: Register with empty scheme or nil factory")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.m[scheme]; dup {
		panic("sandbox: Register called twice for scheme " + scheme)
	}
	r.m[scheme] = f
}

// Schemes lists the registered schemes, sorted.
func (r *Registry) Schemes() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.m))
	for s := range r.m {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Open builds the driver registered under scheme. It calls the factory, which
// may contact a daemon or host; an unknown scheme is an error naming the
// known ones.
func (r *Registry) Open(scheme string, cfg Config) (Driver, error) {
	r.mu.RLock()
	f, ok := r.m[scheme]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("open sandbox %q: unknown driver (known: %v)", scheme, r.Schemes())
	}
	d, err := f(cfg)
	if err != nil {
		return nil, fmt.Errorf("open sandbox %q: %w", scheme, err)
	}
	return d, nil
}

// Resolve fills a Spec's zero Timeout and MaxOutput from cfg and the package
// defaults. Drivers call it in Open.
func Resolve(spec Spec, cfg Config) Spec {
	if spec.Timeout <= 0 {
		spec.Timeout = cfg.DefaultTimeout
	}
	if spec.Timeout <= 0 {
		spec.Timeout = DefaultTimeout
	}
	if spec.MaxOutput <= 0 {
		spec.MaxOutput = cfg.MaxOutput
	}
	if spec.MaxOutput <= 0 {
		spec.MaxOutput = DefaultMaxOutput
	}
	return spec
}

// GC removes what runID ("" = every run) left behind in driver d, for
// `hermes-pipe sandbox gc`. Drivers without leftovers to collect (fake,
// ssh without a base folder) return an error saying so.
func GC(ctx context.Context, d Driver, runID string) (int, error) {
	c, ok := d.(Collector)
	if !ok {
		return 0, fmt.Errorf("sandbox gc: driver %T keeps nothing to collect", d)
	}
	return c.GC(ctx, runID)
}

// SafeName keeps the letters, digits, '-' and '_' of an id used in a file or
// folder name (others become '_') and cuts it to 64 bytes. Drivers name
// their per-session folders with it so gc can find a run's leftovers.
func SafeName(s string) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}
