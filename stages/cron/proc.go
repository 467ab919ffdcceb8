package cron

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// processOwner identifies this process in the ledger: host, pid and the
// process start time (so a reused pid is not mistaken for the original).
// It is read at its first use, not at start-up.
var processOwner = sync.OnceValue(func() string {
	host, _ := os.Hostname()
	pid := os.Getpid()
	return fmt.Sprintf("%s/%d/%s", host, pid, procStart(pid))
})

// procStart reads a process's start time in clock ticks since boot from
// /proc (Linux); elsewhere it returns "" and only the pid is compared.
func procStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	// fields after the command: state(0) ppid(1) ... starttime is field 22 of
	// the full line, index 19 here.
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// ownerAlive reports whether the process that wrote owner is still running.
// Owners on another host cannot be checked and count as alive.
func ownerAlive(owner string) bool {
	if owner == processOwner() {
		return true
	}
	parts := strings.Split(owner, "/")
	if len(parts) != 3 {
		return false
	}
	host, _ := os.Hostname()
	if parts[0] != host {
		return true
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	// A different or unreadable start time: the pid was reused, or the
	// process is gone.
	return parts[2] == "" || procStart(pid) == parts[2]
}
