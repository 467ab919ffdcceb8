package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ShellProc is one running long-lived shell that a driver started for a
// Shell: a POSIX shell (bash or busybox sh) reading commands on Stdin.
type ShellProc struct {
	Stdin  io.WriteCloser
	Stdout io.Reader
	Stderr io.Reader
	// Wait blocks until the shell has ended and returns its exit code
	// (128+signal when a signal killed it); err is only for a driver
	// failure (connection lost, daemon gone).
	Wait func() (code int, err error)
	// KillCommand kills every process of the session except the shell
	// itself: the running command, its children, background jobs.
	KillCommand func() error
	// Kill ends the shell and everything in the session; the readers of
	// Stdout and Stderr then see EOF.
	Kill func()
	// Ready, when set, runs once the shell printed its ready marker,
	// before any command; an error fails the start.
	Ready func() error
}

// WaitCode is a ShellProc.Wait for a shell started as a local process: it
// waits for c and returns its exit code, 128+signal when a signal killed it;
// err only when waiting itself failed.
func WaitCode(c *exec.Cmd) (int, error) {
	err := c.Wait()
	if ws, ok := c.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return 0, err
	}
	return c.ProcessState.ExitCode(), nil
}

// ShellConfig is how a Shell starts its shell process.
type ShellConfig struct {
	// Start starts one shell. It is called again, with the state restored,
	// when a command ended the shell (exit, exec, a crash). ctx bounds the
	// start only: the shell must outlive it.
	Start func(ctx context.Context) (*ShellProc, error)
	// StateDir is the folder, as the shell sees it, where the exported
	// environment and working folder are saved after every command and
	// restored when a shell starts. It must exist.
	StateDir string
	// Prelude is shell code run once when a shell starts (limits, ...).
	Prelude string
	// MaxOutput is the bytes kept per stream; 0 = the default.
	MaxOutput int
	// Refresh has the first shell, once ready, report its state, so that
	// Refresh can give a used shell that state again (bash only).
	Refresh bool
	// WriteFile, when set, writes a file of the given name (a short word)
	// where the shell can read it and no command can change it (a folder
	// mounted read-only in the sandbox), and returns its path as the shell
	// sees it: Refresh's scripts are sourced from there rather than written
	// to the shell's input. The Shell writes each name once per content and
	// sources it again for later rows, so the path is best kept short: the
	// shell reads it from its input a byte per system call.
	WriteFile func(name string, data []byte) (string, error)
	// ReadReport, when set, reads and removes the file of the given name
	// that the shell wrote in ReportDir, from the driver's side, not
	// following a link and refusing anything but a regular file. Refresh's
	// state reports are then written there and read at once: a shell
	// writes its output a line per system call, and each line on a pipe
	// also wakes the reader.
	ReadReport func(name string) ([]byte, error)
	// HostIPC: the driver checks, in Refresh's check, that the shell's
	// System V IPC namespace holds no object, so the state report leaves
	// them out (ipcReport: the costliest part of a bash's report).
	HostIPC bool
	// ReportDir is the folder, as the shell sees it, where ReadReport's
	// files are written: best a memory file system (a file made and
	// removed per row costs more on a disk's).
	ReportDir string
	// Grace is how long a timed-out command's shell may take to come back
	// once the command's processes are killed, before the shell is killed
	// too (a builtin loop); 0 = 5 s.
	Grace time.Duration
}

