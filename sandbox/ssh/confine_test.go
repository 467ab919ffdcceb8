package ssh

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// TestConfinedTimeoutLeavesNoProcess: a command that started a background
// job and a child that left its session with setsid and a clean
// environment, then timed out, leaves nothing alive on the host: the PID
// namespace dies with the bwrap process.
func TestConfinedTimeoutLeavesNoProcess(t *testing.T) {
	srv := sharedSSHD(t)
	d := newDriver(t, srv.options())
	s := open(t, d, sandbox.Spec{})
	if s.box == "" {
		t.Fatal("session not confined")
	}
	tag := "hermes-left-" + randomHex(6)
	checker := newDriver(t, unconfined(srv.options()))
	// [h] keeps the grep's own command line from matching.
	count := "grep -lsa " + sandbox.ShellQuote("[h]"+tag[1:]) + " /proc/[0-9]*/cmdline | wc -l"
	done := make(chan sandbox.Result, 1)
	go func() {
		res, _ := s.Exec(context.Background(), sandbox.Cmd{
			Command: "sh -c 'sleep 1000; :' " + tag + " & (setsid env -i sh -c 'sleep 1000; :' " + tag + " &); sleep 600",
			Timeout: 20 * time.Second})
		done <- res
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, err := checker.run(testCtx(t), count, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The two shells (and, with fresh shells, bwrap and the
		// command's shell, whose arguments hold the command).
		if n, _ := strconv.Atoi(strings.TrimSpace(out)); n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command's processes never showed up (%s)", out)
		}
	}
	if res := <-done; !res.TimedOut || res.ExitCode != 124 {
		t.Fatalf("got %+v", res)
	}
	var out string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var err error
		if out, err = checker.run(testCtx(t), count, nil); err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(out) == "0" {
			return
		}
	}
	t.Fatalf("%s processes of the timed-out command still run 30 s later", strings.TrimSpace(out))
}

// TestConfinedFiles: file operations see what commands see. A file the
// login may read outside the sandbox is not there for them, neither by its
// path nor through a link a command planted, and nothing is written
// outside the session's mounts.
func TestConfinedFiles(t *testing.T) {
	srv := sharedSSHD(t)
	// The remote login may read it: only confinement stops it.
	outside := openDir(t)
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	free := open(t, newDriver(t, unconfined(srv.options())), sandbox.Spec{})
	if b, _, err := free.ReadRange(ctx, secret, 0, 100); err != nil || string(b) != "SECRET" {
		t.Fatalf("unconfined: ReadRange(%s) = %q, %v: the test cannot show confinement", secret, b, err)
	}

	s := open(t, newDriver(t, srv.options()), sandbox.Spec{})
	if _, _, err := s.ReadRange(ctx, secret, 0, 100); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadRange(%s): %v, want not-exist", secret, err)
	}
	execOK(t, s, "ln -s "+sandbox.ShellQuote(secret)+" k; ln -s "+sandbox.ShellQuote(outside)+" dir")
	if b, _, err := s.ReadRange(ctx, "k", 0, 100); err == nil || strings.Contains(string(b), "SECRET") {
		t.Errorf("ReadRange through a planted link = %q, %v", b, err)
	}
	// Both land, if anywhere, in the sandbox's own /tmp.
	for _, p := range []string{filepath.Join(outside, "w"), "dir/w2"} {
		_ = s.WriteFile(ctx, p, []byte("x"), 0o644)
	}
	for _, name := range []string{"w", "w2"} {
		if _, err := os.Lstat(filepath.Join(outside, name)); err == nil {
			t.Errorf("a file operation created %s outside the session", name)
		}
	}
	if err := s.WriteFile(ctx, "/tmp/in-tmp", []byte("private"), 0o644); err != nil {
		t.Fatalf("WriteFile(/tmp/in-tmp): %v", err)
	}
	if res := execOK(t, s, "cat /tmp/in-tmp"); res.Stdout != "private" {
		t.Errorf("the command does not see the file written to its /tmp: %q", res.Stdout)
	}
}

