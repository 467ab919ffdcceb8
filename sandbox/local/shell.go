package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
)

// The persistent shell mode (the default) runs one shell per session and
// writes every command to it (sandbox.Shell). Confined, the shell runs in
// one bubblewrap: host pid P (bwrap) → P1 (bwrap's init, pid 1 of the
// session's PID namespace) → P2 (the shell); for bash, P1 is the
// supervisor itself (bwrap's --as-pid-1: no process of bwrap's stays in
// the sandbox, where a row could write its memory) and P2 the shell.
// Unconfined, the shell leads its own process group and session.
//
// A row must not reach the supervisor or the shell a later row gets: the
// seccomp filter (confine.Seccomp) refuses ptrace and process_vm_readv/
// writev, and both are run from an execute-only copy of bash
// (guardedShell), which makes the kernel mark them not dumpable: another
// process of the sandbox (no capability left) cannot open their
// /proc/<pid>/mem, environ or fds. The driver checks, before a sandbox
// serves another row, that no process but the two is left and that the
// supervisor is as it was (checkSandbox).

// supervisor is the confined bash shell's parent and the namespace's init
// (it reaps the processes it adopts while it waits). It passes its exit code
// on (bwrap's is then the shell's), except when the driver resets the
// session for another row (pool.go). The driver writes a token line on
// fd 3 and sends a signal:
//   - SIGUSR2 (the shell is refreshed in place, sandbox.Shell.Refresh): the
//     supervisor kills every process of the namespace but itself and the
//     shell, looking through /proc until none is left (zombies aside),
//     and prints the last token line of fd 3 on stdout and stderr (not sent
//     when the session's cgroup shows no such process: shellProc.alone);
//   - SIGUSR1 (a new shell): it kills every other process of the namespace
//     (kill -9 -1 spares only itself) until none is left, reads
//     away what is left in the shell's input, prints the token the same way
//     and starts a new shell with the initial environment and folder.
//
// Both remove System V IPC objects. Only builtins run, but for ipcrm when
// there is an object to remove. With a second argument (joinHello), the
// supervisor first prints it and waits for a line on fd 3 before it starts
// the shell: the driver moves bwrap and the supervisor into the session's
// cgroup meanwhile (joinLate).
const supervisor = `if [ -n "$2" ]; then printf '%s\n' "$2"; IFS= read -r _ <&3 || exit 125; fi
trap 'r=1' USR1
trap 'q=1' USR2
ipc() {
  for f in /proc/sysvipc/shm /proc/sysvipc/sem /proc/sysvipc/msg; do
    { read -r _ && read -r _ && ipcrm -a; } <"$f" >/dev/null 2>&1
  done
}
token() {
  t=
  while read -r -t 0 <&3; do IFS= read -r t <&3 || exit 125; done
  [ -n "$t" ] || exit 125
  printf '%s\n' "$t"; printf '%s\n' "$t" >&2
}
while :; do
  r=
  "$1" --noprofile --norc <&0 3<&- &
  s=$!
  while :; do
    q=
    { wait "$s"; } 2>/dev/null; c=$?
    [ -n "$q" ] || break
    n=1
    while [ -n "$n" ]; do
      n=
      for p in /proc/[1-9]*; do
        p=${p#/proc/}
        case $p in 1|"$$"|"$s") continue ;; esac
        st=
        { read -r st <"/proc/$p/stat"; } 2>/dev/null || continue
        case ${st##*) } in Z*|X*) continue ;; esac
        kill -9 "$p" 2>/dev/null && n=1
      done
    done
    ipc
    token
  done
  [ -n "$r" ] || exit "$c"
  while kill -9 -1 2>/dev/null; do { wait; } 2>/dev/null; done
  ipc
  while read -r -t 0; do read -r -t 0.05 -N 65536 _; done
  token
done`

// supervised reports whether the session's shell runs under supervisor
// (confined bash in the persistent mode): only those sessions are pooled.
func (s *Session) supervised() bool { return s.bwrap != "" && isBash(s.shell) && s.sh != nil }