// Shell runs commands one after another in one long-lived shell. Each
// command is written to the shell's stdin with a fresh random end marker that
// the shell prints, with the command's exit code, on file descriptors it
// saved at start (so `exec >/dev/null` cannot hide it) once the command is
// done. `cd`, `export`, shell functions and aliases persist because the
// shell does. After every command the shell saves its exported environment
// and working folder in StateDir (also from its EXIT trap), so a command that
// ends the shell (`exit 3`, `exec true`, `kill -9 $$`) ends only that command:
// its exit code is the shell's, and the next command gets a new shell with
// the state restored (functions and aliases are lost then). A timeout kills
// the command's processes, not the shell; a shell that does not come back
// within Grace is killed and replaced. Commands read an empty stdin.
//
// Output written by background jobs after their command ended is reported
// with the next command. Exec calls are serialized.
type Shell struct {
	cfg ShellConfig

	mu     sync.Mutex // serializes Exec and Close
	cur    *liveShell // nil when no shell runs
	closed bool

	// Close kills the running shell without waiting for Exec's lock.
	closing atomic.Bool
	live    atomic.Pointer[liveShell]

	// With ShellConfig.Refresh, from the first shell's state report when it
	// was new (refresh.go): the report as compared, the refresh script that
	// gives a used shell that state again, and the quick script tried
	// before it. All are made once.
	pristine, script, quick string
	// files are the paths and contents WriteFile was given, by name.
	files map[string]writtenFile
	// quickOnly: the last Refresh needed only the quick script (tests).
	quickOnly bool
}

// liveShell is one started ShellProc and the goroutines reading it.
type liveShell struct {
	proc     *ShellProc
	out, err chan []byte // chunks of stdout and stderr; set to nil once they hit EOF
	outPend  []byte      // stdout read past the last marker
	errPend  []byte
	waited   chan shellExit // receives once when the shell ends
	exit     *shellExit     // set once received
}

type writtenFile struct{ path, data string }

type shellExit struct {
	code int
	err  error
}

// NewShell returns a Shell that starts its first shell on the first Exec.
func NewShell(cfg ShellConfig) *Shell {
	if cfg.Grace <= 0 {
		cfg.Grace = 5 * time.Second
	}
	return &Shell{cfg: cfg}
}

// ErrShellStart wraps a failure to start a shell (the driver's Start, or a
// shell that died before it was ready).
var ErrShellStart = errors.New("shell did not start")

// startTimeout bounds how long a new shell may take to print its ready
// marker.
const startTimeout = 30 * time.Second

// drainWait bounds how long Exec reads what a dead shell left in its pipes.
const drainWait = 2 * time.Second

func newMarker() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "__hs_" + hex.EncodeToString(b[:]) + "_"
}

// setup is the code a new shell runs first: it keeps its output pipes on
// fds 8 and 9 for the markers, defines the state saver, restores the state,
// enables aliases (bash; other shells expand them already) and prints the
// ready marker.
func (s *Shell) setup(ready string) string {
	var b bytes.Buffer
	b.WriteString("exec 8>&1 9>&2\n")
	b.WriteString("__hs_state=" + ShellQuote(s.cfg.StateDir) + "\n")
	// The state files are rewritten in place, never truncated (ext4 makes
	// a truncate-and-rewrite wait for the disk, milliseconds per command):
	// the env file ends with "return" and the cwd file is read up to its
	// first line, so a longer old content left behind is never read.
	// The state folder is private to the session (mode 0700), so the files
	// need no umask of their own: a subshell for one would cost a process
	// per shell start.
	b.WriteString(`{ : >>"$__hs_state/env"; : >>"$__hs_state/cwd"; } 2>/dev/null
` + shellFuncs + `
if [ -s "$__hs_state/env" ]; then . "$__hs_state/env" >/dev/null 2>&1; fi
if [ -s "$__hs_state/cwd" ]; then IFS= read -r __hs_d <"$__hs_state/cwd" && cd "$__hs_d" 2>/dev/null; unset __hs_d; fi
trap __hs_save EXIT
shopt -s expand_aliases 2>/dev/null
`)
	if s.cfg.Prelude != "" {
		b.WriteString(s.cfg.Prelude + "\n")
	}
	// Where the driver can write a file the shell sources (WriteFile), the
	// set-up is read from it in blocks rather than from the input a byte per
	// system call; a new shell has no function that `.` could name.
	return s.viaFile("i", b.String(), false) + "printf '%s\\n' " + ready + " >&8; printf '%s\\n' " + ready + " >&9\n"
}

// shellFuncs are the functions the engine defines in every shell: the state
// saver and the end of a command.
const shellFuncs = `__hs_save() { { { command export -p; command echo 'return 0'; } 1<>"$__hs_state/env"; command pwd 1<>"$__hs_state/cwd"; } 2>/dev/null; }
__hs_e() { __hs_save; command printf '%s %d\n' "$1" "$2" >&8; command printf '%s\n' "$1" >&9; }`

