package ssh

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
	"github.com/hermes-pipe/hermes-pipe/sandbox/sandboxtest"
)

// testLimits are the limits of confined test sessions.
var testLimits = confine.Limits{Processes: 256, FileSizeBytes: 16 << 20}

// TestConformance runs the suite, escape battery included, against
// confined sessions on the test sshd (loopback, so the battery's view of
// the host is the remote host's).
func TestConformance(t *testing.T) {
	srv := sharedSSHD(t)
	o := srv.options()
	o.Limits = testLimits
	// The test sshd allows 64 channels per connection: enough for every
	// session the suite runs at once to get a long-lived shell.
	o.MaxSessions = 64
	d := newDriver(t, o)
	checker := newDriver(t, unconfined(srv.options()))
	sandboxtest.Run(t, func(*testing.T) sandbox.Driver { return d }, sandboxtest.Caps{
		Shell:       true,
		SharedHost:  true,
		Cwd:         openDir(t), // a confined session's /tmp is its own
		Confined:    true,
		MaxProcs:    testLimits.Processes,
		MaxFileSize: testLimits.FileSizeBytes,
		AfterClose: func(t *testing.T, _ sandbox.Spec, s sandbox.Session) {
			assertGone(t, checker, s.(*Session))
		},
		LongLivedShell: true,
		Aliases:        true,
	})
}

// TestConformanceFresh runs the suite, escape battery included, against
// confined sessions in the fresh shell mode (what sessions beyond the
// long-lived shells' share of channels run).
func TestConformanceFresh(t *testing.T) {
	srv := sharedSSHD(t)
	o := srv.options()
	o.Limits = testLimits
	o.ShellMode = ShellFresh
	d := newDriver(t, o)
	checker := newDriver(t, unconfined(srv.options()))
	sandboxtest.Run(t, func(*testing.T) sandbox.Driver { return d }, sandboxtest.Caps{
		Shell:       true,
		SharedHost:  true,
		Cwd:         openDir(t), // a confined session's /tmp is its own
		Confined:    true,
		MaxProcs:    testLimits.Processes,
		MaxFileSize: testLimits.FileSizeBytes,
		AfterClose: func(t *testing.T, _ sandbox.Spec, s sandbox.Session) {
			assertGone(t, checker, s.(*Session))
		},
	})
}

// TestConformanceUnconfined runs the suite (no escape battery) with
// Isolation none, in both shell modes. The persistent one runs with the
// driver's default MaxSessions, so most sessions the suite runs at once
// have their long-lived shells on extra connections.
func TestConformanceUnconfined(t *testing.T) {
	for _, mode := range []string{ShellPersistent, ShellFresh} {
		t.Run(mode, func(t *testing.T) {
			srv := sharedSSHD(t)
			o := unconfined(srv.options())
			o.ShellMode = mode
			d := newDriver(t, o)
			checker := newDriver(t, unconfined(srv.options()))
			sandboxtest.Run(t, func(*testing.T) sandbox.Driver { return d }, sandboxtest.Caps{
				Shell:      true,
				SharedHost: true,
				Cwd:        "/tmp",
				AfterClose: func(t *testing.T, _ sandbox.Spec, s sandbox.Session) {
					assertGone(t, checker, s.(*Session))
				},
				LongLivedShell: mode == ShellPersistent,
				Aliases:        mode == ShellPersistent,
			})
		})
	}
}

// unconfined returns o with Isolation none.
func unconfined(o Options) Options {
	o.Isolation = IsolationNone
	return o
}

// assertGone checks, over another connection, that a closed session's folder
// and marked processes are gone from the remote host.
func assertGone(t *testing.T, d *Driver, s *Session) {
	t.Helper()
	// A SIGKILLed process may take a moment to leave /proc on a loaded
	// machine: poll (generously) before calling it left behind.
	var out string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var err error
		out, err = d.run(testCtx(t), "test -e "+sandbox.ShellQuote(s.Dir())+" && echo folder; "+
			"grep -lsz "+sandbox.ShellQuote("^"+sandbox.MarkerVar+"="+s.Marker()+"$")+" /proc/[0-9]*/environ; true", nil)
		if err != nil {
			t.Fatal(err)
		}
		if out == "" || time.Now().After(deadline) {
			break
		}
	}
	if out != "" {
		t.Errorf("closed session %s left behind: %s", s.Dir(), out)
	}
}