// startShell starts the session's shell and returns it as a
// sandbox.ShellProc. The pipes are plain os.Pipe ends handed to the child,
// so no copying goroutine stands between the shell and the reader.
func (s *Session) startShell(context.Context) (*sandbox.ShellProc, error) {
	argv := []string{s.shell}
	if isBash(s.shell) {
		argv = append(argv, "--noprofile", "--norc")
	}
	super := s.supervised()
	// A cgroup v1 group has no descriptor to start a process in
	// (confine.Cgroup.FD) and its wrapper costs a shell process per start:
	// a supervised shell's sandbox joins it before the shell starts instead.
	var join *confine.Cgroup
	if super {
		cg, err := s.cgroup()
		if err != nil {
			return nil, err
		}
		hello := ""
		if cg != nil && cg.Version == "v1" {
			join, hello = cg, joinHello
		}
		sh, err := s.guardedShell()
		if err != nil {
			return nil, err
		}
		argv = append(argv, "-c", supervisor, "hermes-sandbox", sh, hello)
		argv[0] = sh
	}
	c := exec.Command(argv[0], argv[1:]...)
	c.Dir = s.cwd
	c.Env = s.env
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	var ctlR, ctlW *os.File
	if super {
		if ctlR, ctlW, err = pipe(); err != nil {
			closeAll()
			return nil, err
		}
	}
	if s.bwrap != "" {
		// The supervisor is the namespace's init (see supervisor); its
		// control pipe is fd 3, the seccomp filter's comes after it.
		pol := s.policy
		pol.AsInit = super
		var extra []*os.File
		if ctlR != nil {
			extra = append(extra, ctlR) // fd 3
		}
		bw, err := pol.Args(s.bwrap, argv, extra...)
		if err != nil {
			closeAll()
			return nil, err
		}
		files = append(files, bw.Files[len(extra):]...) // closed with the others after the start
		c = exec.Command(s.bwrap)
		bw.Apply(c)
		c.Env = s.hostEnv
		c.Dir = s.dir
	}
	c.Stdin, c.Stdout, c.Stderr = inR, outW, errW
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	var err2 error
	if join != nil {
		err2 = c.Start()
	} else {
		err2 = s.startIn(c)
	}
	if err2 != nil {
		closeAll()
		return nil, err2
	}
	inR.Close()
	outW.Close()
	errW.Close()
	for _, f := range c.ExtraFiles {
		f.Close() // the control pipe's read end and the filter's: the sandbox has them
	}
	pid := c.Process.Pid
	if join != nil {
		if err := joinLate(join, pid, outR, errR, ctlW); err != nil {
			s.kill(pid)
			_ = c.Wait()
			for _, f := range []*os.File{inW, outR, errR, ctlW} {
				f.Close()
			}
			return nil, fmt.Errorf("local sandbox: %w", err)
		}
	}
	p := &shellProc{s: s, pid: pid, ctl: ctlW}
	s.smu.Lock()
	s.ran = true
	s.smu.Unlock()
	s.box.mu.Lock()
	s.box.proc = p
	s.box.mu.Unlock()

	var killOnce sync.Once
	var ready func() error
	if super {
		ready = p.ready
	}
	return &sandbox.ShellProc{
		Ready:       ready,
		Stdin:       inW,
		Stdout:      outR,
		Stderr:      errR,
		Wait:        func() (int, error) { return sandbox.WaitCode(c) },
		KillCommand: p.killCommand,
		Kill: func() {
			killOnce.Do(func() {
				if s.bwrap == "" {
					// The group is enough here: Close sweeps /proc for
					// marked processes that left it, once per session.
					// Unconfined, there is no supervisor and nothing kept.
					_ = syscall.Kill(-pid, syscall.SIGKILL)
				} else {
					p.kill()
				}
				inW.Close()
			})
		},
	}, nil
}

// joinHello is what a supervisor that waits to be moved into the session's
// cgroup prints first.
const joinHello = "__hs_join"

