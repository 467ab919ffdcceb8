package sshtest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Env starts (or finds) the test sshd of scripts/sshd.sh and returns the
// settings of its env file (HERMES_SSH_HOST, HERMES_SSH_USER, ...). It skips
// t only when sshd is absent and CI is unset.
func Env(t testing.TB) map[string]string {
	t.Helper()
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI: /usr/sbin/sshd is missing")
		}
		t.Skip("sshd not installed")
	}
	out, err := exec.Command(script(), "start").CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/sshd.sh start: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	f, err := os.Open(strings.TrimPrefix(lines[len(lines)-1], "running: "))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "export "), "=")
		if ok {
			env[k] = strings.Trim(v, `"'`)
		}
	}
	return env
}

// script returns the path of scripts/sshd.sh, found from this file.
func script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "scripts", "sshd.sh")
}
