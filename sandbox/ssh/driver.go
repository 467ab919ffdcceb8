package ssh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
)

// ErrAuth means the server refused every offered key. It is a configuration
// error, not sandbox.ErrUnavailable.
var ErrAuth = errors.New("ssh authentication failed")

// Driver opens sandbox sessions on one remote host. It keeps one SSH
// connection, dialled on first use and shared by all sessions, and is safe for
// concurrent use. Close it when the run ends.
type Driver struct {
	opts    Options
	signers []gossh.Signer // from KeyFiles, loaded once by New
	keys    *hostKeys
	slots   chan struct{} // one token per channel allowed open at once

	mu     sync.Mutex // guards client and closed; held while dialling
	client *gossh.Client
	closed bool
	dials  atomic.Int64 // successful dials, for tests and logs

	killGrace time.Duration // killGrace; tests shorten it
	bwrapName string        // bubblewrap's name on the remote PATH; tests change it

	shellMu sync.Mutex // guards shells
	shells  int        // channels held by long-lived shells (each also holds a slot)

	hmu     sync.Mutex  // guards host and hostErr; held while probing
	host    *remoteHost // what confinement needs of the host, once probed
	hostErr error       // why the host cannot confine commands, once probed
}

var (
	_ sandbox.Driver      = (*Driver)(nil)
	_ sandbox.Releaser    = (*Driver)(nil)
	_ sandbox.Collector   = (*Driver)(nil)
	_ sandbox.Preflighter = (*Driver)(nil)
)

// Factory is the sandbox.Factory of the "ssh" scheme: it maps cfg.SSH (and the
// run-wide RunID, DefaultTimeout and MaxOutput) onto Options and calls New.
func Factory(cfg sandbox.Config) (sandbox.Driver, error) {
	o := Options{
		Addr:              cfg.SSH.Host,
		User:              cfg.SSH.User,
		AcceptNewHostKeys: cfg.SSH.AcceptNewHosts,
		RemoteTmp:         cfg.SSH.BaseDir,
		RunID:             cfg.RunID,
		Timeout:           cfg.DefaultTimeout,
		MaxOutput:         cfg.MaxOutput,
		Isolation:         cfg.SSH.Isolation,
		Network:           cfg.SSH.Network,
		ShellMode:         cfg.ShellMode,
		Limits: confine.Limits{Processes: cfg.SSH.Limits.Processes, MemoryBytes: cfg.SSH.Limits.MemoryBytes,
			FileSizeBytes: cfg.SSH.Limits.FileSizeBytes, CPUSeconds: cfg.SSH.Limits.CPUSeconds},
	}
	if cfg.SSH.KeyFile != "" {
		o.KeyFiles = []string{cfg.SSH.KeyFile}
	}
	if cfg.SSH.KnownHosts != "" {
		o.KnownHosts = []string{cfg.SSH.KnownHosts}
	}
	return New(o)
}

// New checks opts, loads the key files and returns a Driver. It does not
// connect; the first Open (or Preflight) does. A passphrase-protected key is
// an error, since the driver never prompts.
func New(opts Options) (*Driver, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &Driver{
		opts:  o,
		keys:  &hostKeys{files: o.KnownHosts, acceptNew: o.AcceptNewHostKeys},
		slots: make(chan struct{}, o.MaxSessions),

		killGrace: killGrace,
		bwrapName: "bwrap",
	}
	for _, f := range o.KeyFiles {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("ssh key %s: %w", f, err)
		}
		s, err := gossh.ParsePrivateKey(pem)
		var pm *gossh.PassphraseMissingError
		if errors.As(err, &pm) {
			return nil, fmt.Errorf("ssh key %s is passphrase-protected: load it into ssh-agent instead", f)
		}
		if err != nil {
			return nil, fmt.Errorf("ssh key %s: %w", f, err)
		}
		d.signers = append(d.signers, s)
	}
	if len(d.signers) == 0 && (o.NoAgent || os.Getenv("SSH_AUTH_SOCK") == "") {
		return nil, errors.New("ssh options: no key file and no ssh-agent (SSH_AUTH_SOCK) to authenticate with")
	}
	return d, nil
}