// joinLate moves a supervised sandbox started outside its cgroup into it
// before anything but bubblewrap and the supervisor runs there: the
// supervisor prints joinHello on out and waits for a line on ctl (its fd 3)
// before it starts the shell. bwrap, its init and the supervisor then join
// the group, and the shell and every command start inside it. Nothing
// forks in between: bwrap is waiting for its init, the init for the
// supervisor, and the supervisor for the line. When the sandbox ends
// before its hello (bwrap refused a mount, say), the error carries what it
// wrote on stderr (errOut), so the reason is not lost.
func joinLate(cg *confine.Cgroup, pid int, out, errOut, ctl *os.File) error {
	_ = out.SetReadDeadline(time.Now().Add(30 * time.Second))
	defer func() { _ = out.SetReadDeadline(time.Time{}) }()
	var got []byte
	buf := make([]byte, 64)
	for !bytes.HasSuffix(got, []byte("\n")) {
		n, err := out.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			return fmt.Errorf("the sandbox did not start: %w (it printed %q%s)", err, got, stderrOf(errOut))
		}
	}
	if string(got) != joinHello+"\n" {
		return fmt.Errorf("the sandbox did not start: it printed %q%s", got, stderrOf(errOut))
	}
	sup := childOf(pid) // the namespace's init
	if sup == 0 {
		return errors.New("the sandbox did not start: no supervisor")
	}
	if err := cg.Join(pid, sup); err != nil {
		return err
	}
	_, err := ctl.WriteString("go\n")
	return err
}

// stderrOf is what a sandbox that failed to start wrote on stderr (r),
// read until its end or for a second at most, as ", stderr: TEXT", or ""
// when it wrote nothing.
func stderrOf(r *os.File) string {
	_ = r.SetReadDeadline(time.Now().Add(time.Second))
	defer func() { _ = r.SetReadDeadline(time.Time{}) }()
	var got []byte
	buf := make([]byte, 512)
	for len(got) < 2000 {
		n, err := r.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			break
		}
	}
	msg := strings.TrimSpace(string(got))
	if msg == "" {
		return ""
	}
	return ", stderr: " + msg
}

// startIn starts c (a confined session's bwrap, or an unconfined shell) in
// the session's cgroup when it has one: directly with clone3 on cgroup v2
// (UseCgroupFD), else through the group's shell wrapper (confine.Cgroup.Wrap).
func (s *Session) startIn(c *exec.Cmd) error {
	if s.bwrap == "" {
		return c.Start()
	}
	cg, err := s.cgroup()
	if err != nil || cg == nil {
		if err != nil {
			return err
		}
		return c.Start()
	}
	if fd, ok, err := cg.FD(); err != nil {
		return err
	} else if ok {
		c.SysProcAttr.UseCgroupFD, c.SysProcAttr.CgroupFD = true, fd
		err := c.Start()
		syscall.Close(fd)
		if err == nil {
			return nil
		}
		// A kernel without clone3 into a cgroup: the wrapper instead.
		c2 := exec.Command(c.Path, c.Args[1:]...)
		c2.Env, c2.Dir, c2.Stdin, c2.Stdout, c2.Stderr, c2.ExtraFiles = c.Env, c.Dir, c.Stdin, c.Stdout, c.Stderr, c.ExtraFiles
		c2.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
		*c = *c2 // c was never started: a fresh Cmd with its settings
	}
	w := cg.Wrap(c.Args)
	c.Path, c.Args = w[0], w
	return c.Start()
}

// shellProc finds and kills a running shell's command processes.
type shellProc struct {
	s   *Session // the handle that started it; what it reads is shared by every handle of the session
	pid int      // the shell (unconfined) or bwrap (confined) on the host

	init, sup, shell int // confined: host pids of the namespace's init, supervisor (0 if none; else init itself) and shell; 0 until found

	// Supervised shells only:
	ctl  *os.File   // the supervisor's fd 3
	snap *fsSnap    // the sandbox's own file systems when it started
	host *procState // the shell's process when new; nil = no refresh in place
	supv *procState // the supervisor's process when it started; nil = the sandbox is not reused
	ipc  *ipcFiles  // the sandbox's System V IPC objects, when the driver checks them (Session.hostIPC)

	shellFiles, supFiles procFiles // the /proc files host and supv are read from again
	pidsCurrent          keptFile  // the session cgroup's task count (onlyKnown)
}

