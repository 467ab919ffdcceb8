package ssh

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
)

// folderPrefix starts the name of every remote session folder; the run id
// follows, so GC finds a run's folders by name.
const folderPrefix = "hermes-ssh-"

// killGrace is how long Exec waits for the remote side to end a command after
// asking it to kill the process group, before closing the channel (and again
// after closing it).
const killGrace = 3 * time.Second

// argLimit is the longest command passed as an argument; longer ones are
// uploaded to the session folder first (Linux caps one argument at 128 KiB).
const argLimit = 96 << 10

// killMarked returns shell code killing every process whose environment has
// sandbox.MarkerVar equal to value (exact) or starting with it. grep -z reads the
// NUL-separated records of /proc/<pid>/environ, where ^ and $ anchor one
// variable; without /proc (not Linux) it matches nothing. The shell running
// it must not carry the marker itself.
func killMarked(exact bool, value string) string {
	pattern := "^" + sandbox.MarkerVar + "=" + regexp.QuoteMeta(value)
	if exact {
		pattern += "$"
	}
	return "for f in $(grep -lsz " + sandbox.ShellQuote(pattern) + ` /proc/[0-9]*/environ 2>/dev/null); do ` +
		`f=${f#/proc/}; kill -9 "${f%/environ}" 2>/dev/null; done`
}

// execScript returns the per-command launcher of a session; $1 is the
// command. sshd starts every command line in a new session, so the shell
// running the launcher leads its own process group, and everything the
// command starts (background jobs included) belongs to it unless it calls
// setsid. The launcher first forks a watcher that waits on the channel's
// stdin, then runs the command in the shell itself through the
// state-restoring script (so the shell's exit code is the command's). A "k"
// line on stdin (the client's timeout or cancellation) makes the watcher kill
// the session's marked processes, which finds children that escaped the
// group, and then the whole group, shell included; EOF, which sshd delivers
// when the shell exits or the channel or connection closes, makes it kill
// the group, i.e. what the command left running. The watcher is forked from
// a subshell that exits at once, so it is no job of the command's shell
// (`wait` and `jobs` do not see it). Costs two forks beyond the shell sshd
// starts anyway.
func execScript(state, marker string) string {
	return `exec 3<&0
( { read -r x <&3 || x=; if [ "$x" = k ]; then ` + killMarked(true, marker) + `; fi; kill -9 0; } </dev/null >/dev/null 2>&1 & )
exec 3<&- </dev/null
` + sandbox.StateScript(state, "")
}

