package dockertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// DefaultImage is the busybox image scripts/dockerd.sh builds.
const DefaultImage = "hermes-pipe-test/busybox:latest"

// Image returns the test image name: HERMES_TEST_IMAGE or DefaultImage.
func Image() string {
	if v := os.Getenv("HERMES_TEST_IMAGE"); v != "" {
		return v
	}
	return DefaultImage
}

// DefaultBashImage is the image scripts/dockerd.sh builds with bash as sh.
const DefaultBashImage = "hermes-pipe-test/bash:latest"

// BashImage returns the bash test image name: HERMES_TEST_BASH_IMAGE or
// DefaultBashImage.
func BashImage() string {
	if v := os.Getenv("HERMES_TEST_BASH_IMAGE"); v != "" {
		return v
	}
	return DefaultBashImage
}

var (
	once     sync.Once
	onceErr  error
	skipWhy  string
	userLock *os.File
)

// stateDir is where scripts/dockerd.sh keeps its state and we keep the lock.
func stateDir() string {
	if v := os.Getenv("HERMES_DOCKERD_DIR"); v != "" {
		return v
	}
	return "/tmp/hermes-dockerd"
}

// script returns the path of scripts/dockerd.sh, found from this file.
func script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "scripts", "dockerd.sh")
}

func ping(ctx context.Context) error {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return err
	}
	defer cli.Close()
	_, err = cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	return err
}

func setup() {
	if _, err := exec.LookPath("dockerd"); err != nil {
		skipWhy = "dockerd not installed"
		return
	}
	dir := stateDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		onceErr = err
		return
	}
	// Every test process holds a shared lock while it may use the daemon.
	f, err := os.OpenFile(filepath.Join(dir, "users.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		onceErr = err
		return
	}
	userLock = f
	// Starting is serialized by an exclusive lock on a second file.
	sl, err := os.OpenFile(filepath.Join(dir, "start.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		onceErr = err
		return
	}
	defer sl.Close()
	if err := syscall.Flock(int(sl.Fd()), syscall.LOCK_EX); err != nil {
		onceErr = err
		return
	}
	defer syscall.Flock(int(sl.Fd()), syscall.LOCK_UN)
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		onceErr = err
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	started := false // this process starts dockerd; the last user stops it
	if ping(ctx) != nil {
		if _, err := os.Stat(filepath.Join(dir, "dockerd.pid")); err != nil {
			started = true
		}
	}
	// The script is idempotent: it starts dockerd only when none answers,
	// and builds the test image when it is missing.
	out, err := exec.Command("bash", script(), "start").CombinedOutput()
	if err != nil {
		onceErr = fmt.Errorf("scripts/dockerd.sh start: %v\n%s", err, out)
		return
	}
	if started {
		_ = os.WriteFile(filepath.Join(dir, "started-by-tests"), nil, 0o600)
	}
}

// Require returns once a daemon answers and the test images exist, starting
// dockerd through scripts/dockerd.sh when needed. It skips t when dockerd is
// not installed, except under CI where it fails t.
func Require(t testing.TB) {
	t.Helper()
	once.Do(setup)
	if skipWhy != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("docker tests cannot run under CI: %s", skipWhy)
		}
		t.Skip(skipWhy)
	}
	if onceErr != nil {
		t.Fatalf("docker daemon for tests: %v", onceErr)
	}
}

// Done is called from TestMain after m.Run. When the daemon was started by a
// test process and no other test process holds it any more, it stops it by
// pid through scripts/dockerd.sh stop.
func Done() {
	if userLock == nil {
		return
	}
	dir := stateDir()
	marker := filepath.Join(dir, "started-by-tests")
	_ = syscall.Flock(int(userLock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(marker); err == nil {
		if syscall.Flock(int(userLock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			_ = exec.Command("bash", script(), "stop").Run()
			_ = os.Remove(marker)
		}
	}
	userLock.Close()
	userLock = nil
}
