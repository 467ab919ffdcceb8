package ssh

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// sshdBinary is the server the tests run; they skip only when it is absent,
// and fail instead when CI is set.
const sshdBinary = "/usr/sbin/sshd"

// server is a running test sshd described by the env file scripts/sshd.sh
// writes.
type server struct {
	Addr, User, Key, KnownHosts string
	dir                         string // the script's folder
}

// options returns Options that reach the server strictly, without an agent.
func (s server) options() Options {
	return Options{
		Addr:       s.Addr,
		User:       s.User,
		KeyFiles:   []string{s.Key},
		KnownHosts: []string{s.KnownHosts},
		NoAgent:    true,
	}
}

var (
	sharedOnce   sync.Once
	sharedServer server
	sharedErr    error
)

// requireSSHD skips the test when sshd is not installed (fails under CI).
func requireSSHD(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(sshdBinary); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s missing and CI is set: the ssh sandbox tests must run in CI", sshdBinary)
		}
		t.Skipf("%s not installed", sshdBinary)
	}
}

// sharedSSHD returns the test server most tests share: the one whose env
// file exists (default /tmp/hermes-pipe-sshd/env, or HERMES_TEST_SSH_ENV),
// or one started with scripts/sshd.sh when there is none. A server this
// package starts is left running for later test runs; `scripts/sshd.sh stop`
// stops it.
func sharedSSHD(t testing.TB) server {
	t.Helper()
	requireSSHD(t)
	sharedOnce.Do(func() {
		envFile := os.Getenv("HERMES_TEST_SSH_ENV")
		if envFile == "" {
			envFile = "/tmp/hermes-pipe-sshd/env"
		}
		if s, err := readEnvFile(envFile); err == nil && reachable(s.Addr) {
			sharedServer = s
			return
		}
		sharedServer, sharedErr = startSSHD(filepath.Dir(envFile), "")
	})
	if sharedErr != nil {
		t.Fatalf("start test sshd: %v", sharedErr)
	}
	return sharedServer
}

// privateSSHD starts a server of the test's own on a free port, for tests
// that stop or disrupt it, and stops it by pid when the test ends.
func privateSSHD(t *testing.T) server {
	t.Helper()
	requireSSHD(t)
	parent, err := os.MkdirTemp("", "hermes-sshd-test-")
	if err != nil {
		t.Fatal(err)
	}
	// sshd reads authorized_keys as the test user: the folders must be
	// traversable by it.
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	dir := filepath.Join(parent, "sshd")
	s, err := startSSHD(dir, port)
	t.Cleanup(func() {
		stopSSHD(t, dir)
		os.RemoveAll(parent)
	})
	if err != nil {
		t.Fatalf("start private sshd: %v", err)
	}
	return s
}

// startSSHD runs scripts/sshd.sh start with dir (and port when not "") and
// reads the env file it writes.
func startSSHD(dir, port string) (server, error) {
	cmd := exec.Command("sh", scriptPath(), "start")
	cmd.Env = append(os.Environ(), "HERMES_SSHD_DIR="+dir)
	if port != "" {
		cmd.Env = append(cmd.Env, "HERMES_SSHD_PORT="+port)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return server{}, &scriptError{err: err, out: string(out)}
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return readEnvFile(lines[len(lines)-1])
}

// stopSSHD runs scripts/sshd.sh stop for dir; the script kills by pid.
func stopSSHD(t *testing.T, dir string) {
	cmd := exec.Command("sh", scriptPath(), "stop")
	cmd.Env = append(os.Environ(), "HERMES_SSHD_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("sshd.sh stop: %v\n%s", err, out)
	}
}

type scriptError struct {
	err error
	out string
}

func (e *scriptError) Error() string { return "scripts/sshd.sh: " + e.err.Error() + ": " + e.out }

func scriptPath() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..", "scripts", "sshd.sh")
}

func readEnvFile(name string) (server, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return server{}, err
	}
	s := server{dir: filepath.Dir(name)}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		switch k {
		case "HERMES_TEST_SSH_ADDR":
			s.Addr = v
		case "HERMES_TEST_SSH_USER":
			s.User = v
		case "HERMES_TEST_SSH_KEY":
			s.Key = v
		case "HERMES_TEST_SSH_KNOWN_HOSTS":
			s.KnownHosts = v
		}
	}
	if s.Addr == "" || s.User == "" || s.Key == "" || s.KnownHosts == "" {
		return server{}, &scriptError{err: os.ErrInvalid, out: "incomplete env file " + name}
	}
	return s, nil
}

func reachable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// pid returns the listener pid of the server.
func (s server) pid(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, "sshd.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// killConnections kills, by pid, every process the server forked (the
// per-connection monitors, their unprivileged children and the commands they
// run), which drops every connection to it. It returns how many it killed.
func (s server) killConnections(t *testing.T) int {
	return len(s.signalConnections(t, syscall.SIGKILL))
}

// signalConnections sends sig to every process the server forked, by pid,
// and returns the pids signalled.
func (s server) signalConnections(t *testing.T, sig syscall.Signal) []int {
	t.Helper()
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+2:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], pid)
	}
	var done []int
	todo := append([]int(nil), children[s.pid(t)]...)
	for len(todo) > 0 {
		pid := todo[0]
		todo = append(todo[1:], children[pid]...)
		if syscall.Kill(pid, sig) == nil {
			done = append(done, pid)
		}
	}
	return done
}

// newDriver builds a Driver from o and releases it when the test ends.
func newDriver(t testing.TB, o Options) *Driver {
	t.Helper()
	d, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Release() })
	return d
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
