package local

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// TestConfinedTimeoutLeavesNoProcess: a command that started a background
// sleep and one that left its session with setsid, then timed out, leaves
// only the session's shell alive, and Close leaves nothing: the PID
// namespace dies with the bwrap process.
func TestConfinedTimeoutLeavesNoProcess(t *testing.T) {
	s := open(t, sandbox.Config{}, sandbox.Spec{})
	if s.bwrap == "" {
		t.Fatal("session not confined")
	}
	done := make(chan sandbox.Result, 1)
	go func() {
		res, _ := s.Exec(context.Background(), sandbox.Cmd{
			Command: "sleep 1000 & (setsid env -i sleep 1004 &); sleep 600", Timeout: 20 * time.Second})
		done <- res
	}()
	// Both sleeps and the foreground one are seen by their marker first.
	for deadline := time.Now().Add(30 * time.Second); countSleeps(s.Marker()) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sleeps never started: %v", alive(0, s.Marker()))
		}
	}
	res := <-done
	if !res.TimedOut || res.ExitCode != 124 {
		t.Fatalf("got %+v", res)
	}
	// The persistent shell (and bubblewrap around it) stays; no sleep does.
	for deadline := time.Now().Add(30 * time.Second); countSleeps(s.Marker()) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sleeps of the session survived the timeout: %v", alive(0, s.Marker()))
		}
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p := waitNone(0, s.Marker()); len(p) > 0 {
		t.Errorf("processes %v of the session survived Close", p)
	}
}

// countSleeps counts live "sleep" processes carrying marker.
func countSleeps(marker string) int {
	n := 0
	for _, pid := range alive(0, marker) {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		if strings.TrimSpace(string(b)) == "sleep" {
			n++
		}
	}
	return n
}

// TestConfinedView checks what a confined command sees and may touch.
func TestConfinedView(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := open(t, sandbox.Config{}, sandbox.Spec{})
	res := exec1(t, s, "cat "+secret+" 2>&1; echo x > "+outside+"/w 2>&1; ls /root 2>&1; cat /proc/1/environ | tr '\\0' '\\n' | grep -c OPENAI; echo pid $$", 0)
	if strings.Contains(res.Stdout, "SECRET") {
		t.Errorf("confined command read a file outside its mounts: %q", res.Stdout)
	}
	if _, err := os.Stat(filepath.Join(outside, "w")); err == nil {
		t.Errorf("confined command wrote outside its session folder")
	}
	// Files see what commands see: the same secret is unreachable, and a
	// planted link to it is refused.
	if _, _, err := s.ReadRange(context.Background(), secret, 0, 100); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadRange(%s): %v, want not-exist", secret, err)
	}
	exec1(t, s, "ln -s "+secret+" k; ln -s /tmp/t tl; echo in-tmp > /tmp/t", 0)
	if b, _, err := s.ReadRange(context.Background(), "k", 0, 100); err == nil || strings.Contains(string(b), "SECRET") {
		t.Errorf("ReadRange through planted link: %q, %v", b, err)
	}
	// The link's target, in the sandbox's view, is under the private /tmp:
	// a write through it may land there, never on the host file.
	_ = s.WriteFile(context.Background(), "k", []byte("x"), 0o600)
	if b, err := os.ReadFile(secret); err != nil || string(b) != "SECRET" {
		t.Errorf("secret changed: %q, %v", b, err)
	}
	if b, _, err := s.ReadRange(context.Background(), "tl", 0, 100); err != nil || string(b) != "in-tmp\n" {
		t.Errorf("ReadRange through a link into the private /tmp: %q, %v", b, err)
	}
	if err := s.WriteFile(context.Background(), "/usr/hermes-x", []byte("x"), 0o600); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("WriteFile(/usr/hermes-x): %v, want permission", err)
	}
	if err := s.WriteFile(context.Background(), "/tmp/from-host", []byte("h"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := exec1(t, s, "cat /tmp/from-host", 0); r.Stdout != "h" {
		t.Errorf("file written to /tmp not seen by commands: %q", r.Stdout)
	}
}

// TestUnavailableNamesOptOut: with no bwrap on PATH, New succeeds (its
// probe runs in the background) but Preflight and Open refuse, naming the
// opt-out, and nothing opens; Isolation "none" still opens.
func TestUnavailableNamesOptOut(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	bash, err := exec.LookPath("/bin/bash")
	if err != nil {
		t.Skip("no /bin/bash")
	}
	base := t.TempDir()
	d, err := New(sandbox.Config{Local: sandbox.LocalConfig{BaseDir: base, Shell: bash}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := d.Preflight(context.Background()); err == nil || !strings.Contains(err.Error(), optOut) || !strings.Contains(err.Error(), "bwrap") {
		t.Errorf("Preflight without bwrap: %v", err)
	}
	if s, err := d.Open(context.Background(), sandbox.Spec{}); err == nil || !strings.Contains(err.Error(), optOut) {
		t.Errorf("Open without bwrap: %v, %v", s, err)
	}
	if d.Confined() {
		t.Error("Confined without bwrap")
	}
	if ents, _ := os.ReadDir(base); len(ents) != 0 {
		t.Errorf("base folder holds %d entries after a refused Open", len(ents))
	}
	if _, err := New(sandbox.Config{Local: sandbox.LocalConfig{BaseDir: t.TempDir(), Shell: bash, Isolation: "none"}}); err != nil {
		t.Errorf("Isolation none: %v", err)
	}
	if _, err := New(sandbox.Config{Local: sandbox.LocalConfig{Isolation: "chroot"}}); err == nil {
		t.Errorf("isolation chroot accepted")
	}
}

// TestConfinedProcessLimit: with a process limit, a command starting many
// sleeps gets at most that many processes, root included.
func TestConfinedProcessLimit(t *testing.T) {
	s := open(t, sandbox.Config{Local: sandbox.LocalConfig{Limits: sandbox.LocalLimits{Processes: 30}}}, sandbox.Spec{})
	cg, err := s.cgroup() // created here rather than with the first process
	if err != nil {
		t.Fatal(err)
	}
	if cg == nil {
		t.Skip("no usable cgroup here; the limit is an rlimit")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = s.Exec(context.Background(), sandbox.Cmd{Command: `for i in $(seq 100); do sleep 600 </dev/null >/dev/null 2>&1 & done 2>/dev/null; sleep 600`, Timeout: 30 * time.Second})
	}()
	most := 0
	for deadline := time.Now().Add(60 * time.Second); most < 25; time.Sleep(10 * time.Millisecond) {
		most = max(most, len(cg.Procs()))
		if time.Now().After(deadline) {
			t.Fatalf("at most %d processes ever ran in the session", most)
		}
	}
	for {
		most = max(most, len(cg.Procs()))
		select {
		case <-done:
		case <-time.After(50 * time.Millisecond):
			continue
		}
		break
	}
	if most > 30 {
		t.Errorf("%d processes in the session with a limit of 30", most)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p := waitNone(0, s.Marker()); len(p) > 0 {
		t.Errorf("processes %v alive after close", p)
	}
}