// open opens a session on d and closes it when the test ends.
func open(t *testing.T, d *Driver, spec sandbox.Spec) *Session {
	t.Helper()
	s, err := d.Open(testCtx(t), spec)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s.(*Session)
}

func execOK(t *testing.T, s *Session, cmd string) sandbox.Result {
	t.Helper()
	res, err := s.Exec(testCtx(t), sandbox.Cmd{Command: cmd})
	if err != nil {
		t.Fatalf("Exec(%q): %v", cmd, err)
	}
	return res
}

func TestSessionFolderIsPrivate(t *testing.T) {
	srv := sharedSSHD(t)
	for _, confined := range []bool{false, true} {
		t.Run(fmt.Sprintf("confined=%v", confined), func(t *testing.T) {
			o := srv.options()
			if !confined {
				o = unconfined(o)
			}
			d := newDriver(t, o)
			s := open(t, d, sandbox.Spec{RunID: "priv/ate run"})
			if !strings.HasPrefix(s.Dir(), "/tmp/hermes-ssh-priv_ate_run-") {
				t.Fatalf("session folder %q", s.Dir())
			}
			res := execOK(t, s, `stat -c %a "$(dirname "$(pwd)")"; pwd; echo "$TMPDIR"; ls -A; echo "$HOME"`)
			want := fmt.Sprintf("700\n%s/work\n%s/tmp\n", s.Dir(), s.Dir())
			if confined {
				// The session's tmp folder is mounted at /tmp; HOME is
				// the session's own.
				want = fmt.Sprintf("700\n%s/work\n/tmp\n%s/home\n", s.Dir(), s.Dir())
			}
			if got := res.Stdout; confined && got != want || !confined && !strings.HasPrefix(got, want) {
				t.Fatalf("got %q, want %q", res.Stdout, want)
			}
		})
	}
}

// TestTimeoutKillsEscapedChild checks that a child that left the process
// group with setsid is found by its marker and killed on timeout
// (unconfined; confined, see TestConfinedTimeoutLeavesNoProcess).
func TestTimeoutKillsEscapedChild(t *testing.T) {
	srv := sharedSSHD(t)
	d := newDriver(t, unconfined(srv.options()))
	s := open(t, d, sandbox.Spec{})
	res, err := s.Exec(testCtx(t), sandbox.Cmd{
		// The child records its pid before it sleeps; the timeout leaves
		// room for a loaded machine to start the command.
		Command: "setsid sh -c 'echo $$ > escaped.pid; exec sleep 1000' & echo started; sleep 60",
		Timeout: 5 * time.Second,
	})
	if err != nil || res.ExitCode != 124 || !res.TimedOut || strings.TrimSpace(res.Stdout) != "started" {
		t.Fatalf("got %+v, %v", res, err)
	}
	waitGone(t, s, "escaped.pid")
}

// waitGone polls until the process whose pid is in pidFile (in the session's
// folder) is dead or a zombie, and fails t if it still runs after 30 s. A
// missing pid file means the process never started, which is fine.
func waitGone(t *testing.T, s *Session, pidFile string) {
	t.Helper()
	check := `[ -s ` + pidFile + ` ] || { echo never-started; exit 0; }; p=$(cat ` + pidFile + `); ` +
		`if [ -r /proc/$p/stat ] && ! grep -q '^[0-9]* ([^)]*) Z' /proc/$p/stat; then echo alive; else echo gone; fi`
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out := strings.TrimSpace(execOK(t, s, check).Stdout)
		if out != "alive" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process of %s still runs 30 s after it should have been killed", pidFile)
		}
	}
}

// waitRunning polls, over a second connection, until a sleep of session s
// (found by its marker) runs on the remote host, so a test can act while a
// command is known to run.
func waitRunning(t *testing.T, srv server, s *Session) {
	t.Helper()
	d := newDriver(t, unconfined(srv.options()))
	defer d.Release()
	probe := "for f in $(grep -lsz " + sandbox.ShellQuote("^"+sandbox.MarkerVar+"="+s.Marker()+"$") + " /proc/[0-9]*/environ); do " +
		"grep -qs '^sleep$' \"${f%/environ}/comm\" && echo sleeping; done; true"
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, err := d.run(testCtx(t), probe, nil)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(out) != "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the session's command did not start within 30 s")
		}
	}
}

