package sandboxtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// runEscape is the escape battery for confined drivers. Each probe is an
// ordinary command: it must come back as a Result (any exit code, no driver
// error), the escape must not have happened (checked from the test side
// where the test can see it), and the same session must then still run
// `echo ok`. Probes a driver makes moot (a container cannot see the host's
// /proc) still run: they only assert that nothing leaks.
//
// The probes run one after another, not in parallel: the battery sets a
// secret in the test process's environment and watches its signals.
func (s *suite) runEscape(t *testing.T) {
	e := &escape{suite: s}
	e.setup(t)
	t.Run("ReadTestProcessEnviron", e.readTestEnviron)
	t.Run("ReadAnyProcessEnviron", e.readAnyEnviron)
	t.Run("WriteOutsideSession", e.writeOutside)
	t.Run("ReadUserHome", e.readHome)
	t.Run("ReadOtherSession", e.readOtherSession)
	t.Run("ConnectHostLoopback", e.connectLoopback)
	t.Run("SignalTestProcess", e.signalTest)
	t.Run("LeaveProcessAfterClose", e.leaveProcess)
	t.Run("TraceSupervisor", e.traceSupervisor)
	if s.caps.MaxProcs > 0 {
		t.Run("ForkBomb", e.forkBomb)
	}
	if s.caps.MaxFileSize > 0 {
		t.Run("FillDisk", e.fillDisk)
	}
}

type escape struct {
	*suite
	id        string // unique per battery run, in every name the probes use
	secretVar string // name of the secret variable
	secret    string // its value; must never show up in a probe's output
	decoy     int    // pid of a host process started with the secret in its environment
}

func randHex(t *testing.T) string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// setup puts the secret in the test process's environment (what a driver
// might pass on) and in the initial environment of a host decoy process
// (what /proc/<pid>/environ shows: the test process's own initial
// environment cannot be changed once it runs).
func (e *escape) setup(t *testing.T) {
	e.id = randHex(t)[:10]
	e.secretVar = "HERMES_ESCAPE_SECRET_" + strings.ToUpper(e.id)
	e.secret = "s3cret-" + randHex(t)
	t.Setenv(e.secretVar, e.secret)
	cmd := exec.Command("sleep", "1000")
	cmd.Env = append(os.Environ(), e.secretVar+"="+e.secret)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the decoy process: %v", err)
	}
	e.decoy = cmd.Process.Pid
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}

// probe runs cmd, which must end as an ordinary Result, and then checks the
// session still works.
func (e *escape) probe(t *testing.T, sess sandbox.Session, cmd string, timeout time.Duration) sandbox.Result {
	t.Helper()
	res := run(t, sess, cmd, timeout)
	e.noSecret(t, res)
	want(t, sess, "echo ok", 0, "ok")
	return res
}

// noSecret fails t when the secret shows up in res. The message gives only
// where: the output of a failed probe may hold the host's environment or
// files, which must not end up in test logs.
func (e *escape) noSecret(t *testing.T, res sandbox.Result) {
	t.Helper()
	for _, o := range []struct{ name, text string }{{"stdout", res.Stdout}, {"stderr", res.Stderr}} {
		if i := strings.Index(o.text, e.secret); i >= 0 {
			t.Errorf("the secret leaked into the command's %s (%d times, first at byte %d)", o.name, strings.Count(o.text, e.secret), i)
		}
	}
}

// tryTimeout prefixes slow probe steps with a 5 s timeout where the
// command exists.
const tryTimeout = `T=; command -v timeout >/dev/null 2>&1 && T="timeout 5"; `

func (e *escape) readTestEnviron(t *testing.T) {
	sess := e.session(t, e.spec(t))
	pid := os.Getpid()
	cmd := fmt.Sprintf(`for f in /proc/%d/environ /proc/$PPID/environ /proc/%d/environ; do cat "$f" 2>&1 | tr '\0' '\n'; done
# walk up the parent chain through /proc/<pid>/stat
p=$$; n=0
while [ "$p" -gt 1 ] 2>/dev/null && [ $n -lt 32 ]; do
  tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -a %s
  p=$(sed 's/.*) //' /proc/$p/stat 2>/dev/null | cut -d' ' -f2); n=$((n+1))
done
exit 0`, pid, e.decoy, e.secretVar)
	e.probe(t, sess, cmd, 0)
}