// commandText is what the shell reads for one command. The command's
// status goes to __hs_e as an argument, so that no variable of the engine is
// left in the shell between commands (Refresh compares them).
func commandText(command, marker string) string {
	return "eval " + ShellQuote(command) + " </dev/null 8>&- 9>&-;__hs_e " + marker + " $?\n"
}

// start starts a shell and waits for its ready marker.
func (s *Shell) start(ctx context.Context) (*liveShell, error) {
	proc, err := s.cfg.Start(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrShellStart, err)
	}
	l := &liveShell{proc: proc, out: make(chan []byte, 16), err: make(chan []byte, 16), waited: make(chan shellExit, 1)}
	go pump(proc.Stdout, l.out)
	go pump(proc.Stderr, l.err)
	go func() {
		code, err := proc.Wait()
		l.waited <- shellExit{code, err}
	}()
	if err := s.ready(ctx, l); err != nil {
		proc.Kill()
		return nil, err
	}
	if s.cfg.Refresh && s.pristine == "" {
		if err := s.reportState(ctx, l); err != nil {
			proc.Kill()
			return nil, fmt.Errorf("%w: %w", ErrShellStart, err)
		}
	}
	if proc.Ready != nil {
		if err := proc.Ready(); err != nil {
			proc.Kill()
			return nil, fmt.Errorf("%w: %w", ErrShellStart, err)
		}
	}
	return l, nil
}

// ready writes the setup code to a freshly started shell and waits for its
// ready marker on both streams; what the shell printed before it is
// dropped.
func (s *Shell) ready(ctx context.Context, l *liveShell) error {
	ready := newMarker()
	if err := l.write(ctx, s.setup(ready)); err != nil {
		// A shell that ended before reading its input: what it printed
		// says why better than the broken pipe.
		if aerr := l.await(ctx, ready); aerr != nil {
			return fmt.Errorf("%w: %w", ErrShellStart, aerr)
		}
		return fmt.Errorf("%w: %w", ErrShellStart, err)
	}
	if err := l.await(ctx, ready); err != nil {
		return fmt.Errorf("%w: %w", ErrShellStart, err)
	}
	return nil
}

// await reads both streams up to token and a newline on each, within
// startTimeout, dropping what comes before it and keeping what follows.
func (l *liveShell) await(ctx context.Context, token string) error {
	_, _, err := l.until(ctx, token)
	return err
}

// until reads both streams up to token and a newline on each, within
// startTimeout, and returns what came before it on each; what follows is
// kept for the next command.
func (l *liveShell) until(ctx context.Context, token string) (out, errs []byte, err error) {
	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	outDone, errDone := false, false
	for !outDone || !errDone {
		select {
		case c, ok := <-l.out:
			if !ok {
				l.out, outDone = nil, true
				continue
			}
			l.outPend = append(l.outPend, c...)
			if i := bytes.Index(l.outPend, []byte(token+"\n")); i >= 0 {
				out = l.outPend[:i]
				l.outPend = append([]byte(nil), l.outPend[i+len(token)+1:]...)
				outDone = true
			}
		case c, ok := <-l.err:
			if !ok {
				l.err, errDone = nil, true
				continue
			}
			l.errPend = append(l.errPend, c...)
			if i := bytes.Index(l.errPend, []byte(token+"\n")); i >= 0 {
				errs = l.errPend[:i]
				l.errPend = append([]byte(nil), l.errPend[i+len(token)+1:]...)
				errDone = true
			}
		case <-sctx.Done():
			return nil, nil, fmt.Errorf("no marker: %w", sctx.Err())
		}
	}
	if l.out == nil || l.err == nil {
		msg := bytes.TrimSpace(append(l.outPend, l.errPend...))
		if len(msg) > 500 {
			msg = msg[:500]
		}
		return nil, nil, fmt.Errorf("it ended at once: %s", msg)
	}
	return out, errs, nil
}

