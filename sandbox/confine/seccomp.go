package confine

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"sync"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Every confined command runs under a seccomp filter that bubblewrap
// installs after its own setup (`--seccomp FD`), so namespaces and mounts
// are made before it applies. The filter allows every system call but the
// ones a sandboxed agent never needs and that reach other processes or the
// kernel's global state: tracing or reading another process (ptrace,
// process_vm_readv/writev, pidfd_getfd, kcmp, process_madvise), key rings,
// eBPF, perf events, userfaultfd, io_uring, mounts, new namespaces (unshare,
// setns, clone with a namespace flag; clone3, whose flags a filter cannot
// read, answers ENOSYS so that libc falls back to clone), kexec, kernel
// modules, reboot, swap, accounting, quotas, file handles, port I/O and
// personality changes beyond the ordinary ones. Denied calls fail with
// EPERM. System calls of another ABI (i386 through int 0x80, x32) fail
// with ENOSYS: the deny list is written for the native one.

// SeccompDenied are the system calls the filter refuses with EPERM (those
// the machine's table does not know are left out).
var SeccompDenied = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp", "process_madvise",
	"keyctl", "add_key", "request_key",
	"bpf", "perf_event_open", "userfaultfd",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	"unshare", "setns",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
	"name_to_handle_at", "open_by_handle_at", "lookup_dcookie",
	"iopl", "ioperm", "uselib", "syslog", "vhangup",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
}

// cloneNamespaceFlags are clone's flags that create namespaces.
var cloneNamespaceFlags = []uint64{
	unix.CLONE_NEWNS, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER,
	unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWCGROUP, unix.CLONE_NEWTIME,
}

// personalityAllowed are the personality values a confined command may set
// (docker's default profile allows the same): Linux, Linux32, UNAME26 with
// either, and the query.
var personalityAllowed = []uint64{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// Seccomp returns the filter every confined command runs under, as the
// compiled classic BPF program bubblewrap's --seccomp reads (struct
// sock_filter entries in this machine's byte order). It is built once per
// process and the same bytes are returned to every caller (who must not
// change them).
func Seccomp() ([]byte, error) { return seccompOnce() }

var seccompOnce = sync.OnceValues(func() ([]byte, error) {
	b, err := buildSeccomp()
	if err != nil {
		return nil, fmt.Errorf("confine: seccomp filter: %w", err)
	}
	return b, nil
})

// SeccompArch is the architecture the filter is built for, as `uname -m`
// prints it: a remote host (Layout) must be the same.
func SeccompArch() string {
	a, err := arch.GetInfo("")
	if err != nil {
		return runtime.GOARCH
	}
	return a.Name
}

func buildSeccomp() ([]byte, error) {
	a, err := arch.GetInfo("")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range SeccompDenied {
		if _, ok := a.SyscallNames[n]; ok {
			names = append(names, n)
		}
	}
	var clone []seccomp.NameWithConditions
	if _, ok := a.SyscallNames["clone"]; ok {
		// Flags are clone's first argument on x86_64 and arm64 alike.
		for _, f := range cloneNamespaceFlags {
			clone = append(clone, seccomp.NameWithConditions{Name: "clone",
				Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: f}}})
		}
	}
	var pers []seccomp.Condition
	for _, v := range personalityAllowed {
		pers = append(pers, seccomp.Condition{Argument: 0, Operation: seccomp.NotEqual, Value: v})
	}
	groups := []seccomp.SyscallGroup{
		{Names: names, NamesWithCondtions: clone, Action: seccomp.ActionErrno},
		{NamesWithCondtions: []seccomp.NameWithConditions{{Name: "personality", Conditions: pers}}, Action: seccomp.ActionErrno},
	}
	if _, ok := a.SyscallNames["clone3"]; ok {
		groups = append(groups, seccomp.SyscallGroup{Names: []string{"clone3"}, Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)})
	}
	pol := seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: groups}
	prog, err := pol.Assemble()
	if err != nil {
		return nil, err
	}
	// The library lets system calls of another architecture through (its
	// jump for them goes to the default action): those fail here first.
	prog = append([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(a.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionErrno) | uint32(unix.ENOSYS)},
	}, prog...)
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, err
	}
	if len(raw) > 4096 {
		return nil, fmt.Errorf("%d instructions, more than the kernel takes", len(raw))
	}
	out := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		out = binary.NativeEndian.AppendUint16(out, r.Op)
		out = append(out, r.Jt, r.Jf)
		out = binary.NativeEndian.AppendUint32(out, r.K)
	}
	return out, nil
}

// seccompFile returns a new descriptor bubblewrap reads the filter from
// (it reads to the end and closes it): the read end of a pipe holding it.
func seccompFile() (*os.File, error) {
	b, err := Seccomp()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("confine: seccomp filter: %w", err)
	}
	// A pipe holds 64 KiB; the filter is a few hundred bytes (at most
	// 32 KiB, the kernel's bound), so this write does not block.
	_, err = w.Write(b)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("confine: seccomp filter: %w", err)
	}
	return r, nil
}
