package local

import (
	"bytes"
	"os"
	"strconv"
	"syscall"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
)

// procInfo is what killTree and the shell need from /proc/<pid>/stat.
type procInfo struct {
	pid, ppid, pgid, sid int
	zombie               bool
}

// readStat parses /proc/<pid>/stat; ok is false when the process is gone.
func readStat(pid int) (procInfo, bool) {
	b, err := confine.ReadKernelFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	return parseStat(pid, b)
}

// parseStat parses the /proc/<pid>/stat line b.
func parseStat(pid int, b []byte) (procInfo, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procInfo{}, false
	}
	f := bytes.Fields(b[i+2:]) // state ppid pgrp session ...
	if len(f) < 4 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(string(f[1]))
	pgid, _ := strconv.Atoi(string(f[2]))
	sid, _ := strconv.Atoi(string(f[3]))
	return procInfo{pid: pid, ppid: ppid, pgid: pgid, sid: sid, zombie: f[0][0] == 'Z' || f[0][0] == 'X'}, true
}

// hasMarker reports whether the process environment carries sandbox.MarkerVar with a
// value starting with prefix.
func hasMarker(pid int, prefix string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	needle := []byte(sandbox.MarkerVar + "=" + prefix)
	for _, kv := range bytes.Split(b, []byte{0}) {
		if bytes.HasPrefix(kv, needle) {
			return true
		}
	}
	return false
}

// pids lists the numeric entries of /proc.
func pids() []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	out := make([]int, 0, len(names))
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' {
			continue
		}
		if pid, err := strconv.Atoi(n); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// member reports whether pid is a live (non-zombie) process in the process
// group or session leaderPID leads (leaderPID <= 0: none) or carrying the
// marker prefix (prefix "": none). A marker-only check reads environ first:
// one file for each process that is not the session's.
func member(pid, leaderPID int, prefix string) bool {
	if leaderPID <= 0 {
		if prefix == "" || !hasMarker(pid, prefix) {
			return false
		}
		st, ok := readStat(pid)
		return ok && !st.zombie
	}
	st, ok := readStat(pid)
	if !ok || st.zombie {
		return false
	}
	return st.pgid == leaderPID || st.sid == leaderPID || prefix != "" && hasMarker(pid, prefix)
}

// killTree sends SIGKILL to the process group and session leaderPID leads
// (leaderPID <= 0: none) and to every live process whose environment carries
// the marker prefix (prefix "": none), repeating until none is left or
// rounds run out. It returns how many processes it signalled. It reads /proc
// once per round, a few milliseconds on a busy machine.
func killTree(leaderPID int, prefix string) int {
	if leaderPID > 0 {
		_ = syscall.Kill(-leaderPID, syscall.SIGKILL)
	}
	return sweep(leaderPID, prefix, 0)
}

// sweep is killTree's /proc part: it kills the members (see member) of the
// group and session leaderPID leads or carrying the marker prefix, except
// keep (0: none), in rounds until none is left.
func sweep(leaderPID int, prefix string, keep int) int {
	self := os.Getpid()
	n := 0
	for range 20 {
		found := 0
		for _, pid := range pids() {
			if pid != self && pid != 1 && pid != keep && member(pid, leaderPID, prefix) && syscall.Kill(pid, syscall.SIGKILL) == nil {
				found++
			}
		}
		n += found
		if found == 0 {
			return n
		}
	}
	return n
}
