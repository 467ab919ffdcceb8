package local

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
	"golang.org/x/sys/unix"
)

// procState is what a row could change of its shell's process from inside
// that a refresh script cannot see or undo (sandbox.Shell.Refresh): the
// mask, signal dispositions, CPU set, capabilities, limits, OOM score,
// name, niceness and open file descriptors. The driver reads it on the host
// when the shell is new and again after a refresh; any difference means a
// new shell instead.
type procState struct {
	status, limits, oom, comm, nice string
	fds                             []string // "fd -> target"
}

// statusFields are the lines of /proc/<pid>/status kept in procState.
var statusFields = []string{"Umask:", "SigBlk:", "SigIgn:", "SigCgt:", "Cpus_allowed_list:", "Mems_allowed_list:",
	"NoNewPrivs:", "Seccomp:", "CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"}

func readProcState(pid int) (*procState, error) { return readProcStateFDs(pid, true) }

// readProcStateFDs is readProcState, with the descriptors only when fds.
func readProcStateFDs(pid int, fds bool) (*procState, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	read := func(name string) (string, error) {
		b, err := confine.ReadKernelFile(dir + name)
		return string(b), err
	}
	var st procState
	status, err := read("status")
	if err != nil {
		return nil, err
	}
	var keep []string
	for _, l := range strings.Split(status, "\n") {
		for _, f := range statusFields {
			if strings.HasPrefix(l, f) {
				keep = append(keep, l)
			}
		}
	}
	st.status = strings.Join(keep, "\n")
	if st.limits, err = read("limits"); err != nil {
		return nil, err
	}
	if st.oom, err = read("oom_score_adj"); err != nil {
		return nil, err
	}
	// The name is status's first line (comm, escaped), and the niceness
	// comes from getpriority(2): two files fewer to read per process.
	if name, _, ok := strings.Cut(status, "\n"); ok && strings.HasPrefix(name, "Name:") {
		st.comm = name
	} else {
		return nil, fmt.Errorf("/proc/%d/status: no name", pid)
	}
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, pid)
	if err != nil {
		return nil, err
	}
	st.nice = strconv.Itoa(prio)
	if !fds {
		st.fds = nil
		return &st, nil
	}
	ents, err := os.ReadDir(dir + "fd")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		t, err := os.Readlink(dir + "fd/" + e.Name())
		if err != nil {
			return nil, err
		}
		st.fds = append(st.fds, e.Name()+" -> "+t)
	}
	slices.Sort(st.fds)
	return &st, nil
}

// same checks that the session's shell, as the host sees it now, is as it
// was when new.
func (h *procState) same(p *shellProc) error {
	if err := p.find(); err != nil {
		return err
	}
	now, err := readProcState(p.shell)
	if err != nil {
		return err
	}
	return h.differs(now, "shell")
}

// differs reports how now differs from h, naming the process who.
func (h *procState) differs(now *procState, who string) error {
	switch {
	case now.status != h.status:
		return fmt.Errorf("the %s's status changed: %s", who, now.status)
	case now.limits != h.limits:
		return fmt.Errorf("the %s's limits changed", who)
	case now.oom != h.oom, now.comm != h.comm, now.nice != h.nice:
		return fmt.Errorf("the %s's OOM score, name or niceness changed", who)
	case !slices.Equal(now.fds, h.fds):
		return fmt.Errorf("the %s's file descriptors changed: %v", who, now.fds)
	}
	return nil
}