// Open creates the session's remote folder (work, tmp and state inside, plus
// home when confined, all mode 0700) and its scripts in one SSH channel:
// one round trip plus a few fork/execs on the remote. Spec.Cwd, when set,
// must be an existing remote folder, and so must Spec.ReadOnly's when
// confined. Unconfined, the command environment is the remote login's, plus
// TMPDIR pointing into the session folder, Spec.Env (which may override
// TMPDIR) and the HERMES_SANDBOX marker; confined, it is PATH, LANG, USER,
// LOGNAME and SHELL of the login, HOME in the session folder, TMPDIR=/tmp,
// Spec.Env and the marker. The first confined Open of a Driver probes the
// host (see remote); a host that cannot confine commands makes it fail.
// Failures to reach the host wrap sandbox.ErrUnavailable.
func (d *Driver) Open(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	spec = sandbox.Resolve(spec, sandbox.Config{DefaultTimeout: d.opts.Timeout, MaxOutput: d.opts.MaxOutput})
	for k := range spec.Env {
		if !envName.MatchString(k) {
			return nil, fmt.Errorf("ssh open: environment variable name %q is not a shell name", k)
		}
	}
	var host *remoteHost
	if d.opts.Isolation != IsolationNone {
		h, err := d.remote(ctx)
		if err != nil {
			return nil, fmt.Errorf("ssh open: %w", err)
		}
		host = h
	}
	run := spec.RunID
	if run == "" {
		run = d.opts.RunID
	}
	name := folderPrefix + sandbox.SafeName(run) + "-" + randomHex(8)
	dir := path.Join(d.opts.RemoteTmp, name)
	state := dir + "/state"
	cwd := dir + "/work"
	if spec.Cwd != "" {
		cwd = spec.Cwd
	}

	env := map[string]string{"TMPDIR": dir + "/tmp"}
	if host != nil {
		env["TMPDIR"] = "/tmp" // the session's tmp folder, mounted there
	}
	for k, v := range spec.Env {
		env[k] = v
	}
	env[sandbox.MarkerVar] = name
	var envFile strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(&envFile, "export %s=%s\n", k, sandbox.ShellQuote(env[k]))
	}

	s := &Session{d: d, dir: dir, marker: name, timeout: spec.Timeout, maxOutput: spec.MaxOutput}
	s.launcher = execScript(state, name)
	q := sandbox.ShellQuote
	var check strings.Builder // confined: what must exist to be mounted
	if host != nil {
		p := confine.Policy{
			SessionDir: dir,
			TmpDir:     dir + "/tmp",
			Mounts:     readOnly(spec.ReadOnly),
			Network:    d.opts.Network,
			Env:        host.env(dir, d.opts.User, name),
			Chdir:      cwd,
			Limits:     d.opts.Limits,
			Layout:     host.layout,
		}
		if spec.Cwd != "" {
			p.WorkDir = spec.Cwd
		}
		box, err := boxPrefix(host, p, name)
		if err != nil {
			return nil, fmt.Errorf("ssh open: %w", err)
		}
		s.box, s.sh = box, host.sh()
		script := sandbox.StateScript(state, "")
		if lim := d.opts.Limits.ShellLimits(); lim != "" {
			script = lim + "\n" + script
		}
		s.launcher = confinedScript(box, s.sh, script)
		if host.shell != "" && d.opts.ShellMode != ShellFresh {
			s.bash = host.shell
			s.shellLauncher = shellLauncher(box, host.shell)
			s.prelude = d.opts.Limits.ShellLimits()
		}
		for _, r := range spec.ReadOnly {
			fmt.Fprintf(&check, "[ -e %[1]s ] || { printf 'read-only folder %%s does not exist\n' %[1]s >&2; rm -rf %[2]s; exit 3; }\n", q(r), q(dir))
		}
		check.WriteString("mkdir " + q(dir+"/home") + "\n")
		filter, err := seccompScript(dir)
		if err != nil {
			return nil, fmt.Errorf("ssh open: %w", err)
		}
		check.WriteString(filter)
	} else {
		eof := "HERMES_EOF_" + randomHex(8)
		fmt.Fprintf(&check, "cat >%[1]s/state/exec.sh <<'%[2]s'\n%[3]s%[2]s\n", q(dir), eof, s.launcher)
	}
	eof := "HERMES_EOF_" + randomHex(8)
	var script strings.Builder
	fmt.Fprintf(&script, `set -e
umask 077
mkdir -p %[1]s
mkdir %[2]s
mkdir %[2]s/state %[2]s/work %[2]s/tmp
cd %[3]s 2>/dev/null || { printf 'working folder %%s is not an existing folder\n' %[3]s >&2; rm -rf %[2]s; exit 3; }
pwd >%[2]s/state/cwd
%[4]scat >%[2]s/state/env <<'%[5]s'
%[6]s%[5]s
a=$(readlink -f "$SHELL" 2>/dev/null) || a=
b=$(readlink -f /bin/sh 2>/dev/null) || b=
if [ -n "$a" ] && [ "$a" = "$b" ]; then echo login-shell-is-sh; fi
echo "bash=$(command -v bash 2>/dev/null)"
`, q(d.opts.RemoteTmp), q(dir), q(cwd), check.String(), eof, envFile.String())

	ch, err := d.channel(ctx)
	if err != nil {
		return nil, fmt.Errorf("ssh open: %w", err)
	}
	defer d.release()
	defer ch.Close()
	ch.Stdin = strings.NewReader(script.String())
	var stdout, stderr bytes.Buffer
	ch.Stdout, ch.Stderr = &stdout, &stderr
	stop := context.AfterFunc(ctx, func() { _ = ch.Close() })
	defer stop()
	if err := ch.Run("exec /bin/sh -s"); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("ssh open: %w", ctx.Err())
		}
		var ee *gossh.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("ssh open: set up %s on %s: %s (exit %d)",
				dir, d.opts.Addr, strings.TrimSpace(stderr.String()), ee.ExitStatus())
		}
		return nil, fmt.Errorf("ssh open: set up %s on %s: %w: %w", dir, d.opts.Addr, sandbox.ErrUnavailable, err)
	}
	s.ScriptFiles = s.files()
	// sshd runs every command line with the login shell. When that is
	// /bin/sh itself, the launcher is sent inline instead of exec'ing a
	// second /bin/sh: one exec less per command.
	s.inline = strings.Contains(stdout.String(), "login-shell-is-sh")
	if host == nil && d.opts.ShellMode != ShellFresh {
		for _, line := range strings.Split(stdout.String(), "\n") {
			if b, ok := strings.CutPrefix(line, "bash="); ok && path.IsAbs(b) {
				s.bash = b
				s.shellLauncher = unconfinedLauncher(b)
			}
		}
	}
	return s, nil
}