// TestConfinedReadOnlyMount: Spec.ReadOnly folders are readable at their
// own paths and not writable; a missing one fails Open.
func TestConfinedReadOnlyMount(t *testing.T) {
	srv := sharedSSHD(t)
	src := openDir(t)
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("data"), 0o666); err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, srv.options())
	s := open(t, d, sandbox.Spec{ReadOnly: []string{src}})
	q := sandbox.ShellQuote(src)
	res := execOK(t, s, "cat "+q+"/f; echo; echo x >"+q+"/f 2>/dev/null && echo wrote; touch "+q+"/g 2>/dev/null && echo created; true")
	if res.Stdout != "data\n" {
		t.Errorf("got %q, want the file's data and no write", res.Stdout)
	}
	_, err := d.Open(testCtx(t), sandbox.Spec{ReadOnly: []string{filepath.Join(src, "missing")}})
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Open with a missing read-only folder: %v", err)
	}
}

// TestConfinementUnavailable: a host without bubblewrap, or whose
// bubblewrap cannot run, makes Open and Preflight fail naming the host, the
// reason and the opt-out; nothing runs unconfined.
func TestConfinementUnavailable(t *testing.T) {
	srv := sharedSSHD(t)
	for name, want := range map[string]string{
		"hermes-no-such-bwrap": "bubblewrap (bwrap) is not on the remote PATH",
		"/bin/false":           "/bin/false cannot run a command in fresh namespaces there",
	} {
		t.Run(name, func(t *testing.T) {
			d := newDriver(t, srv.options())
			d.bwrapName = name
			_, err := d.Open(testCtx(t), sandbox.Spec{})
			if err == nil {
				t.Fatal("Open succeeded")
			}
			for _, w := range []string{srv.Addr, want, optOut} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if errors.Is(err, sandbox.ErrUnavailable) {
				t.Errorf("error %q is marked retryable", err)
			}
			if err := d.Preflight(testCtx(t)); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Preflight: %v", err)
			}
		})
	}
}

func TestOptionsIsolation(t *testing.T) {
	for _, tc := range []struct {
		iso, net string
		ok       bool
	}{{"", "", true}, {"bwrap", "host", true}, {"none", "none", true}, {"docker", "", false}, {"", "bridge", false}} {
		o, err := Options{Addr: "h", User: "u", KnownHosts: []string{"k"}, Isolation: tc.iso, Network: tc.net}.withDefaults()
		if (err == nil) != tc.ok {
			t.Errorf("isolation %q network %q: %v", tc.iso, tc.net, err)
		}
		if err == nil && tc.iso == "" && o.Isolation != IsolationBwrap {
			t.Errorf("default isolation %q, want %q", o.Isolation, IsolationBwrap)
		}
	}
}

// openDir returns a new folder on the test machine (the test sshd's host)
// that every user may read and write, removed when the test ends.
func openDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "hermes-ssh-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDroppedConnectionEndsLongLivedShell: when the connection ends under
// a long-lived shell busy with a command (as when hermes-pipe is killed),
// the relay on the host kills the session's processes (an idle shell would
// end by itself, reading EOF).
func TestDroppedConnectionEndsLongLivedShell(t *testing.T) {
	srv := sharedSSHD(t)
	d, err := New(srv.options())
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.Open(testCtx(t), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	sess := s.(*Session)
	checker := newDriver(t, unconfined(srv.options()))
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	execOK(t, sess, "sleep 1000 & echo started")
	if sess.shell == nil {
		t.Fatal("no long-lived shell")
	}
	go func() { _, _ = sess.Exec(context.Background(), sandbox.Cmd{Command: "sleep 1001"}) }()
	sleeps := "grep -lsx 'sleep' $(grep -lsz " + sandbox.ShellQuote("^"+sandbox.MarkerVar+"="+sess.Marker()+"$") +
		" /proc/[0-9]*/environ | sed 's|environ$|comm|') /dev/null | wc -l"
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, err := checker.run(testCtx(t), sleeps, nil)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(out) == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the foreground sleep never showed up (%s sleeps)", strings.TrimSpace(out))
		}
	}
	count := "grep -lsz " + sandbox.ShellQuote("^"+sandbox.MarkerVar+"="+sess.Marker()+"$") + " /proc/[0-9]*/environ | wc -l"
	if out, err := checker.run(testCtx(t), count, nil); err != nil || strings.TrimSpace(out) == "0" {
		t.Fatalf("no process of the session found before the drop: %q, %v", out, err)
	}
	_ = d.Release()
	var out string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if out, err = checker.run(testCtx(t), count, nil); err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(out) == "0" {
			// Remove the folder the dropped session left.
			if _, err := checker.run(testCtx(t), removeDir(sandbox.ShellQuote(sess.Dir())), nil); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("%s processes of the session run 30 s after its connection ended", strings.TrimSpace(out))
}
