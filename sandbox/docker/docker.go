package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// Labels put on every container; GC finds containers by them.
const (
	LabelRun     = "hermes-pipe.run"
	LabelRollout = "hermes-pipe.rollout"
)

// Defaults applied when the Config leaves a limit at zero.
const (
	DefaultPidsLimit   = 256
	DefaultMemoryBytes = 512 << 20
	DefaultCPUs        = 1.0
	DefaultNetwork     = "none"
)

// stateDir holds the shell state inside each container (env, cwd); the
// container is private to one session, so a fixed path is enough.
const stateDir = "/tmp/.hermes-sandbox"

// keepalive is the container's main process: it does nothing, works in
// busybox, and exits on TERM. Reaping orphans is left to the shell's wait.
const keepalive = "trap 'exit 0' TERM; while :; do sleep 3600 & wait; done"

// killAll kills every process of the container except PID 1 (the keepalive)
// and the calling shell: kill(-1) skips both. Sessions run one command at a
// time, so this is the command's process tree (and, for a long-lived shell,
// the shell and its background jobs).
const killAll = "kill -9 -1 2>/dev/null"

// Driver opens docker sessions through one client shared by all of them. It
// is safe for concurrent use.
type Driver struct {
	cli *client.Client
	cfg sandbox.Config
}

// Factory is the sandbox.Factory of the "docker" scheme.
func Factory(cfg sandbox.Config) (sandbox.Driver, error) { return New(cfg) }

// New creates a client for the daemon at cfg.Docker.Host or, when empty, at
// DOCKER_HOST / the default socket, as the docker CLI does. The API version
// is negotiated with the daemon on first use. New does not contact the
// daemon; call Ping to check it answers.
func New(cfg sandbox.Config) (*Driver, error) {
	if err := sandbox.CheckShellMode(cfg.ShellMode); err != nil {
		return nil, fmt.Errorf("docker sandbox: %w", err)
	}
	opts := []client.Opt{client.FromEnv}
	if cfg.Docker.Host != "" {
		opts = append(opts, client.WithHost(cfg.Docker.Host))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker sandbox: create client: %w", err)
	}
	return &Driver{cli: cli, cfg: cfg}, nil
}

// Client returns the driver's daemon client, for callers (pre-flight) that
// want to share its connection.
func (d *Driver) Client() *client.Client { return d.cli }

// Release closes the client's idle connections.
func (d *Driver) Release() error { return d.cli.Close() }

// Ping checks that the daemon answers; the error wraps sandbox.ErrUnavailable.
func (d *Driver) Ping(ctx context.Context) error {
	if _, err := d.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return fmt.Errorf("docker sandbox ping: %w", unavailable(ctx, err))
	}
	return nil
}

// unavailable wraps a daemon error with sandbox.ErrUnavailable, unless the
// caller's ctx ended (then ctx's error is what counts).
func unavailable(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err)
}

// hostConfig builds the container's limits from cfg with secure defaults:
// among them the seccomp profile (seccomp.go).
func (d *Driver) hostConfig() (*container.HostConfig, error) {
	c := d.cfg.Docker
	hc := &container.HostConfig{
		NetworkMode: container.NetworkMode(DefaultNetwork),
		CapAdd:      slices.Clone(c.CapAdd),
	}
	sec, err := seccompOpt()
	if err != nil {
		return nil, err
	}
	if c.Network != "" {
		hc.NetworkMode = container.NetworkMode(c.Network)
	}
	if !c.KeepCaps {
		hc.CapDrop = []string{"ALL"}
	}
	if !c.AllowNewPrivileges {
		hc.SecurityOpt = []string{"no-new-privileges"}
	}
	hc.SecurityOpt = append(hc.SecurityOpt, sec)
	pids := int64(DefaultPidsLimit)
	if c.PidsLimit != 0 {
		pids = c.PidsLimit // negative: unlimited
	}
	hc.PidsLimit = &pids
	switch {
	case c.MemoryBytes == 0:
		hc.Memory = DefaultMemoryBytes
	case c.MemoryBytes > 0:
		hc.Memory = c.MemoryBytes
	}
	if hc.Memory > 0 {
		hc.MemorySwap = hc.Memory // no swap beyond the limit
	}
	switch {
	case c.CPUs == 0:
		hc.NanoCPUs = int64(DefaultCPUs * 1e9)
	case c.CPUs > 0:
		hc.NanoCPUs = int64(c.CPUs * 1e9)
	}
	return hc, nil
}