func TestLongCommandIsUploaded(t *testing.T) {
	srv := sharedSSHD(t)
	d := newDriver(t, srv.options())
	s := open(t, d, sandbox.Spec{})
	payload := strings.Repeat("0123456789abcdef", 20<<10) // 320 KiB, above one argument's limit
	cmd := "cat > big.txt <<'EOF'\n" + payload + "\nEOF\ncd /tmp; export BIG=yes; wc -c < \"$OLDPWD/big.txt\"; exit 9"
	res := execOK(t, s, cmd)
	if res.ExitCode != 9 || strings.TrimSpace(res.Stdout) != fmt.Sprint(len(payload)+1) {
		t.Fatalf("got exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res := execOK(t, s, "pwd; echo $BIG"); res.Stdout != "/tmp\nyes\n" {
		t.Fatalf("state after long command: %q", res.Stdout)
	}
}

func TestOpenRejectsMissingCwdAndBadEnv(t *testing.T) {
	srv := sharedSSHD(t)
	d := newDriver(t, srv.options())
	_, err := d.Open(testCtx(t), sandbox.Spec{Cwd: "/no/such/folder"})
	if err == nil || !strings.Contains(err.Error(), "/no/such/folder") || errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("Open with a missing cwd: %v", err)
	}
	_, err = d.Open(testCtx(t), sandbox.Spec{Env: map[string]string{"A B": "x"}})
	if err == nil {
		t.Fatal("Open with a bad variable name succeeded")
	}
}

func TestGC(t *testing.T) {
	srv := sharedSSHD(t)
	d := newDriver(t, srv.options())
	run := "gc-" + randomHex(4)
	var left []*Session
	for range 2 {
		s, err := d.Open(testCtx(t), sandbox.Spec{RunID: run})
		if err != nil {
			t.Fatal(err)
		}
		left = append(left, s.(*Session))
	}
	other := open(t, d, sandbox.Spec{RunID: run + "x"})
	// A process that escaped its command, as after kill -9 of the run.
	execOK(t, left[0], "setsid sleep 300 >/dev/null 2>&1 & true")
	n, err := d.GC(testCtx(t), run)
	if err != nil || n != 2 {
		t.Fatalf("GC = %d, %v; want 2", n, err)
	}
	for _, s := range left {
		assertGone(t, d, s)
	}
	execOK(t, other, "true") // another run's session is untouched
}

func TestHostKeyStrictRefusesUnknown(t *testing.T) {
	srv := sharedSSHD(t)
	o := srv.options()
	o.KnownHosts = []string{filepath.Join(t.TempDir(), "known_hosts")} // missing file: nothing known
	d := newDriver(t, o)
	_, err := d.Open(testCtx(t), sandbox.Spec{})
	if !errors.Is(err, ErrHostKeyUnknown) || errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("Open against an unknown host: %v", err)
	}
	if !strings.Contains(err.Error(), "SHA256:") {
		t.Fatalf("error does not name the key fingerprint: %v", err)
	}
	if _, err := os.Stat(o.KnownHosts[0]); !os.IsNotExist(err) {
		t.Fatalf("strict mode wrote known_hosts (stat err %v)", err)
	}
}

func TestHostKeyAcceptNew(t *testing.T) {
	srv := sharedSSHD(t)
	o := srv.options()
	kh := filepath.Join(t.TempDir(), "sub", "known_hosts")
	o.KnownHosts = []string{kh}
	o.AcceptNewHostKeys = true
	d := newDriver(t, o)
	s := open(t, d, sandbox.Spec{})
	execOK(t, s, "true")
	got, err := os.ReadFile(kh)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(srv.KnownHosts)
	if strings.TrimSpace(string(got)) != strings.TrimSpace(string(want)) {
		t.Fatalf("accepted key line %q, server's is %q", got, want)
	}
	// The recorded key now passes strict checking.
	o.AcceptNewHostKeys = false
	if err := newDriver(t, o).Preflight(testCtx(t)); err != nil {
		t.Fatalf("strict dial with the accepted key: %v", err)
	}
}