// Preflight connects (if not yet connected) and checks that the host is
// reachable, its key trusted, the login accepted and the remote folder
// writable, and, unless Isolation is none, that the host can confine
// commands: one dial plus one channel (three the first time confinement is
// checked). Callers run it before a batch so configuration errors surface
// before any work is spent.
func (d *Driver) Preflight(ctx context.Context) error {
	if _, err := d.conn(ctx); err != nil {
		return fmt.Errorf("ssh preflight %s: %w", d.opts.Addr, err)
	}
	tmp := sandbox.ShellQuote(d.opts.RemoteTmp)
	check := `mkdir -p ` + tmp + ` && test -w ` + tmp + ` || { echo "remote folder "` + tmp + `" is not writable" >&2; exit 1; }`
	if _, err := d.run(ctx, check, nil); err != nil {
		return fmt.Errorf("ssh preflight %s: %w", d.opts.Addr, err)
	}
	if d.opts.Isolation != IsolationNone {
		if _, err := d.remote(ctx); err != nil {
			return fmt.Errorf("ssh preflight: %w", err)
		}
	}
	return nil
}

// Release drops the connection (sandbox.Releaser); cmd calls it when the run
// ends. Sessions still open fail from then on and their remote folders stay
// behind for GC, so close sessions first. It is safe to call more than once.
func (d *Driver) Release() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if d.client != nil {
		err := d.client.Close()
		d.client = nil
		if err != nil && !errors.Is(err, net.ErrClosed) {
			return fmt.Errorf("ssh release %s: %w", d.opts.Addr, err)
		}
	}
	return nil
}

// conn returns the live client, dialling when there is none. Dial errors
// that a retry may cure wrap sandbox.ErrUnavailable; host key and
// authentication errors do not.
func (d *Driver) conn(ctx context.Context) (*gossh.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("driver closed: %w", sandbox.ErrUnavailable)
	}
	if d.client != nil {
		return d.client, nil
	}
	c, err := d.dial(ctx)
	if err != nil {
		return nil, err
	}
	d.client = c
	d.dials.Add(1)
	go d.watch(c)
	return c, nil
}

// forget drops c if it is still the current client, so the next conn dials.
func (d *Driver) forget(c *gossh.Client) {
	d.mu.Lock()
	if d.client == c {
		d.client = nil
	}
	d.mu.Unlock()
	_ = c.Close()
}

// watch forgets c as soon as its transport ends, and probes it every
// KeepAlive so a silently dead peer is noticed. It runs for c's lifetime.
func (d *Driver) watch(c *gossh.Client) {
	done := make(chan struct{})
	go func() {
		_ = c.Wait()
		close(done)
	}()
	var tick <-chan time.Time
	if d.opts.KeepAlive > 0 {
		t := time.NewTicker(d.opts.KeepAlive)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-done:
			d.forget(c)
			return
		case <-tick:
			replied := make(chan error, 1)
			go func() {
				_, _, err := c.SendRequest("keepalive@openssh.com", true, nil)
				replied <- err
			}()
			select {
			case err := <-replied:
				if err != nil {
					d.forget(c)
					return
				}
			case <-done:
				d.forget(c)
				return
			case <-time.After(d.opts.KeepAlive):
				d.forget(c)
				return
			}
		}
	}
}

