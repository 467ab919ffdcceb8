package ssh

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
)

// Defaults used when the matching Options field is zero.
const (
	DefaultPort        = "22"
	DefaultDialTimeout = 10 * time.Second
	DefaultKeepAlive   = 30 * time.Second
	DefaultMaxSessions = 10 // sshd's own MaxSessions default
	DefaultRemoteTmp   = "/tmp"
)

// Isolation modes of Options.Isolation.
const (
	// IsolationBwrap runs every command and file operation inside
	// bubblewrap on the remote host (the default).
	IsolationBwrap = "bwrap"
	// IsolationNone runs them as the remote login, with everything it may
	// reach.
	IsolationNone = "none"
)

// Options configures a Driver. The zero value of every field means its
// default; New fills and checks them before any network traffic.
type Options struct {
	// Addr is the host, optionally with ":port" (default port 22).
	Addr string
	// User is the remote login; default the local user's name.
	User string
	// KeyFiles are unencrypted private keys to offer. When empty and no agent
	// is reachable, ~/.ssh/id_ed25519, id_ecdsa and id_rsa are tried if present.
	// Passphrase-protected keys are refused (load them into ssh-agent instead):
	// the driver never prompts.
	KeyFiles []string
	// NoAgent disables ssh-agent (SSH_AUTH_SOCK) even when it is set.
	NoAgent bool
	// KnownHosts are known_hosts files; default ~/.ssh/known_hosts. The first
	// one receives new keys when AcceptNewHostKeys is set.
	KnownHosts []string
	// AcceptNewHostKeys trusts a host that none of KnownHosts lists and
	// appends its key to the first file (OpenSSH's accept-new). A key that
	// differs from a listed one is refused regardless.
	AcceptNewHostKeys bool
	// DialTimeout bounds TCP connect plus handshake; default 10 s.
	DialTimeout time.Duration
	// KeepAlive is how often an idle connection is probed; a probe that gets
	// no answer within the same time drops the connection. Default 30 s;
	// negative disables probes.
	KeepAlive time.Duration
	// MaxSessions caps channels open at once on one connection; commands
	// beyond it wait. Keep it at or below the server's MaxSessions (default 10).
	// Long-lived shells (ShellMode) take at most half of the main
	// connection's, one each for their session's life; the shells of
	// sessions beyond that go to extra connections, MaxSessions each.
	MaxSessions int
	// RemoteTmp is the absolute remote folder that holds session folders;
	// default /tmp.
	RemoteTmp string
	// RunID labels session folders when a Spec has none, so GC finds them.
	RunID string
	// Timeout is the per-command timeout used when neither Cmd nor Spec sets
	// one; default sandbox.DefaultTimeout.
	Timeout time.Duration
	// MaxOutput is the bytes kept per stream when Spec does not set it;
	// default sandbox.DefaultMaxOutput.
	MaxOutput int

	// Isolation is IsolationBwrap ("" too): commands run confined by
	// bubblewrap on the remote host (read-only system folders with secrets
	// masked, the session folder writable, a private /tmp, PID, network,
	// IPC and UTS namespaces of their own, nothing of the login's home);
	// a host that cannot run it makes Open fail. IsolationNone runs them as
	// the login with everything in reach.
	Isolation string
	// Network is the network of confined commands: confine.NetworkNone
	// ("" too, a loopback of their own) or confine.NetworkHost.
	Network string
	// Limits are per-session limits of confined commands, set as rlimits
	// by the confined shell; zero fields mean unlimited.
	Limits confine.Limits
	// ShellMode is ShellPersistent ("" too): a session on a host with bash
	// keeps one long-lived shell on a channel of its own (see
	// MaxSessions); or ShellFresh: every command is a new shell on a new
	// channel, restoring the saved state.
	ShellMode string
}

// Shell modes of Options.ShellMode (sandbox.Config.ShellMode's).
const (
	ShellPersistent = sandbox.ShellPersistent
	ShellFresh      = sandbox.ShellFresh
)

// withDefaults returns o with defaults filled in, or an error naming the first
// bad field. It reads the local user and home folder, nothing remote.
func (o Options) withDefaults() (Options, error) {
	if strings.TrimSpace(o.Addr) == "" {
		return o, errors.New("ssh options: address is empty")
	}
	if _, _, err := net.SplitHostPort(o.Addr); err != nil {
		o.Addr = net.JoinHostPort(strings.Trim(o.Addr, "[]"), DefaultPort)
	}
	if _, _, err := net.SplitHostPort(o.Addr); err != nil {
		return o, fmt.Errorf("ssh options: address %q: %w", o.Addr, err)
	}
	home, _ := os.UserHomeDir()
	if o.User == "" {
		u, err := user.Current()
		if err != nil {
			return o, fmt.Errorf("ssh options: no user given and the local user is unknown: %w", err)
		}
		o.User = u.Username
	}
	if len(o.KnownHosts) == 0 {
		if home == "" {
			return o, errors.New("ssh options: no known_hosts file given and no home folder")
		}
		o.KnownHosts = []string{filepath.Join(home, ".ssh", "known_hosts")}
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = DefaultKeepAlive
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.RemoteTmp == "" {
		o.RemoteTmp = DefaultRemoteTmp
	}
	if !path.IsAbs(o.RemoteTmp) {
		return o, fmt.Errorf("ssh options: remote folder %q is not absolute", o.RemoteTmp)
	}
	o.RemoteTmp = path.Clean(o.RemoteTmp)
	switch o.Isolation {
	case "":
		o.Isolation = IsolationBwrap
	case IsolationBwrap, IsolationNone:
	default:
		return o, fmt.Errorf("ssh options: isolation %q: want %s or %s", o.Isolation, IsolationBwrap, IsolationNone)
	}
	switch o.ShellMode {
	case "":
		o.ShellMode = ShellPersistent
	case ShellPersistent, ShellFresh:
	default:
		return o, fmt.Errorf("ssh options: shell mode %q: want %s or %s", o.ShellMode, ShellPersistent, ShellFresh)
	}
	switch o.Network {
	case "", confine.NetworkNone, confine.NetworkHost:
	default:
		return o, fmt.Errorf("ssh options: network %q: want %s or %s", o.Network, confine.NetworkNone, confine.NetworkHost)
	}
	if len(o.KeyFiles) == 0 && (o.NoAgent || os.Getenv("SSH_AUTH_SOCK") == "") && home != "" {
		for _, name := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			p := filepath.Join(home, ".ssh", name)
			if _, err := os.Stat(p); err == nil {
				o.KeyFiles = append(o.KeyFiles, p)
			}
		}
	}
	return o, nil
}