// ready runs once a supervised shell printed its ready marker: bwrap has
// set the sandbox up, no command has run. It finds the supervisor and
// snapshots the sandbox's own file systems (see pool.go). Where that is not
// possible (no access to the sandbox's /proc/<pid>/root) the session works
// the same but is not pooled: its reset fails without a snapshot.
func (p *shellProc) ready() error {
	if p.find() != nil {
		return nil
	}
	if sv, err := readSupervisorState(&p.supFiles, p.sup); err == nil {
		p.supv = sv
	} else {
		return nil // not pooled: its reset fails without the supervisor's state
	}
	if sn, err := snapshot(p.sup); err == nil {
		p.snap = sn
	}
	if h, err := p.shellFiles.state(p.shell, withFDs); err == nil && p.maskShellMem() == nil {
		p.host = h // refreshed in place only when its memory is out of reach (guard.go)
	}
	if p.s.hostIPC && p.host != nil {
		if f, err := openIPC(p.sup); err == nil {
			p.ipc = f
		} else {
			p.host = nil // the state report leaves the objects out: not refreshed in place
		}
	}
	return nil
}

// find looks up the host pids of init, the supervisor (when the session has
// one) and the shell.
func (p *shellProc) find() error {
	if p.init == 0 {
		p.init = childOf(p.pid)
	}
	super := p.s.supervised()
	if p.init > 0 && super && p.sup == 0 {
		p.sup = p.init // the supervisor is the namespace's init
	}
	if p.init > 0 {
		p.shell = p.liveChild()
	}
	if p.shell == 0 {
		return fmt.Errorf("local sandbox: the session's shell is not running")
	}
	return nil
}

// liveChild is liveChildOf(p.init), for a supervised shell through the
// kept /proc files of the supervisor (its children) and of the shell (its
// stat), which a reset reads anyway.
func (p *shellProc) liveChild() int {
	if p.sup == 0 || p.sup != p.init {
		return liveChildOf(p.init)
	}
	b, err := p.supFiles.file(p.sup, "task/"+strconv.Itoa(p.sup)+"/children")
	if err != nil {
		return liveChildOf(p.init)
	}
	return firstLive(b, func(c int) (procInfo, bool) {
		if c == 0 || c != p.shell {
			return readStat(c)
		}
		sb, err := p.shellFiles.file(c, "stat")
		if err != nil {
			return procInfo{}, false
		}
		return parseStat(c, sb)
	})
}

// kill ends the sandbox (bwrap) and closes the supervisor's pipe.
func (p *shellProc) kill() {
	p.s.kill(p.pid)
	if p.ctl != nil {
		p.ctl.Close()
	}
	p.closeKept()
}

// closeKept closes what the driver keeps open of the sandbox's processes
// and files; safe more than once.
func (p *shellProc) closeKept() {
	p.snap.close()
	p.ipc.close()
	p.shellFiles.close()
	p.supFiles.close()
	p.pidsCurrent.close()
}

// killCommand kills every process of the session but the shell (and, when
// confined, bwrap and its init).
func (p *shellProc) killCommand() error {
	if p.s.bwrap == "" {
		sweep(p.pid, p.s.marker, p.pid) // all but the shell, which leads the group
		return nil
	}
	if p.shell == 0 {
		if err := p.find(); err != nil {
			return err
		}
	}
	if cg := p.s.cgroupIfAny(); cg != nil {
		return cg.KillAll(p.pid, p.init, p.sup, p.shell)
	}
	ns, err := os.Readlink("/proc/" + strconv.Itoa(p.shell) + "/ns/pid")
	if err != nil {
		return fmt.Errorf("local sandbox: the session's shell: %w", err)
	}
	for range 20 {
		found := 0
		for _, pid := range pids() {
			if pid == p.init || pid == p.sup || pid == p.shell {
				continue
			}
			if l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid"); err == nil && l == ns && syscall.Kill(pid, syscall.SIGKILL) == nil {
				found++
			}
		}
		if found == 0 {
			return nil
		}
	}
	return nil
}

// childOf returns the first process found whose parent is pid, 0 if none.
// It reads the kernel's list of pid's children, else sweeps /proc.
func childOf(pid int) int {
	if b, err := confine.ReadKernelFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children"); err == nil {
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0
		}
		c, _ := strconv.Atoi(f[0])
		return c
	}
	for _, c := range pids() {
		if st, ok := readStat(c); ok && st.ppid == pid {
			return c
		}
	}
	return 0
}

func isBash(path string) bool { return filepath.Base(path) == "bash" }