func TestHostKeyChangedIsAlwaysRefused(t *testing.T) {
	srv := sharedSSHD(t)
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	other, _ := gossh.NewPublicKey(pub)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	line := "[127.0.0.1]:" + strings.Split(srv.Addr, ":")[1] + " " + string(gossh.MarshalAuthorizedKey(other))
	if err := os.WriteFile(kh, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	o := srv.options()
	o.KnownHosts = []string{kh}
	o.AcceptNewHostKeys = true
	err := newDriver(t, o).Preflight(testCtx(t))
	if !errors.Is(err, ErrHostKeyChanged) || errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("dial with a changed host key: %v", err)
	}
	if !strings.Contains(err.Error(), kh+":1") {
		t.Fatalf("error does not name the known_hosts line: %v", err)
	}
	if b, _ := os.ReadFile(kh); string(b) != line {
		t.Fatalf("known_hosts was modified: %q", b)
	}
}

func TestAuthFailureIsNotUnavailable(t *testing.T) {
	srv := sharedSSHD(t)
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := gossh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(t.TempDir(), "id")
	if err := os.WriteFile(key, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	o := srv.options()
	o.KeyFiles = []string{key}
	err = newDriver(t, o).Preflight(testCtx(t))
	if !errors.Is(err, ErrAuth) || errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("dial with an unknown key: %v", err)
	}
}

func TestPassphraseKeyRefusedWithoutPrompt(t *testing.T) {
	// A legacy PEM key marked encrypted; the body is never decrypted, so
	// random bytes stand in for key material.
	body := make([]byte, 64)
	_, _ = rand.Read(body)
	key := filepath.Join(t.TempDir(), "id_rsa")
	block := &pem.Block{Type: "RSA PRIVATE KEY", Bytes: body, Headers: map[string]string{
		"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00000000000000000000000000000000",
	}}
	if err := os.WriteFile(key, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(Options{Addr: "127.0.0.1:1", User: "x", KeyFiles: []string{key}, NoAgent: true})
	if err == nil || !strings.Contains(err.Error(), "passphrase") {
		t.Fatalf("New with an encrypted key: %v", err)
	}
}

// TestReconnectAfterDrop kills the server process of the driver's connection:
// a command running at that moment fails with ErrUnavailable, the next one
// runs on a new connection, and the session's state survived.
func TestReconnectAfterDrop(t *testing.T) {
	srv := privateSSHD(t)
	d := newDriver(t, srv.options())
	s := open(t, d, sandbox.Spec{})
	execOK(t, s, "cd /tmp && export KEPT=1")

	type outcome struct {
		res sandbox.Result
		err error
	}
	running := make(chan outcome, 1)
	go func() {
		res, err := s.Exec(context.Background(), sandbox.Cmd{Command: "sleep 20"})
		running <- outcome{res, err}
	}()
	waitRunning(t, srv, s)
	if n := srv.killConnections(t); n == 0 {
		t.Fatal("found no connection process to kill")
	}
	select {
	case o := <-running:
		if !errors.Is(o.err, sandbox.ErrUnavailable) {
			t.Fatalf("command cut by the drop: %+v, %v; want ErrUnavailable", o.res, o.err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("command still running 60s after its connection was killed")
	}
	if res := execOK(t, s, "pwd; echo $KEPT"); res.Stdout != "/tmp\n1\n" {
		t.Fatalf("after reconnect: %q", res.Stdout)
	}
	if n := d.dials.Load(); n != 2 {
		t.Fatalf("dials = %d, want 2", n)
	}
}

// TestReconnectWhenDropUnnoticed gives the driver a dead client its watcher
// does not know about: opening a channel fails, and the driver redials once.
func TestReconnectWhenDropUnnoticed(t *testing.T) {
	srv := sharedSSHD(t)
	d := newDriver(t, srv.options())
	s := open(t, d, sandbox.Spec{})
	dead, err := d.dial(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	_ = dead.Close()
	d.mu.Lock()
	live := d.client
	d.client = dead
	d.mu.Unlock()
	defer live.Close()
	execOK(t, s, "true")
	if n := d.dials.Load(); n != 2 {
		t.Fatalf("dials = %d, want 2", n)
	}
}

// TestServerStopped stops sshd and drops its connections: commands, opens and
// new drivers fail with ErrUnavailable; once the server is back, the same
// session works again (what --resume relies on).
func TestServerStopped(t *testing.T) {
	srv := privateSSHD(t)
	d := newDriver(t, srv.options())
	s := open(t, d, sandbox.Spec{})
	execOK(t, s, "export BEFORE=1")

	cfg := filepath.Join(srv.dir, "sshd_config")
	pid := srv.pid(t)
	srv.killConnections(t)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, srv.Addr)

	_, err := s.Exec(testCtx(t), sandbox.Cmd{Command: "true"})
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("Exec with sshd stopped: %v", err)
	}
	if _, err := d.Open(testCtx(t), sandbox.Spec{}); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("Open with sshd stopped: %v", err)
	}
	if err := newDriver(t, srv.options()).Preflight(testCtx(t)); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("Preflight with sshd stopped: %v", err)
	}
	if err := s.Close(testCtx(t)); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("Close with sshd stopped: %v", err)
	}

	// Restart the same server (same keys and port); the script's stop at
	// cleanup kills it by the pid file sshd rewrites.
	restart := exec.Command(sshdBinary, "-f", cfg)
	if out, err := restart.CombinedOutput(); err != nil {
		t.Fatalf("restart sshd: %v\n%s", err, out)
	}
	waitOpen(t, srv.Addr)
	if res := execOK(t, s, "echo $BEFORE"); res.Stdout != "1\n" {
		t.Fatalf("after restart: %q", res.Stdout)
	}
	if err := s.Close(testCtx(t)); err != nil {
		t.Fatalf("Close after restart: %v", err)
	}
	assertGone(t, d, s)
}