// confinedScript is the per-command launcher of a confined session; $1 is
// the command. Like execScript's, its watcher (outside the sandbox) waits on
// the channel's stdin and kills the launcher's process group on a "k" line
// or EOF; the group's bwrap process takes the sandbox's PID namespace, and
// so every process the command started, with it (--die-with-parent). No
// marker search is needed: nothing started inside can leave the namespace.
// The command then runs in sh (bash when the host has it) inside bwrap,
// after the limits, through the state-restoring script.
func confinedScript(box, sh, script string) string {
	return `exec 3<&0
( { read -r x <&3 || x=; kill -9 0; } </dev/null >/dev/null 2>&1 & )
exec 3<&- </dev/null
exec ` + box + " " + sandbox.ShellQuote(sh) + " -c " + sandbox.ShellQuote(script) + ` sh "$1"
`
}

// env is the base environment of a confined session's commands.
func (h *remoteHost) env(dir, user, marker string) []string {
	env := []string{"PATH=" + h.path, "HOME=" + dir + "/home", "TMPDIR=/tmp", "SHELL=" + h.sh(),
		"USER=" + user, "LOGNAME=" + user, sandbox.MarkerVar + "=" + marker}
	if h.lang != "" {
		env = append(env, "LANG="+h.lang)
	}
	return env
}

// readOnly mounts each of paths read-only at its own path.
func readOnly(paths []string) []confine.Mount {
	ms := make([]confine.Mount, 0, len(paths))
	for _, p := range paths {
		ms = append(ms, confine.Mount{Src: p, Dst: p, ReadOnly: true})
	}
	return ms
}

// Session is one rollout's folder and shell state on the remote host. Exec
// calls are serialized.
type Session struct {
	// ScriptFiles implements sandbox.Files through file scripts (see files.go).
	sandbox.ScriptFiles

	d         *Driver
	dir       string // remote session folder
	marker    string // value of HERMES_SANDBOX in the session's commands
	timeout   time.Duration
	maxOutput int
	inline    bool   // the login shell is /bin/sh: send launcher inline
	launcher  string // exec.sh's text (unconfined) or confinedScript's
	box       string // confined: bwrap command line up to "--"; "" = unconfined
	sh        string // confined: the shell run inside bwrap

	// Persistent shell mode (bash on the host): see shell.go.
	bash          string         // bash's path on the host; "" = fresh shells only
	shellLauncher string         // what the shell channel runs
	prelude       string         // limits, run once per shell
	shell         *sandbox.Shell // the long-lived shell; nil until the first command
	lane          *lane          // the extra connection the shell runs on; nil = the main one
	lastShell     atomic.Pointer[remoteShell]
	ran           bool // Exec was called: the shell mode is decided

	mu     sync.Mutex
	closed bool
}

// Dir returns the remote session folder; tests use it to check cleanup.
func (s *Session) Dir() string { return s.dir }

// Marker returns the value of HERMES_SANDBOX in every command's environment.
func (s *Session) Marker() string { return s.marker }