// Open creates and starts the session's container. It blocks for the create
// and start calls (a few hundred milliseconds); on any failure the container
// is removed. Errors from the daemon wrap sandbox.ErrUnavailable.
func (d *Driver) Open(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	spec = sandbox.Resolve(spec, d.cfg)
	image := spec.Image
	if image == "" {
		image = d.cfg.Docker.DefaultImage
	}
	if image == "" {
		return nil, errors.New("docker sandbox open: no image (set the row's image or a default image)")
	}
	run := spec.RunID
	if run == "" {
		run = d.cfg.RunID
	}
	env := make([]string, 0, len(spec.Env))
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, k+"="+spec.Env[k])
	}
	hc, err := d.hostConfig()
	if err != nil {
		return nil, err
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	// The name is for people reading `docker ps`; GC finds containers by label.
	name := "hermes-" + sandbox.SafeName(run+"-"+spec.RolloutID) + "-" + hex.EncodeToString(suffix)
	created, err := d.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image:      image,
			Entrypoint: []string{"sh"},
			Cmd:        []string{"-c", keepalive},
			Env:        env,
			WorkingDir: spec.Cwd,
			User:       d.cfg.Docker.User,
			Labels:     map[string]string{LabelRun: run, LabelRollout: spec.RolloutID},
		},
		HostConfig: hc,
	})
	if err != nil {
		return nil, fmt.Errorf("docker sandbox open %s: create container: %w", image, unavailable(ctx, err))
	}
	s := &Session{d: d, id: created.ID, spec: spec}
	s.ScriptFiles = s.files()
	if d.cfg.ShellMode != sandbox.ShellFresh {
		s.sh = s.newShell()
	}
	if _, err := d.cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		_ = s.remove(ctx)
		return nil, fmt.Errorf("docker sandbox open %s: start container: %w", image, unavailable(ctx, err))
	}
	return s, nil
}

// GC force-removes every container labelled with runID ("" = every run of
// hermes-pipe), e.g. after the run was killed. It returns how many it
// removed. It is safe only when that run is no longer running. A create the
// killed run had already sent can still finish at the daemon while GC works,
// so GC lists again after removing and stops after a pass that finds
// nothing (at most three passes).
func (d *Driver) GC(ctx context.Context, runID string) (int, error) {
	label := LabelRun
	if runID != "" {
		label += "=" + runID
	}
	n := 0
	for pass := 0; pass < 3; pass++ {
		list, err := d.cli.ContainerList(ctx, client.ContainerListOptions{
			All:     true,
			Filters: make(client.Filters).Add("label", label),
		})
		if err != nil {
			return n, fmt.Errorf("docker sandbox gc: list containers: %w", unavailable(ctx, err))
		}
		if len(list.Items) == 0 {
			break
		}
		var errs []error
		for _, c := range list.Items {
			_, err := d.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			if err != nil && !cerrdefs.IsNotFound(err) {
				errs = append(errs, err)
				continue
			}
			n++
		}
		if err := errors.Join(errs...); err != nil {
			return n, fmt.Errorf("docker sandbox gc: remove containers: %w", unavailable(ctx, err))
		}
	}
	return n, nil
}

// Session is one container. Exec calls are serialized.
type Session struct {
	// ScriptFiles implements sandbox.Files through file scripts (see files.go).
	sandbox.ScriptFiles

	d    *Driver
	id   string
	spec sandbox.Spec

	// sh is the long-lived shell commands are written to; nil when every
	// command is its own exec (ShellMode "fresh").
	sh *sandbox.Shell

	mu sync.Mutex // serializes Exec

	state  sync.Mutex // guards closed and shell
	closed bool
	shell  *shellConn // the running long-lived shell's exec, closed by Close
}