// dial opens and authenticates a new connection within DialTimeout.
func (d *Driver) dial(ctx context.Context) (*gossh.Client, error) {
	check, algos, err := d.keys.callback(d.opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("ssh dial %s: %w", d.opts.Addr, err)
	}
	auth := gossh.PublicKeys(d.signers...)
	if !d.opts.NoAgent {
		if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" {
			if ac, err := net.Dial("unix", sock); err == nil {
				defer ac.Close()
				ag := agent.NewClient(ac)
				auth = gossh.PublicKeysCallback(func() ([]gossh.Signer, error) {
					fromAgent, err := ag.Signers()
					if err != nil {
						return d.signers, nil // agent broken: keys only
					}
					return append(append([]gossh.Signer(nil), d.signers...), fromAgent...), nil
				})
			}
		}
	}
	cfg := &gossh.ClientConfig{
		User:              d.opts.User,
		Auth:              []gossh.AuthMethod{auth},
		HostKeyCallback:   check,
		HostKeyAlgorithms: algos,
		Timeout:           d.opts.DialTimeout,
	}

	ctx, cancel := context.WithTimeout(ctx, d.opts.DialTimeout)
	defer cancel()
	var nd net.Dialer
	tcp, err := nd.DialContext(ctx, "tcp", d.opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("ssh dial %s: %w: %w", d.opts.Addr, sandbox.ErrUnavailable, err)
	}
	// The handshake has no context; a deadline and a watcher bound it.
	if dl, ok := ctx.Deadline(); ok {
		_ = tcp.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = tcp.Close() })
	cc, chans, reqs, err := gossh.NewClientConn(tcp, d.opts.Addr, cfg)
	stopped := stop()
	if err != nil {
		_ = tcp.Close()
		switch {
		case errors.Is(err, ErrHostKeyChanged), errors.Is(err, ErrHostKeyUnknown):
			return nil, fmt.Errorf("ssh dial %s: %w", d.opts.Addr, err)
		case strings.Contains(err.Error(), "unable to authenticate"):
			return nil, fmt.Errorf("ssh dial %s as %s: %w: %w", d.opts.Addr, d.opts.User, ErrAuth, err)
		default:
			return nil, fmt.Errorf("ssh handshake %s: %w: %w", d.opts.Addr, sandbox.ErrUnavailable, err)
		}
	}
	if !stopped {
		_ = cc.Close()
		return nil, fmt.Errorf("ssh handshake %s: %w: %w", d.opts.Addr, sandbox.ErrUnavailable, ctx.Err())
	}
	_ = tcp.SetDeadline(time.Time{})
	return gossh.NewClient(cc, chans, reqs), nil
}

// channel opens a new SSH session channel, waiting for a free slot. When the
// connection turns out to be dead it redials once; the caller must call
// release when done with the channel.
func (d *Driver) channel(ctx context.Context) (*gossh.Session, error) {
	select {
	case d.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for an ssh channel: %w", ctx.Err())
	}
	s, err := d.openChannel(ctx)
	if err != nil {
		<-d.slots
		return nil, err
	}
	return s, nil
}

// release frees the slot taken by channel.
func (d *Driver) release() { <-d.slots }

// reserveShell takes a slot for a long-lived shell, for the life of its
// session, if shells hold fewer than half the slots and one is free now;
// false means the session runs fresh shells instead. releaseShell gives it
// back.
func (d *Driver) reserveShell() bool {
	d.shellMu.Lock()
	defer d.shellMu.Unlock()
	if d.shells >= d.opts.MaxSessions/2 {
		return false
	}
	select {
	case d.slots <- struct{}{}:
		d.shells++
		return true
	default:
		return false
	}
}

func (d *Driver) releaseShell() {
	d.shellMu.Lock()
	d.shells--
	d.shellMu.Unlock()
	<-d.slots
}

func (d *Driver) openChannel(ctx context.Context) (*gossh.Session, error) {
	_, s, err := d.openChannelOn(ctx)
	return s, err
}

// openChannelOn is openChannel that also returns the connection the channel
// runs on.
func (d *Driver) openChannelOn(ctx context.Context) (*gossh.Client, *gossh.Session, error) {
	c, err := d.conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	s, err := c.NewSession()
	if err == nil {
		return c, s, nil
	}
	var oce *gossh.OpenChannelError
	if errors.As(err, &oce) {
		// The connection is fine; the server refused this channel.
		return nil, nil, fmt.Errorf("ssh open channel on %s: %w: %w", d.opts.Addr, sandbox.ErrUnavailable, err)
	}
	// The transport is gone: reconnect once.
	d.forget(c)
	c, err = d.conn(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("ssh reconnect: %w", err)
	}
	s, err = c.NewSession()
	if err != nil {
		return nil, nil, fmt.Errorf("ssh open channel on %s after reconnect: %w: %w", d.opts.Addr, sandbox.ErrUnavailable, err)
	}
	return c, s, nil
}