// Exec runs cmd on the remote host and blocks until it ends, times out
// (exit 124, partial output, the command's processes killed) or ctx is
// cancelled (ctx's error returned). With a long-lived shell (see shell.go)
// the command is written to the session's shell: one round trip, and
// background jobs keep running until a timeout, cancellation or Close
// (cancellation kills the shell; the next command gets a new one with the
// saved state). With fresh shells it runs over a new channel: one channel
// open and exec request (two round trips), the shell sshd starts and two
// forks (plus bwrap when confined), and background jobs still running when
// the command's shell exits are killed. An error means the connection or
// driver failed; it wraps sandbox.ErrUnavailable when a retry may help.
// Nothing is retried once the command was sent, since it may have had
// effects.
func (s *Session) Exec(ctx context.Context, cmd sandbox.Cmd) (sandbox.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sandbox.Result{}, fmt.Errorf("ssh exec: %w", sandbox.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return sandbox.Result{}, fmt.Errorf("ssh exec: %w", err)
	}
	timeout := cmd.Timeout
	if timeout <= 0 {
		timeout = s.timeout
	}
	if !s.ran && s.bash != "" {
		s.useShell()
	}
	s.ran = true
	if s.shell != nil {
		return s.execShell(ctx, cmd.Command, timeout)
	}
	return s.execFresh(ctx, cmd.Command, timeout)
}

// Start implements sandbox.Starter: where the session runs its commands in
// a long-lived shell, it starts that shell ahead of the first command and
// blocks until it is ready; otherwise it does nothing.
func (s *Session) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("ssh start: %w", sandbox.ErrClosed)
	}
	if !s.ran && s.bash != "" {
		s.useShell()
	}
	s.ran = true
	if s.shell == nil {
		return nil
	}
	if err := s.shell.Start(ctx); err != nil {
		return fmt.Errorf("ssh start: %w", err)
	}
	return nil
}

// useShell gives the session its long-lived shell. Exec calls it at the
// first command, with s.mu held: decided once, so that a session never
// switches from fresh shells to a long-lived one (whose functions and
// aliases the earlier commands would not have defined).
func (s *Session) useShell() {
	s.lane = s.d.reserveShell()
	s.shell = sandbox.NewShell(sandbox.ShellConfig{
		Start:     s.startShell,
		StateDir:  s.dir + "/state",
		Prelude:   s.prelude,
		MaxOutput: s.maxOutput,
		Grace:     s.d.killGrace,
	})
}

// execShell runs command in the session's long-lived shell for Exec.
func (s *Session) execShell(ctx context.Context, command string, timeout time.Duration) (sandbox.Result, error) {
	res, err := s.shell.Exec(ctx, command, timeout)
	if errors.Is(err, sandbox.ErrShellStart) && !errors.Is(err, sandbox.ErrUnavailable) && ctx.Err() == nil {
		// The probe ran bwrap here: a shell that does not come up is
		// the host or connection failing, which a retry may cure.
		err = fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err)
	}
	if err != nil {
		return sandbox.Result{}, fmt.Errorf("ssh exec: %w", err)
	}
	if r := s.lastShell.Load(); res.TimedOut && r != nil && r.unconfirmd.Load() {
		return res, fmt.Errorf("ssh exec: timed out after %v: %w: %w", timeout, sandbox.ErrUnavailable, errKillUnconfirmed)
	}
	return res, nil
}

