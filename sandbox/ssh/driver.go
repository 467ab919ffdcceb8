package ssh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
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

	shellMu   sync.Mutex // guards shells and lanes
	shells    int        // channels of the connection held by long-lived shells (each also holds a slot)
	lanes     []*lane    // extra connections for long-lived shells, kept until Release
	laneDials atomic.Int64

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
	d.closed = true
	var err error
	if d.client != nil {
		err = d.client.Close()
		d.client = nil
	}
	d.mu.Unlock()
	d.shellMu.Lock()
	lanes := slices.Clone(d.lanes)
	d.shellMu.Unlock()
	for _, l := range lanes {
		l.mu.Lock()
		if l.client != nil {
			_ = l.client.Close()
			l.client = nil
		}
		l.mu.Unlock()
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("ssh release %s: %w", d.opts.Addr, err)
	}
	return nil
}

// conn returns the live client, dialling when there is none. Dial errors
// that a retry may cure wrap sandbox.ErrUnavailable; host key and
// authentication errors do not.
func (d *Driver) conn(ctx context.Context) (*gossh.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cached(ctx, d.closed, &d.client, &d.dials)
}

// cached returns *slot, dialling a watched client into it when it is nil;
// count counts the dials. The caller holds the lock that guards slot.
func (d *Driver) cached(ctx context.Context, closed bool, slot **gossh.Client, count *atomic.Int64) (*gossh.Client, error) {
	if closed {
		return nil, fmt.Errorf("driver closed: %w", sandbox.ErrUnavailable)
	}
	if *slot != nil {
		return *slot, nil
	}
	c, err := d.dial(ctx)
	if err != nil {
		return nil, err
	}
	*slot = c
	count.Add(1)
	go d.watch(c)
	return c, nil
}

// forget drops c if it is still the current client (or a lane's), so the
// next conn (or laneConn) dials.
func (d *Driver) forget(c *gossh.Client) {
	d.mu.Lock()
	if d.client == c {
		d.client = nil
	}
	d.mu.Unlock()
	d.shellMu.Lock()
	lanes := slices.Clone(d.lanes)
	d.shellMu.Unlock()
	for _, l := range lanes {
		l.mu.Lock()
		if l.client == c {
			l.client = nil
		}
		l.mu.Unlock()
	}
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

// lane is an extra connection to the host that carries long-lived shells
// only, at most MaxSessions of them: once the shells' share of the main
// connection is taken, the next sessions' shells go to a lane with room, or
// to a new one. A lane is dialled at its first shell, redialled when its
// connection died, and kept (idle too) until Release.
type lane struct {
	mu     sync.Mutex // guards client; held while dialling
	client *gossh.Client
	shells int // shells reserved on it; guarded by Driver.shellMu
}

// reserveShell reserves a channel for a long-lived shell, for the life of
// its session: one of the main connection's slots while shells hold fewer
// than half of them and one is free now (l nil), else a place on a lane
// (dialled when the shell starts). releaseShell gives it back.
func (d *Driver) reserveShell() (l *lane) {
	d.shellMu.Lock()
	defer d.shellMu.Unlock()
	if d.shells < d.opts.MaxSessions/2 {
		select {
		case d.slots <- struct{}{}:
			d.shells++
			return nil
		default:
		}
	}
	for _, l := range d.lanes {
		if l.shells < d.opts.MaxSessions {
			l.shells++
			return l
		}
	}
	l = &lane{shells: 1}
	d.lanes = append(d.lanes, l)
	return l
}

// releaseShell gives back what reserveShell returned.
func (d *Driver) releaseShell(l *lane) {
	d.shellMu.Lock()
	defer d.shellMu.Unlock()
	if l != nil {
		l.shells--
		return
	}
	d.shells--
	<-d.slots
}

// laneConn returns l's live client, dialling when it has none.
func (d *Driver) laneConn(ctx context.Context, l *lane) (*gossh.Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	return d.cached(ctx, closed, &l.client, &d.laneDials)
}

// shellChannel opens a long-lived shell's channel on the connection its
// session reserved (l, nil for the main one), redialling once as
// openChannelOn does.
func (d *Driver) shellChannel(ctx context.Context, l *lane) (*gossh.Client, *gossh.Session, error) {
	if l == nil {
		return d.openChannelOn(ctx)
	}
	return d.openOn(ctx, func(ctx context.Context) (*gossh.Client, error) { return d.laneConn(ctx, l) })
}

func (d *Driver) openChannel(ctx context.Context) (*gossh.Session, error) {
	_, s, err := d.openChannelOn(ctx)
	return s, err
}

// openChannelOn is openChannel that also returns the connection the channel
// runs on.
func (d *Driver) openChannelOn(ctx context.Context) (*gossh.Client, *gossh.Session, error) {
	return d.openOn(ctx, d.conn)
}

// openRetries bounds how often retryOpen tries again, 10 ms apart and more.
const openRetries = 12

// retryOpen opens a channel on c after the server refused one: a few
// times, with growing pauses (about 3 s in all), while the server refuses
// it and ctx lasts.
func (d *Driver) retryOpen(ctx context.Context, c *gossh.Client) (*gossh.Session, error) {
	var err error
	pause := 10 * time.Millisecond
	for range openRetries {
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		var s *gossh.Session
		if s, err = c.NewSession(); err == nil {
			return s, nil
		}
		var oce *gossh.OpenChannelError
		if !errors.As(err, &oce) {
			return nil, err
		}
		pause = min(2*pause, 400*time.Millisecond)
	}
	return nil, err
}

// openOn opens a channel on the client conn returns, redialling once (conn
// dials after forget) when the transport turns out to be gone.
func (d *Driver) openOn(ctx context.Context, conn func(context.Context) (*gossh.Client, error)) (*gossh.Client, *gossh.Session, error) {
	c, err := conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	s, err := c.NewSession()
	if err == nil {
		return c, s, nil
	}
	var oce *gossh.OpenChannelError
	if errors.As(err, &oce) {
		// The connection is fine; the server refused this channel. The
		// driver never has more than MaxSessions channels open, but
		// OpenSSH frees a closed channel's session only a moment after
		// the client's close arrives: a channel opened right after one
		// closed on a connection at the server's MaxSessions is refused.
		// Retry, briefly, before calling it a refusal.
		if s, err = d.retryOpen(ctx, c); err == nil {
			return c, s, nil
		}
		return nil, nil, fmt.Errorf("ssh open channel on %s: %w: %w", d.opts.Addr, sandbox.ErrUnavailable, err)
	}
	// The transport is gone: reconnect once.
	d.forget(c)
	c, err = conn(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("ssh reconnect: %w", err)
	}
	s, err = c.NewSession()
	if err != nil {
		return nil, nil, fmt.Errorf("ssh open channel on %s after reconnect: %w: %w", d.opts.Addr, sandbox.ErrUnavailable, err)
	}
	return c, s, nil
}