func (e *escape) readAnyEnviron(t *testing.T) {
	sess := e.session(t, e.spec(t))
	cmd := fmt.Sprintf(`for f in /proc/[0-9]*/environ /proc/[0-9]*/task/[0-9]*/environ; do
  tr '\0' '\n' < "$f" 2>/dev/null | grep -a %s
done
cat /proc/%d/environ 2>&1; grep -ra %s /proc/[0-9]*/environ 2>/dev/null | head -c 4096
exit 0`, e.secretVar, e.decoy, e.secretVar)
	e.probe(t, sess, cmd, 0)
}

func (e *escape) writeOutside(t *testing.T) {
	sess := e.session(t, e.spec(t))
	name := "hermes-escape-" + e.id
	host := filepath.Join(t.TempDir(), name)
	targets := []string{host, "/tmp/" + name, "/var/tmp/" + name, "/etc/" + name, "/usr/local/" + name, "/root/" + name}
	if home, err := os.UserHomeDir(); err == nil {
		targets = append(targets, filepath.Join(home, name))
	}
	var cmd strings.Builder
	for _, p := range targets {
		q := sandbox.ShellQuote(p)
		fmt.Fprintf(&cmd, "echo x > %s; touch %s; mkdir -p %s.d; cp /etc/hostname %s.cp; ", q, q, q, q)
	}
	cmd.WriteString("exit 0")
	e.probe(t, sess, cmd.String(), 0)
	for _, p := range targets {
		for _, q := range []string{p, p + ".d", p + ".cp"} {
			if _, err := os.Lstat(q); err == nil {
				t.Errorf("the session created %s on the host", q)
				_ = os.RemoveAll(q)
			}
		}
	}
}

func (e *escape) readHome(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skipf("no home folder: %v", err)
	}
	name := ".hermes-escape-" + e.id
	path := filepath.Join(home, name)
	if err := os.WriteFile(path, []byte(e.secret+"\n"), 0o644); err != nil {
		t.Skipf("cannot write into the home folder %s: %v", home, err)
	}
	t.Cleanup(func() { _ = os.Remove(path) })
	sess := e.session(t, e.spec(t))
	cmd := fmt.Sprintf(`cat %s; cat ~/%s; cat /root/.hermes-escape-* /home/*/.hermes-escape-* 2>&1; ls -la %s 2>&1 | head -200; exit 0`,
		sandbox.ShellQuote(path), name, sandbox.ShellQuote(home))
	// The file holds the secret; its name alone shows up in error messages.
	e.probe(t, sess, cmd, 0)
}