// execFresh runs command for Exec in a fresh shell over a new channel
// (uploading it first when it is too long for an argument) and waits for
// it, its timeout or ctx.
func (s *Session) execFresh(ctx context.Context, command string, timeout time.Duration) (sandbox.Result, error) {
	start := time.Now()
	arg := sandbox.ShellQuote(command)
	if len(command) > argLimit {
		if err := s.upload(ctx, command); err != nil {
			return sandbox.Result{}, err
		}
		arg = sandbox.ShellQuote(". " + sandbox.ShellQuote(s.dir+"/state/cmd"))
	}

	ch, err := s.d.channel(ctx)
	if err != nil {
		return sandbox.Result{}, fmt.Errorf("ssh exec: %w", err)
	}
	defer s.d.release()
	defer ch.Close()
	stdin, err := ch.StdinPipe()
	if err != nil {
		return sandbox.Result{}, fmt.Errorf("ssh exec: stdin: %w", err)
	}
	stdout, stderr := newCapture(s.maxOutput), newCapture(s.maxOutput)
	ch.Stdout, ch.Stderr = stdout, stderr
	if err := ch.Start(s.execLine(arg)); err != nil {
		return sandbox.Result{}, fmt.Errorf("ssh exec: start: %w: %w", sandbox.ErrUnavailable, err)
	}
	done := make(chan error, 1)
	go func() { done <- ch.Wait() }()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var waitErr error
	var timedOut bool
	select {
	case waitErr = <-done:
	case <-timer.C:
		timedOut = true
		waitErr = kill(ch, stdin, done, s.d.killGrace)
	case <-ctx.Done():
		_ = kill(ch, stdin, done, s.d.killGrace)
		return sandbox.Result{}, fmt.Errorf("ssh exec: %w", ctx.Err())
	}

	res := sandbox.Result{Duration: time.Since(start), TimedOut: timedOut}
	var t1, t2 bool
	res.Stdout, t1 = stdout.Text()
	res.Stderr, t2 = stderr.Text()
	res.Truncated = t1 || t2
	if timedOut {
		res.ExitCode = 124
		if errors.Is(waitErr, errKillUnconfirmed) {
			// The channel never ended: the connection is likely hung, and
			// the remote tree may still run.
			return res, fmt.Errorf("ssh exec: timed out after %v: %w: %w", timeout, sandbox.ErrUnavailable, waitErr)
		}
		return res, nil
	}
	return exitResult(res, waitErr)
}

// execLine is the exec request that runs the quoted command arg in a fresh
// shell: through the session's exec.sh, the sandbox launcher, or the
// launcher inline.
func (s *Session) execLine(arg string) string {
	line := "exec /bin/sh " + sandbox.ShellQuote(s.dir+"/state/exec.sh") + " " + arg
	if s.box != "" {
		// No launcher file: the session folder is writable from inside
		// the sandbox, and the launcher runs outside it.
		line = "exec /bin/sh -c " + sandbox.ShellQuote(s.launcher) + " sh " + arg
	}
	if s.inline {
		line = "set -- " + arg + "\n" + s.launcher
	}
	return line
}

// exitResult sets res's exit code from how a fresh shell's channel ended
// (waitErr); a channel that ended without an exit status is an error.
func exitResult(res sandbox.Result, waitErr error) (sandbox.Result, error) {
	var ee *gossh.ExitError
	switch {
	case waitErr == nil:
		res.ExitCode = 0
	case errors.As(waitErr, &ee) && ee.Signal() == "":
		res.ExitCode = ee.ExitStatus()
	case errors.As(waitErr, &ee):
		// The command's shell died of a signal (kill -9 $$, OOM killer):
		// report it as a parent shell would.
		res.ExitCode = 128 + signalNumbers[ee.Signal()]
	default:
		// No exit status: the channel or connection ended under the command.
		res.ExitCode = -1
		return res, fmt.Errorf("ssh exec: connection lost while the command ran: %w: %w", sandbox.ErrUnavailable, waitErr)
	}
	return res, nil
}

// kill asks the remote watcher to kill the command's process tree, then
// waits up to grace for the channel to end, closes it if it does not and
// waits up to grace again.
func kill(ch *gossh.Session, stdin io.WriteCloser, done <-chan error, grace time.Duration) error {
	if _, err := stdin.Write([]byte("k\n")); err != nil {
		_ = ch.Close()
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
	}
	_ = ch.Close()
	select {
	case err := <-done:
		return err
	case <-time.After(grace):
		return errKillUnconfirmed
	}
}

// errKillUnconfirmed means the channel of a killed command did not end.
var errKillUnconfirmed = errors.New("remote command did not end after kill")