func waitClosed(t *testing.T, addr string) {
	t.Helper()
	for i := 0; reachable(addr); i++ {
		if i > 600 {
			t.Fatalf("%s still accepts connections", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitOpen(t *testing.T, addr string) {
	t.Helper()
	for i := 0; !reachable(addr); i++ {
		if i > 600 {
			t.Fatalf("%s does not accept connections", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestConcurrentSessionsShareOneConnection: more sessions than MaxSessions
// open, run a command and close at once over one main connection (their
// long-lived shells past its share go to extra connections, counted apart).
func TestConcurrentSessionsShareOneConnection(t *testing.T) {
	srv := sharedSSHD(t)
	d := newDriver(t, srv.options())
	var wg sync.WaitGroup
	errs := make(chan error, 30)
	for i := range 30 { // more than MaxSessions: the extra ones wait for a slot
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := d.Open(context.Background(), sandbox.Spec{})
			if err != nil {
				errs <- err
				return
			}
			defer s.Close(context.Background())
			res, err := s.Exec(context.Background(), sandbox.Cmd{Command: fmt.Sprintf("echo %d", i)})
			if err != nil || strings.TrimSpace(res.Stdout) != fmt.Sprint(i) {
				errs <- fmt.Errorf("session %d: %+v %v", i, res, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := d.dials.Load(); n != 1 {
		t.Fatalf("dials = %d, want 1", n)
	}
}

// TestAgentAuth authenticates through an ssh-agent (a real agent protocol
// server on a unix socket holding the test key) with no key file given.
func TestAgentAuth(t *testing.T) {
	srv := sharedSSHD(t)
	pemBytes, err := os.ReadFile(srv.Key)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := gossh.ParseRawPrivateKey(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: raw}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	served := make(chan int, 1)
	go func() {
		n := 0
		for {
			c, err := l.Accept()
			if err != nil {
				served <- n
				return
			}
			n++
			_ = agent.ServeAgent(keyring, c)
			c.Close()
		}
	}()
	t.Setenv("SSH_AUTH_SOCK", sock)
	o := srv.options()
	o.KeyFiles, o.NoAgent = nil, false
	d := newDriver(t, o)
	s := open(t, d, sandbox.Spec{})
	if res := execOK(t, s, "echo via-agent"); res.Stdout != "via-agent\n" {
		t.Fatalf("got %q", res.Stdout)
	}
	l.Close()
	if n := <-served; n == 0 {
		t.Fatal("the agent was never asked")
	}
}

// TestKeepAliveDropsHungConnection freezes the server side of the connection
// (SIGSTOP): the keepalive probe goes unanswered, the driver drops the
// connection, and the next command runs on a fresh connection with the
// session's state. A fresh shell's channel open hangs until then and the
// command runs; a long-lived shell's command is sent on the frozen
// connection and fails with ErrUnavailable (it may have run: it is not
// retried).
func TestKeepAliveDropsHungConnection(t *testing.T) {
	for _, mode := range []string{ShellFresh, ShellPersistent} {
		t.Run(mode, func(t *testing.T) {
			srv := privateSSHD(t)
			o := srv.options()
			o.KeepAlive = 300 * time.Millisecond
			o.ShellMode = mode
			d := newDriver(t, o)
			s := open(t, d, sandbox.Spec{})
			execOK(t, s, "export K=1")
			if (s.shell != nil) != (mode == ShellPersistent) {
				t.Fatalf("mode %s, long-lived shell %v", mode, s.shell != nil)
			}
			stopped := srv.signalConnections(t, syscall.SIGSTOP)
			t.Cleanup(func() {
				for _, pid := range stopped {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					_ = syscall.Kill(pid, syscall.SIGCONT)
				}
			})
			// Without the keepalive it would hang (testCtx: 30 s).
			_, err := s.Exec(testCtx(t), sandbox.Cmd{Command: "true"})
			if mode == ShellFresh && err != nil || mode == ShellPersistent && !errors.Is(err, sandbox.ErrUnavailable) {
				t.Fatalf("Exec across a hung connection: %v", err)
			}
			if res := execOK(t, s, "echo $K"); res.Stdout != "1\n" {
				t.Fatalf("state after the hung connection: %q", res.Stdout)
			}
			if n := d.dials.Load(); n != 2 {
				t.Fatalf("dials = %d, want 2", n)
			}
		})
	}
}

// TestFactory opens the driver the way cmd does: through a registry and the
// shared sandbox.Config.
func TestFactory(t *testing.T) {
	srv := sharedSSHD(t)
	reg := sandbox.NewRegistry()
	reg.Register("ssh", Factory)
	drv, err := reg.Open("ssh", sandbox.Config{
		RunID: "factory-run",
		SSH: sandbox.SSHConfig{
			Host: srv.Addr, User: srv.User, KeyFile: srv.Key, KnownHosts: srv.KnownHosts,
			BaseDir: "/tmp/",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.(sandbox.Releaser).Release()
	sess, err := drv.Open(testCtx(t), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	s := sess.(*Session)
	defer s.Close(context.Background())
	if !strings.HasPrefix(s.Dir(), "/tmp/hermes-ssh-factory-run-") {
		t.Fatalf("session folder %q does not carry the run id", s.Dir())
	}
	if res := execOK(t, s, "echo $HERMES_SANDBOX"); strings.TrimSpace(res.Stdout) != s.Marker() {
		t.Fatalf("marker %q, want %q", res.Stdout, s.Marker())
	}
	if _, err := reg.Open("ssh", sandbox.Config{}); err == nil {
		t.Fatal("Factory accepted an empty host")
	}
}

func TestPreflightChecksRemoteFolder(t *testing.T) {
	srv := sharedSSHD(t)
	if err := newDriver(t, srv.options()).Preflight(testCtx(t)); err != nil {
		t.Fatalf("Preflight: %v", err)
	}
	o := srv.options()
	o.RemoteTmp = "/proc/hermes-not-writable"
	err := newDriver(t, o).Preflight(testCtx(t))
	if err == nil || !strings.Contains(err.Error(), "not writable") || errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("Preflight with an unusable remote folder: %v", err)
	}
}

// TestTimeoutOnHungConnection freezes the server while a command runs, with
// keepalives off: the timeout cannot be confirmed remotely, so Exec returns
// exit 124 together with an ErrUnavailable error instead of hanging.
func TestTimeoutOnHungConnection(t *testing.T) {
	srv := privateSSHD(t)
	o := srv.options()
	o.KeepAlive = -1
	d := newDriver(t, o)
	d.killGrace = 200 * time.Millisecond
	s := open(t, d, sandbox.Spec{})
	type outcome struct {
		res sandbox.Result
		err error
	}
	got := make(chan outcome, 1)
	go func() {
		res, err := s.Exec(context.Background(), sandbox.Cmd{Command: "echo started; sleep 60", Timeout: 15 * time.Second})
		got <- outcome{res, err}
	}()
	// Freeze only once the command runs: a frozen channel open would hang
	// (keepalives are off). The timeout leaves the freeze time to happen.
	waitRunning(t, srv, s)
	stopped := srv.signalConnections(t, syscall.SIGSTOP)
	defer func() {
		for _, pid := range stopped {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	select {
	case o := <-got:
		if o.res.ExitCode != 124 || !o.res.TimedOut || !errors.Is(o.err, sandbox.ErrUnavailable) {
			t.Fatalf("got %+v, %v; want exit 124 and ErrUnavailable", o.res, o.err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Exec hung on a frozen connection")
	}
}

// TestLauncherFile runs fresh shells through the launcher file (unconfined)
// or a launcher passed as an argument (confined), the paths taken when the
// login shell is not /bin/sh (the test user's is, so it is forced).
func TestLauncherFile(t *testing.T) {
	srv := sharedSSHD(t)
	for _, confined := range []bool{false, true} {
		t.Run(fmt.Sprintf("confined=%v", confined), func(t *testing.T) {
			o := srv.options()
			o.ShellMode = ShellFresh
			if !confined {
				o = unconfined(o)
			}
			s := open(t, newDriver(t, o), sandbox.Spec{})
			if !s.inline {
				t.Fatal("the test user's login shell is /bin/sh, but the launcher is not inline")
			}
			s.inline = false
			if res := execOK(t, s, "cd /tmp; export A='x y'; echo it\\'s; exit 3"); res.ExitCode != 3 || res.Stdout != "it's\n" {
				t.Fatalf("got %+v", res)
			}
			if res := execOK(t, s, `pwd; echo "$A"`); res.Stdout != "/tmp\nx y\n" {
				t.Fatalf("got %q", res.Stdout)
			}
			res, err := s.Exec(testCtx(t), sandbox.Cmd{Command: "echo a; sleep 30", Timeout: 3 * time.Second})
			if err != nil || res.ExitCode != 124 || res.Stdout != "a\n" {
				t.Fatalf("timeout through the launcher: %+v, %v", res, err)
			}
		})
	}
}

// TestWait checks that the driver's own helper process is not a job of the
// command's shell: `wait` returns once the command's jobs end.
func TestWait(t *testing.T) {
	srv := sharedSSHD(t)
	d := newDriver(t, srv.options())
	s := open(t, d, sandbox.Spec{})
	res, err := s.Exec(testCtx(t), sandbox.Cmd{Command: "sleep 0.2 & sleep 0.1 & wait; echo done", Timeout: 5 * time.Second})
	if err != nil || res.TimedOut || res.Stdout != "done\n" {
		t.Fatalf("got %+v, %v", res, err)
	}
}

func TestShellKilledBySignal(t *testing.T) {
	srv := sharedSSHD(t)
	d := newDriver(t, srv.options())
	s := open(t, d, sandbox.Spec{})
	if res := execOK(t, s, "echo before; kill -9 $$"); res.ExitCode != 137 || res.Stdout != "before\n" {
		t.Fatalf("got %+v", res)
	}
	if res := execOK(t, s, "echo after"); res.Stdout != "after\n" {
		t.Fatalf("session unusable after its shell was killed: %+v", res)
	}
}

// BenchmarkFiles1MiB measures a 1 MiB WriteFile plus reading it back.
func BenchmarkFiles1MiB(b *testing.B) {
	srv := sharedSSHD(b)
	d := newDriver(b, srv.options())
	s, err := d.Open(context.Background(), sandbox.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	sandboxtest.BenchWriteRead1MiB(b, s)
}