func (e *escape) readOtherSession(t *testing.T) {
	a := e.session(t, e.spec(t))
	b := e.session(t, e.spec(t))
	name := "a-" + e.id + ".txt"
	res := run(t, a, fmt.Sprintf("printf %%s %s > %s && pwd", e.secret, name), 0)
	dir := strings.TrimSpace(res.Stdout)
	if res.ExitCode != 0 || !strings.HasPrefix(dir, "/") {
		t.Fatalf("session A: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	q := sandbox.ShellQuote(dir)
	// The file holds the secret; its name alone shows up in error messages
	// (and in B's own listing where both sessions work in the same path of
	// their own containers).
	e.probe(t, b, fmt.Sprintf(`cat %s/%s; ls -la %s; cat %s/* 2>&1 | head -c 4096; exit 0`, q, name, q, q), 0)
}

func (e *escape) connectLoopback(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	sess := e.session(t, e.spec(t))
	cmd := tryTimeout + fmt.Sprintf(`P=%d
for h in 127.0.0.1 localhost; do
  command -v bash >/dev/null && $T bash -c "echo hi >/dev/tcp/$h/$P" 2>&1
  command -v nc >/dev/null && echo hi | $T nc -w 2 $h $P 2>&1
  command -v busybox >/dev/null && echo hi | $T busybox nc $h $P 2>&1
  command -v python3 >/dev/null && $T python3 -c "import socket; socket.create_connection(('$h', $P), 2).send(b'hi')" 2>&1
  command -v curl >/dev/null && $T curl -sS -m 2 http://$h:$P/ 2>&1
  command -v wget >/dev/null && $T wget -q -T 2 -O- http://$h:$P/ 2>&1
done
exit 0`, port)
	e.probe(t, sess, cmd, 60*time.Second)
	// A connection the command made is already queued by the kernel: a
	// short deadline finds it.
	_ = l.(*net.TCPListener).SetDeadline(time.Now().Add(2 * time.Second))
	if c, err := l.Accept(); err == nil {
		t.Errorf("the session connected to the host's loopback port %d (from %s)", port, c.RemoteAddr())
		c.Close()
	}
}

func (e *escape) signalTest(t *testing.T) {
	ch := make(chan os.Signal, 8)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGHUP, syscall.SIGINT)
	defer signal.Stop(ch)
	sess := e.session(t, e.spec(t))
	pid := os.Getpid()
	cmd := fmt.Sprintf(`for s in TERM USR1 HUP INT; do kill -$s %d 2>&1; kill -$s $PPID 2>&1; done; kill -KILL %d 2>&1; exit 0`, pid, pid)
	e.probe(t, sess, cmd, 0)
	// A delivered signal reaches ch within microseconds; allow a second.
	select {
	case sig := <-ch:
		t.Errorf("the session signalled the test process (%v)", sig)
	case <-time.After(time.Second):
	}
}

// hostProcs returns the pids of the host processes whose command line
// contains s.
func hostProcs(s string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// leaveProcess starts processes meant to outlive the session and checks,
// through the host's /proc, that none is alive after Close. That is the
// truth for local, for a docker daemon on this machine and for ssh to
// localhost; for a remote host the check passes trivially (AfterClose is
// the driver's own check there).
func (e *escape) leaveProcess(t *testing.T) {
	d := e.open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := d.Open(ctx, e.spec(t))
	if err != nil {
		t.Fatal(err)
	}
	tag := "hermes-left-" + e.id
	t.Cleanup(func() { // never leave them to the machine, whatever happened
		for _, pid := range hostProcs(tag) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	keep := `'sleep 1000; :'`
	cmd := fmt.Sprintf(`(setsid sh -c %[1]s %[2]s-1 >/dev/null 2>&1 &)
nohup sh -c %[1]s %[2]s-2 >/dev/null 2>&1 &
( ( sh -c %[1]s %[2]s-3 >/dev/null 2>&1 & ) & )
(setsid env -i sh -c %[1]s %[2]s-4 >/dev/null 2>&1 &)
(trap '' HUP TERM; exec sh -c %[1]s %[2]s-5 >/dev/null 2>&1 &)
exit 0`, keep, tag)
	e.probe(t, sess, cmd, 0)
	if len(hostProcs(tag)) == 0 {
		t.Logf("the probe's processes are not visible in this machine's /proc (remote host?)")
	}
	if err := sess.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(hostProcs(tag)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if pids := hostProcs(tag); len(pids) > 0 {
		t.Errorf("processes %v started in the session are alive 30 s after Close", pids)
	}
}

func (e *escape) forkBomb(t *testing.T) {
	sess := e.session(t, e.spec(t))
	res := run(t, sess, `bomb(){ bomb | bomb & }; bomb; sleep 30`, 5*time.Second)
	if res.ExitCode == 0 && !res.TimedOut {
		t.Errorf("fork bomb: exit 0, not timed out; want it stopped")
	}
	// The session recovers (the processes may take a while to be reaped).
	var last sandbox.Result
	deadline := time.Now().Add(60 * time.Second)
	for {
		last = run(t, sess, "echo ok", 10*time.Second)
		if last.ExitCode == 0 && strings.TrimSpace(last.Stdout) == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a fork bomb, `echo ok` = exit %d stdout %q stderr %q", last.ExitCode, last.Stdout, last.Stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, err := exec.Command("sh", "-c", "echo fine").Output(); err != nil || string(out) != "fine\n" {
		t.Errorf("the test machine cannot start a process after the fork bomb: %v", err)
	}
}

func (e *escape) fillDisk(t *testing.T) {
	sess := e.session(t, e.spec(t))
	limit := e.caps.MaxFileSize
	count := limit>>20 + 2
	res := run(t, sess, fmt.Sprintf("dd if=/dev/zero of=big bs=1M count=%d", count), 0)
	if res.ExitCode == 0 {
		t.Errorf("dd of %d MiB past the %d-byte file-size limit: exit 0", count, limit)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fi, err := sess.Stat(ctx, "big")
	if err != nil {
		t.Fatalf("Stat(big): %v", err)
	}
	if fi.Size > limit {
		t.Errorf("big is %d bytes; the file-size limit is %d", fi.Size, limit)
	}
	want(t, sess, "rm -f big; echo ok", 0, "ok")
}