// upload writes a long command to the session's cmd file over its own channel.
func (s *Session) upload(ctx context.Context, command string) error {
	_, err := s.d.run(ctx, "cat >"+sandbox.ShellQuote(s.dir+"/state/cmd"), strings.NewReader(command))
	if err != nil {
		return fmt.Errorf("ssh exec: upload command: %w", err)
	}
	return nil
}

// Close kills what the session's commands left running (found by marker) and
// removes the remote session folder, over one channel. It waits for a running
// Exec to end and is safe to call more than once; calls after the first
// successful one do nothing. If the host cannot be reached the error wraps
// sandbox.ErrUnavailable and a later Close retries.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if s.shell != nil {
		s.shell.Close()
		s.shell = nil
		s.d.releaseShell(s.lane)
	}
	script := killMarked(true, s.marker) + "\n" + removeDir(sandbox.ShellQuote(s.dir))
	if _, err := s.d.run(ctx, script, nil); err != nil {
		return fmt.Errorf("ssh close session: remove %s: %w", s.dir, err)
	}
	s.closed = true
	return nil
}

// GC kills processes and removes folders left on the remote host by sessions
// of runID ("" = every run) that were never closed, e.g. after kill -9 of a
// run. It is safe only when that run is no longer running. One channel.
func (d *Driver) GC(ctx context.Context, runID string) (int, error) {
	prefix := folderPrefix
	if runID != "" {
		prefix += sandbox.SafeName(runID) + "-"
	}
	glob := sandbox.ShellQuote(d.opts.RemoteTmp+"/"+prefix) + "*"
	script := killMarked(false, prefix) + "\nn=0\nfor f in " + glob +
		"; do [ -d \"$f\" ] || continue; " + removeDir(`"$f"`) + "; " +
		"[ -e \"$f\" ] || n=$((n+1)); done\necho $n"
	out, err := d.run(ctx, script, nil)
	if err != nil {
		return 0, fmt.Errorf("ssh sandbox gc: %w", err)
	}
	var n int
	if _, err := fmt.Sscan(out, &n); err != nil {
		return 0, fmt.Errorf("ssh sandbox gc: unexpected output %q", out)
	}
	return n, nil
}

// removeDir returns shell code removing the folder dir (a quoted shell word),
// first making it writable again in case a command removed its permissions.
func removeDir(dir string) string {
	return "rm -rf -- " + dir + " 2>/dev/null || { chmod -R u+rwx -- " + dir + "; rm -rf -- " + dir + "; }"
}

// run runs a short shell script by /bin/sh on the remote over its own channel
// and returns its stdout. A non-zero exit is an error quoting stderr; a
// transport failure wraps sandbox.ErrUnavailable.
func (d *Driver) run(ctx context.Context, script string, stdin io.Reader) (string, error) {
	ch, err := d.channel(ctx)
	if err != nil {
		return "", err
	}
	defer d.release()
	defer ch.Close()
	var stdout, stderr bytes.Buffer
	ch.Stdin, ch.Stdout, ch.Stderr = stdin, &stdout, &stderr
	stop := context.AfterFunc(ctx, func() { _ = ch.Close() })
	defer stop()
	if err := ch.Run("exec /bin/sh -c " + sandbox.ShellQuote(script)); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		var ee *gossh.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("remote exit %d: %s", ee.ExitStatus(), strings.TrimSpace(stderr.String()))
		}
		return "", fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err)
	}
	return stdout.String(), nil
}

// capture is a sandbox.Capture made safe for the SSH library's copy
// goroutine writing while a timed-out Exec gives up and reads.
type capture struct {
	mu sync.Mutex
	c  *sandbox.Capture
}

func newCapture(max int) *capture { return &capture{c: sandbox.NewCapture(max)} }

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c.Write(p)
}

func (c *capture) Text() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c.Text()
}

// signalNumbers maps SSH signal names to their usual Linux numbers.
var signalNumbers = map[string]int{
	"HUP": 1, "INT": 2, "QUIT": 3, "ILL": 4, "ABRT": 6, "FPE": 8, "KILL": 9,
	"USR1": 10, "SEGV": 11, "USR2": 12, "PIPE": 13, "ALRM": 14, "TERM": 15,
}

// envName matches names the shell accepts in export.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