// setShellConn records c as the running shell, unless the session was
// closed.
func (s *Session) setShellConn(c *shellConn) bool {
	s.state.Lock()
	defer s.state.Unlock()
	if s.closed {
		return false
	}
	s.shell = c
	return true
}

// Start implements sandbox.Starter: it starts the session's long-lived
// shell (its docker exec) ahead of the first command and blocks until it is
// ready; in ShellMode "fresh" it does nothing.
func (s *Session) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isClosed() {
		return fmt.Errorf("docker sandbox start: %w", sandbox.ErrClosed)
	}
	if s.sh == nil {
		return nil
	}
	if err := s.sh.Start(ctx); err != nil {
		return fmt.Errorf("docker sandbox start: %w", err)
	}
	return nil
}

// ContainerID returns the id of the session's container.
func (s *Session) ContainerID() string { return s.id }

// Exec runs cmd in the session's long-lived shell (see sandbox.Shell; the
// shell starts on the first Exec) or, in ShellMode "fresh", through its own
// docker exec, and blocks until it ends, times out or ctx is cancelled. A
// timeout kills the command's processes and returns exit 124 with the
// output so far; cancellation kills the shell too (fresh: the command's
// processes) and returns ctx's error. Daemon failures wrap
// sandbox.ErrUnavailable; an Exec during which Close was called returns an
// error wrapping sandbox.ErrClosed, whatever the daemon reported. Cost: a
// write and a read on the shell's connection (fresh: three API calls plus
// the process start).
func (s *Session) Exec(ctx context.Context, cmd sandbox.Cmd) (sandbox.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state.Lock()
	closed := s.closed
	s.state.Unlock()
	if closed {
		return sandbox.Result{}, fmt.Errorf("docker sandbox exec: %w", sandbox.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return sandbox.Result{}, fmt.Errorf("docker sandbox exec: %w", err)
	}
	timeout := cmd.Timeout
	if timeout <= 0 {
		timeout = s.spec.Timeout
	}
	if s.sh != nil {
		res, err := s.sh.Exec(ctx, cmd.Command, timeout)
		if s.isClosed() {
			return sandbox.Result{}, fmt.Errorf("docker sandbox exec: %w", sandbox.ErrClosed)
		}
		if err != nil {
			return sandbox.Result{}, fmt.Errorf("docker sandbox exec: %w", err)
		}
		return res, nil
	}
	var res sandbox.Result
	err := retryStart(ctx, "exec", func() (bool, string, error) {
		var err error
		res, err = s.execOnce(ctx, cmd.Command, timeout)
		return err != nil || !ociFailure(res), res.Stdout + res.Stderr, err
	})
	// Close removed the container under the command: whatever the daemon
	// reported for it (an exit by SIGKILL, a vanished exec), the command
	// did not end on its own.
	if s.isClosed() {
		return sandbox.Result{}, fmt.Errorf("docker sandbox exec: %w", sandbox.ErrClosed)
	}
	if err != nil {
		return sandbox.Result{}, err
	}
	return res, nil
}

// retryStart calls attempt until the container runtime starts its process.
// attempt reports started=false, with the runtime's message, when docker
// could not start it ("OCI runtime exec failed", exit 126): the command
// never ran, so trying again is safe. The usual cause is transient: right
// after a command hit the pids limit, the processes the epilogue killed
// still hold their pids until PID 1 reaps them, and on a loaded machine that
// can take longer than one short pause. It backs off (0.1 s doubling, about
// 6 s in all) before calling the driver failed (ErrUnavailable). attempt's
// own errors are returned as they are; op names the operation in the
// errors retryStart makes. Exec and the file operations share it.
func retryStart(ctx context.Context, op string, attempt func() (started bool, msg string, err error)) error {
	for wait := 100 * time.Millisecond; ; wait *= 2 {
		started, msg, err := attempt()
		if err != nil || started {
			return err
		}
		if wait > 3200*time.Millisecond {
			return fmt.Errorf("docker sandbox %s: %w: %s", op, sandbox.ErrUnavailable, strings.TrimSpace(msg))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("docker sandbox %s: %w", op, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// ociFailure reports a result that is docker's own failure to start the exec
// process (exit 126 with the runtime's message), not the command's.
func ociFailure(res sandbox.Result) bool {
	return res.ExitCode == 126 && strings.Contains(res.Stdout+res.Stderr, "OCI runtime exec failed")
}

// execOnce runs command once; see Exec.
func (s *Session) execOnce(ctx context.Context, command string, timeout time.Duration) (sandbox.Result, error) {
	start := time.Now()
	cli := s.d.cli
	created, err := cli.ExecCreate(ctx, s.id, client.ExecCreateOptions{
		User:         s.d.cfg.Docker.User,
		AttachStdout: true,
		AttachStderr: true,
		Cmd:          []string{"sh", "-c", sandbox.StateScript(stateDir, killAll), "sh", command},
	})
	if err != nil {
		return sandbox.Result{}, fmt.Errorf("docker sandbox exec: create: %w", unavailable(ctx, err))
	}
	att, err := cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return sandbox.Result{}, fmt.Errorf("docker sandbox exec: start: %w", unavailable(ctx, err))
	}
	defer att.Close()

	outCap, errCap := sandbox.NewCapture(s.spec.MaxOutput), sandbox.NewCapture(s.spec.MaxOutput)
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(outCap, errCap, att.Reader)
		copied <- err
	}()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var timedOut bool
	var ctxErr, copyErr error
	select {
	case copyErr = <-copied:
	case <-timer.C:
		timedOut = true
	case <-ctx.Done():
		ctxErr = ctx.Err()
	}
	if timedOut || ctxErr != nil {
		// Kill the command's tree from inside the container, then wait for the
		// stream to end; cut it if the daemon does not close it.
		kerr := s.killEverything(ctx)
		select {
		case <-copied:
		case <-time.After(5 * time.Second):
			att.Close()
			<-copied
		}
		if ctxErr != nil {
			return sandbox.Result{}, fmt.Errorf("docker sandbox exec: %w", ctxErr)
		}
		if kerr != nil {
			return sandbox.Result{}, fmt.Errorf("docker sandbox exec: kill timed-out command: %w", unavailable(ctx, kerr))
		}
	}
	if copyErr != nil && !errors.Is(copyErr, io.EOF) {
		return sandbox.Result{}, fmt.Errorf("docker sandbox exec: read output: %w", unavailable(ctx, copyErr))
	}

	res := sandbox.Result{TimedOut: timedOut}
	var to, te bool
	res.Stdout, to = outCap.Text()
	res.Stderr, te = errCap.Text()
	res.Truncated = to || te
	if timedOut {
		res.ExitCode = 124
	} else {
		code, err := s.exitCode(ctx, created.ID)
		if err != nil {
			return sandbox.Result{}, fmt.Errorf("docker sandbox exec: inspect: %w", unavailable(ctx, err))
		}
		res.ExitCode = code
		if code >= 128 {
			// Killed by a signal: the daemon may be stopping or the container
			// may have died; that is a driver failure, not the command's.
			if err := s.alive(ctx); err != nil {
				return sandbox.Result{}, fmt.Errorf("docker sandbox exec: %w", err)
			}
		}
	}
	res.Duration = time.Since(start)
	return res, nil
}

// exitCode waits for the exec to be reported finished and returns its code.
// The output stream can end a moment before the daemon records the exit; a
// busy daemon may take seconds, so it polls (5 ms doubling to 200 ms) for up
// to 30 s or until ctx ends.
func (s *Session) exitCode(ctx context.Context, execID string) (int, error) {
	deadline := time.Now().Add(30 * time.Second)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		in, err := s.d.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil {
			return 0, err
		}
		if !in.Running {
			return in.ExitCode, nil
		}
		if time.Now().After(deadline) {
			return 0, errors.New("exec still running 30 s after its output ended")
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// alive checks that the session's container still runs commands, after a
// command was killed by a signal: the daemon stopping or the container dying
// kills the command's processes too, and that is a driver failure, not the
// command's result. The daemon may still call a dying container running for
// a while, so rather than wait on its state, alive starts `true` in it: a
// container whose PID 1 is gone refuses new processes. A runtime failure to
// start the probe is retried with the backoff of Exec. It returns nil when
// the probe exits 0, else an error wrapping sandbox.ErrUnavailable. Cost: an
// inspect and one exec; Exec calls it only for commands killed by a signal.
func (s *Session) alive(ctx context.Context) error {
	in, err := s.d.cli.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{})
	if err != nil {
		return fmt.Errorf("inspect container: %w", unavailable(ctx, err))
	}
	if st := in.Container.State; st == nil || !st.Running {
		return fmt.Errorf("%w: container %.12s is not running", sandbox.ErrUnavailable, s.id)
	}
	for wait := 100 * time.Millisecond; ; wait *= 2 {
		out := sandbox.NewCapture(512)
		code, err := s.run(ctx, []string{"true"}, nil, out, out)
		if err != nil {
			return fmt.Errorf("probe container: %w", err)
		}
		text, _ := out.Text()
		if code == 0 {
			return nil
		}
		if !ociFailure(sandbox.Result{ExitCode: code, Stdout: text}) || wait > 3200*time.Millisecond {
			return fmt.Errorf("%w: container %.12s does not start processes (exit %d: %s)", sandbox.ErrUnavailable, s.id, code, strings.TrimSpace(text))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// killEverything kills every process in the container except PID 1 from an
// exec it waits for. When that exec cannot run (the runtime cannot start a
// process because the command took every pid, or it does not finish within
// 5 s, as under a fork bomb), the container is restarted instead: every
// process dies, the files stay. Both steps are bounded, also when ctx is
// cancelled; the error wraps sandbox.ErrUnavailable when neither worked.
func (s *Session) killEverything(ctx context.Context) error {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	started, err := s.runKill(kctx, []string{"sh", "-c", killAll})
	cancel()
	if err == nil && started {
		return nil
	}
	if rerr := s.restart(ctx); rerr != nil {
		return fmt.Errorf("kill: %v; %w", err, rerr)
	}
	return nil
}

// restart kills the container's PID 1, and with it every process, and
// starts it again; its files stay. It gets its own 30 s budget.
func (s *Session) restart(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	zero := 0
	if _, err := s.d.cli.ContainerRestart(rctx, s.id, client.ContainerRestartOptions{Signal: "KILL", Timeout: &zero}); err != nil {
		return fmt.Errorf("restart container: %w", unavailable(rctx, err))
	}
	return nil
}

// runKill runs a killing exec; started is false when the runtime could not
// start its process.
func (s *Session) runKill(ctx context.Context, argv []string) (started bool, err error) {
	out := sandbox.NewCapture(512)
	code, err := s.run(ctx, argv, nil, out, out)
	if err != nil {
		return false, err
	}
	text, _ := out.Text()
	return !ociFailure(sandbox.Result{ExitCode: code, Stdout: text}), nil
}

// Close closes the shell's connection and force-removes the container,
// which also ends a running Exec or file operation (it then returns an
// error wrapping sandbox.ErrClosed). It keeps working when ctx is already
// cancelled (the removal gets its own 30 s budget) and is safe to call more
// than once.
func (s *Session) Close(ctx context.Context) error {
	s.state.Lock()
	if s.closed {
		s.state.Unlock()
		return nil
	}
	s.closed = true
	shell := s.shell
	s.state.Unlock()
	if shell != nil {
		// A running Exec sees its shell's stream end and reports ErrClosed.
		shell.att.Close()
	}
	if err := s.remove(ctx); err != nil {
		return fmt.Errorf("docker sandbox close: %w", err)
	}
	return nil
}

// remove force-removes the container even when ctx is cancelled.
func (s *Session) remove(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, err := s.d.cli.ContainerRemove(rctx, s.id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return unavailable(rctx, err)
	}
	return nil
}
