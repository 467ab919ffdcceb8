package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// The persistent shell mode (the default) runs one shell per session and
// writes every command to it (sandbox.Shell). Confined, the shell is the
// command of one bubblewrap: host pid P (bwrap) → P1 (bwrap's init, pid 1
// of the session's PID namespace) → P2 (the shell, pid 2). Unconfined, the
// shell leads its own process group and session.

// startShell starts the session's shell and returns it as a
// sandbox.ShellProc. The pipes are plain os.Pipe ends handed to the child,
// so no copying goroutine stands between the shell and the reader.
func (s *Session) startShell(context.Context) (*sandbox.ShellProc, error) {
	argv := []string{s.shell}
	if isBash(s.shell) {
		argv = append(argv, "--noprofile", "--norc")
	}
	c := exec.Command(argv[0], argv[1:]...)
	c.Dir = s.cwd
	c.Env = s.env
	if s.bwrap != "" {
		args, err := s.policy.Args(s.bwrap, argv)
		if err != nil {
			return nil, err
		}
		if s.cg != nil {
			args = s.cg.Wrap(args)
		}
		c = exec.Command(args[0], args[1:]...)
		c.Env = s.hostEnv
		c.Dir = s.dir
	}
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
	c.Stdin, c.Stdout, c.Stderr = inR, outW, errW
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		closeAll()
		return nil, err
	}
	inR.Close()
	outW.Close()
	errW.Close()
	pid := c.Process.Pid
	s.smu.Lock()
	s.ran = true
	s.smu.Unlock()

	p := &shellProc{s: s, pid: pid}
	var killOnce sync.Once
	return &sandbox.ShellProc{
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
					_ = syscall.Kill(-pid, syscall.SIGKILL)
				} else {
					s.kill(pid)
				}
				inW.Close()
			})
		},
	}, nil
}

// shellProc finds and kills a running shell's command processes.
type shellProc struct {
	s   *Session
	pid int // the shell (unconfined) or bwrap (confined) on the host

	init, shell int // confined: host pids of the namespace's init and shell; 0 until found
}

// killCommand kills every process of the session but the shell (and, when
// confined, bwrap and its init).
func (p *shellProc) killCommand() error {
	if p.s.bwrap == "" {
		sweep(p.pid, p.s.marker, p.pid) // all but the shell, which leads the group
		return nil
	}
	if p.shell == 0 {
		p.init = childOf(p.pid)
		if p.init > 0 {
			p.shell = childOf(p.init)
		}
		if p.shell == 0 {
			return fmt.Errorf("local sandbox: the session's shell is not running")
		}
	}
	if p.s.cg != nil {
		return p.s.cg.KillAll(p.pid, p.init, p.shell)
	}
	ns, err := os.Readlink("/proc/" + strconv.Itoa(p.shell) + "/ns/pid")
	if err != nil {
		return fmt.Errorf("local sandbox: the session's shell: %w", err)
	}
	for range 20 {
		found := 0
		for _, pid := range pids() {
			if pid == p.init || pid == p.shell {
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
func childOf(pid int) int {
	for _, c := range pids() {
		if st, ok := readStat(c); ok && st.ppid == pid {
			return c
		}
	}
	return 0
}

func isBash(path string) bool { return filepath.Base(path) == "bash" }