// pump copies r to ch in chunks and closes ch at EOF or error, and then r
// when it is a Closer.
func pump(r io.Reader, ch chan<- []byte) {
	defer close(ch)
	if c, ok := r.(io.Closer); ok {
		defer c.Close()
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			ch <- append([]byte(nil), buf[:n]...)
		}
		if err != nil {
			return
		}
	}
}

// write writes text to the shell's stdin; a shell that stopped reading
// (dead, or stuck) does not block beyond ctx. An input that takes a write
// deadline (a local pipe, a connection) is written here, ctx's end setting
// a deadline in the past; any other in a goroutine of its own, which a
// stuck shell leaves blocked until it is killed. A goroutine per command
// costs a scheduler hand-off, and often a thread's wake-up, each way.
func (l *liveShell) write(ctx context.Context, text string) error {
	if d, ok := l.proc.Stdin.(writeDeadliner); ok && d.SetWriteDeadline(time.Time{}) == nil {
		fired := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			_ = d.SetWriteDeadline(time.Unix(1, 0))
			close(fired)
		})
		_, err := io.WriteString(l.proc.Stdin, text)
		if !stop() {
			<-fired // no deadline is set after this write returned
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
		}
		return err
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.WriteString(l.proc.Stdin, text)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writeDeadliner is a shell input whose writes can be given a deadline.
type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

// Exec runs command in the shell, starting one first if none runs, and
// blocks until it ends, times out (exit code 124, TimedOut, the output so
// far) or ctx is cancelled (the shell is killed; the next Exec starts a new
// one). An error means the shell could not be started or the driver failed.
func (s *Shell) Exec(ctx context.Context, command string, timeout time.Duration) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.closing.Load() {
		return Result{}, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	start := time.Now()
	l, err := s.current(ctx)
	if err != nil {
		return Result{}, err
	}
	r := newShellRun(l, newMarker(), s.cfg.MaxOutput)
	if err := l.write(ctx, commandText(command, r.marker)); err != nil && ctx.Err() != nil {
		s.drop()
		return Result{}, ctx.Err()
	}
	// A failed write means the shell is gone: the wait below sees it.
	if err := r.wait(ctx, timeout, s.cfg.Grace); err != nil {
		s.drop()
		return Result{}, err
	}
	return s.result(r, time.Since(start))
}

// current returns the running shell for Exec, with s.mu held: the current
// one, or a new one when none runs or the last one died while idle.
func (s *Shell) current(ctx context.Context) (*liveShell, error) {
	if s.cur != nil && s.cur.dead() {
		s.drop()
	}
	if s.cur == nil {
		l, err := s.start(ctx)
		if err != nil {
			return nil, err
		}
		s.cur = l
		s.live.Store(l)
		if s.closing.Load() {
			s.drop()
			return nil, ErrClosed
		}
	}
	return s.cur, nil
}

// shellRun is one command's run in a live shell: its output captures and
// the scans that find its end marker on both streams.
type shellRun struct {
	l                *liveShell
	marker           string
	outCap, errCap   *Capture
	outScan, errScan markerScan
	code             int  // the command's exit code, when gotCode
	gotCode          bool // the marker line with the exit code was seen
	timedOut         bool
}

// newShellRun prepares a run of one command ended by marker in l; the
// output background jobs wrote since the last command is this one's.
func newShellRun(l *liveShell, marker string, maxOutput int) *shellRun {
	r := &shellRun{
		l:       l,
		marker:  marker,
		outCap:  NewCapture(maxOutput),
		errCap:  NewCapture(maxOutput),
		outScan: markerScan{marker: []byte(marker + " "), line: true},
		errScan: markerScan{marker: []byte(marker + "\n")},
	}
	r.outScan.pend, l.outPend = l.outPend, nil
	r.errScan.pend, l.errPend = l.errPend, nil
	return r
}

