// Command tracer is the escape battery's probe of other processes of a
// sandbox (Escape/TraceSupervisor): for each pid given it tries what a
// hostile row would to read or rewrite another process, and prints one
// line per attempt, "<what> <pid> ok" or "<what> <pid> <error>":
//
//	ptrace  PTRACE_ATTACH (detached again at once on success)
//	vmread  process_vm_readv of 16 bytes at the first readable mapping
//	mem     open /proc/<pid>/mem and read 16 bytes at that mapping
//	memw    open /proc/<pid>/mem for writing
//
// A pid of 0 (a parent outside the sandbox's PID namespace) is skipped. It
// is built static (CGO_ENABLED=0) so that it runs in any image.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

func main() {
	for _, a := range os.Args[1:] {
		pid, err := strconv.Atoi(a)
		if err != nil || pid <= 0 {
			fmt.Printf("skip %s\n", a)
			continue
		}
		addr := firstMapping(pid)
		report("ptrace", pid, ptrace(pid))
		report("vmread", pid, vmread(pid, addr))
		report("mem", pid, readMem(pid, addr))
		report("memw", pid, openMemWrite(pid))
	}
}

func report(what string, pid int, err error) {
	if err == nil {
		fmt.Printf("%s %d ok\n", what, pid)
		return
	}
	fmt.Printf("%s %d %v\n", what, pid, err)
}

func ptrace(pid int) error {
	if err := syscall.PtraceAttach(pid); err != nil {
		return err
	}
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(pid, &ws, syscall.WALL, nil)
	_ = syscall.PtraceDetach(pid)
	return nil
}

// firstMapping returns the start of the first readable mapping of pid from
// its maps, or a usual text address when they cannot be read.
func firstMapping(pid int) uintptr {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return 0x400000
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || !strings.HasPrefix(fields[1], "r") {
			continue
		}
		start, _, _ := strings.Cut(fields[0], "-")
		if v, err := strconv.ParseUint(start, 16, 64); err == nil {
			return uintptr(v)
		}
	}
	return 0x400000
}

func vmread(pid int, addr uintptr) error {
	buf := make([]byte, 16)
	local := []unix.Iovec{{Base: &buf[0]}}
	local[0].SetLen(len(buf))
	remote := []unix.RemoteIovec{{Base: addr, Len: len(buf)}}
	n, err := unix.ProcessVMReadv(pid, local, remote, 0)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("read nothing")
	}
	return nil
}

func readMem(pid int, addr uintptr) error {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mem")
	if err != nil {
		return unwrap(err)
	}
	defer f.Close()
	buf := make([]byte, 16)
	n, err := f.ReadAt(buf, int64(addr))
	if n == 0 {
		if err == nil {
			err = fmt.Errorf("read nothing")
		}
		return unwrap(err)
	}
	return nil
}

func openMemWrite(pid int) error {
	f, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/mem", os.O_WRONLY, 0)
	if err != nil {
		return unwrap(err)
	}
	f.Close()
	return nil
}

// unwrap gives the system call's error alone (its name, e.g. "permission
// denied"), not the path.
func unwrap(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