// wait reads the shell's output until both markers were seen or the shell
// ended and its streams closed. At timeout it kills the command (and
// grace later the shell, if it is stuck); it returns ctx's error when ctx
// is cancelled, leaving the shell to the caller to drop.
func (r *shellRun) wait(ctx context.Context, timeout, grace time.Duration) error {
	l := r.l
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	var graceC <-chan time.Time
	for {
		if done, c := r.outScan.scan(r.outCap); done {
			r.code, r.gotCode = c, true
		}
		r.errScan.scan(r.errCap)
		if r.outScan.found && r.errScan.found {
			return nil
		}
		if l.exit != nil && l.out == nil && l.err == nil {
			return nil
		}
		select {
		case c, ok := <-l.out:
			if !ok {
				l.out = nil
				continue
			}
			r.outScan.pend = append(r.outScan.pend, c...)
		case c, ok := <-l.err:
			if !ok {
				l.err = nil
				continue
			}
			r.errScan.pend = append(r.errScan.pend, c...)
		case e := <-l.waited:
			// The shell ended without its marker: kill what it left (the
			// session's processes hold the pipes) and read what is there.
			l.exit = &e
			l.proc.Kill()
			drain := time.NewTimer(drainWait)
			l.drain(&r.outScan, &r.errScan, drain.C)
			drain.Stop()
		case <-timer:
			timer = nil
			r.timedOut = true
			_ = l.proc.KillCommand()
			g := time.NewTimer(grace)
			defer g.Stop()
			graceC = g.C
		case <-graceC:
			// The shell itself is stuck (a builtin loop): replace it.
			graceC = nil
			l.proc.Kill()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// result makes Exec's Result of the ended run r, which took d: the exit
// code (124 on timeout), the captured output, and the shell dropped when
// it ended. A shell that ended with an error is Exec's error.
func (s *Shell) result(r *shellRun, d time.Duration) (Result, error) {
	l := r.l
	res := Result{TimedOut: r.timedOut, Duration: d}
	l.outPend, l.errPend = r.outScan.rest, r.errScan.rest
	switch {
	case res.TimedOut:
		res.ExitCode = 124
	case r.gotCode:
		res.ExitCode = r.code
	case l.exit != nil && l.exit.err != nil:
		s.drop()
		return Result{}, l.exit.err
	case l.exit != nil:
		res.ExitCode = l.exit.code
	}
	// Output after a marker-less end is all the command's.
	if !r.outScan.found {
		r.outCap.Write(r.outScan.pend)
	}
	if !r.errScan.found {
		r.errCap.Write(r.errScan.pend)
	}
	var to, te bool
	res.Stdout, to = r.outCap.Text()
	res.Stderr, te = r.errCap.Text()
	res.Truncated = to || te
	if l.exit != nil {
		s.drop()
	}
	return res, nil
}

// drain reads both streams until EOF or until stop fires.
func (l *liveShell) drain(out, errs *markerScan, stop <-chan time.Time) {
	for l.out != nil || l.err != nil {
		select {
		case c, ok := <-l.out:
			if !ok {
				l.out = nil
				continue
			}
			out.pend = append(out.pend, c...)
		case c, ok := <-l.err:
			if !ok {
				l.err = nil
				continue
			}
			errs.pend = append(errs.pend, c...)
		case <-stop:
			l.out, l.err = nil, nil
		}
	}
}

// dead reports whether the shell ended while idle.
func (l *liveShell) dead() bool {
	if l.exit != nil {
		return true
	}
	select {
	case e := <-l.waited:
		l.exit = &e
		return true
	default:
		return false
	}
}

// drop kills the current shell; the next Exec starts a new one.
func (s *Shell) drop() {
	if s.cur != nil {
		s.cur.proc.Kill()
		s.cur = nil
		s.live.Store(nil)
	}
}

// Start starts a shell ahead of the first command, as Exec would, and
// blocks until it is ready; with one running it does nothing. The local
// driver's session offers it as sandbox.Starter.
func (s *Shell) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.closing.Load() {
		return ErrClosed
	}
	_, err := s.current(ctx)
	return err
}

// Started reports whether a shell process is running (idle) in this
// Shell; a Shell whose first command has not come yet has none.
func (s *Shell) Started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur != nil && !s.cur.dead()
}

// Reset gives a live, idle shell a fresh start for a new user of the
// session, without the driver starting a new process around it. replace
// gets a fresh random token: it must have everything of the shell killed
// and a new shell started in its place, with the initial environment and
// folder, that prints token and a newline on both streams before anything
// else (a driver's supervisor does that). Once the token is there, clean
// runs (no process of the old shell is left), and the new shell is set up
// as a started one. Output written before the token is dropped. On any
// failure the shell is killed and the error returned: the caller discards
// the session.
func (s *Shell) Reset(ctx context.Context, replace func(token string) error, clean func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ensureIdle("reset"); err != nil {
		return err
	}
	l, err := s.handOff(ctx, "reset", func(token string) (bool, error) { return true, replace(token) })
	if err != nil {
		return err
	}
	if err := clean(); err != nil {
		s.drop()
		return fmt.Errorf("reset: %w", err)
	}
	if err := s.ready(ctx, l); err != nil {
		s.drop()
		return fmt.Errorf("reset: %w", err)
	}
	l.outPend, l.errPend = nil, nil
	return nil
}

// ensureIdle checks that the Shell is open with a live shell; the caller
// holds s.mu.
func (s *Shell) ensureIdle(op string) error {
	if s.closed || s.closing.Load() {
		return ErrClosed
	}
	if s.cur == nil || s.cur.dead() {
		return fmt.Errorf("%s: no live shell", op)
	}
	return nil
}

// handOff has the driver (send) print a fresh token on both streams of the
// live shell, once what it must do for a new user of the session is done,
// and drops what came before the token; when send reports that it printed
// nothing (it had nothing to do), the live shell is returned as it is. The
// caller holds s.mu and checked ensureIdle; a failure kills the shell.
func (s *Shell) handOff(ctx context.Context, op string, send func(token string) (bool, error)) (*liveShell, error) {
	l := s.cur
	token := newMarker()
	sent, err := send(token)
	if err != nil {
		s.drop()
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if !sent {
		return l, nil
	}
	if err := l.await(ctx, token); err != nil {
		s.drop()
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	l.outPend, l.errPend = nil, nil
	return l, nil
}

// Close kills the shell and everything in its session, without waiting for
// a running command (its Exec returns at once). Exec then fails with
// ErrClosed.
func (s *Shell) Close() {
	s.closing.Store(true)
	if l := s.live.Load(); l != nil {
		l.proc.Kill()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.drop()
}

// markerScan finds an end marker in one stream. Bytes before it go to the
// capture as they arrive, except a tail that could be the marker's start.
type markerScan struct {
	marker []byte
	line   bool   // the marker is followed by an exit code and a newline
	pend   []byte // bytes not yet written to the capture
	found  bool
	rest   []byte // bytes after the marker (background output)
}

// scan consumes pend; done is true (once) with the exit code when the
// marker has been found.
func (m *markerScan) scan(w io.Writer) (done bool, code int) {
	if m.found {
		m.rest = append(m.rest, m.pend...) // background output, for the next command
		m.pend = m.pend[:0]
		return false, 0
	}
	if len(m.pend) == 0 {
		return false, 0
	}
	i := bytes.Index(m.pend, m.marker)
	if i < 0 {
		keep := len(m.marker) - 1
		if keep > len(m.pend) {
			keep = len(m.pend)
		}
		n := len(m.pend) - keep
		// Keep only a tail that could start the marker.
		for n < len(m.pend) && !bytes.HasPrefix(m.marker, m.pend[n:]) {
			n++
		}
		_, _ = w.Write(m.pend[:n])
		m.pend = append(m.pend[:0], m.pend[n:]...)
		return false, 0
	}
	_, _ = w.Write(m.pend[:i])
	after := m.pend[i+len(m.marker):]
	if m.line {
		j := bytes.IndexByte(after, '\n')
		if j < 0 {
			m.pend = append(m.pend[:0], m.pend[i:]...) // wait for the code
			return false, 0
		}
		code, _ = strconv.Atoi(string(after[:j]))
		after = after[j+1:]
	}
	m.found = true
	m.rest = append([]byte(nil), after...)
	m.pend = nil
	return true, code
}
