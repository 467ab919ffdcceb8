package cron

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
)

// needConfinement skips a test of confined scripts where bwrap cannot run.
func needConfinement(t *testing.T) {
	t.Helper()
	if err := probeConfinement().Usable(); err != nil {
		t.Skipf("confinement unavailable here: %v", err)
	}
}

var sleepSeq atomic.Int64

// uniqueSleep is a sleep argument (a bit under an hour) no other process on
// the machine has, to find a script's process from the host.
func uniqueSleep() string {
	return fmt.Sprintf("3599.%d%04d", os.Getpid(), sleepSeq.Add(1))
}

// sleepers lists the host pids of live `sleep <token>` processes.
func sleepers(token string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(b), "\x00"+token+"\x00") {
			continue
		}
		if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && !strings.Contains(string(st), ") Z") {
			out = append(out, pid)
		}
	}
	return out
}

// waitNoSleeper fails the test when a `sleep <token>` is still alive after
// 30 s (a killed process leaves a moment after its group is killed).
func waitNoSleeper(t *testing.T, token string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); len(sleepers(token)) > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if p := sleepers(token); len(p) > 0 {
		t.Fatalf("sleep %s (pids %v) outlived its execution", token, p)
	}
}

// runScriptJob adds a job for script body with spec's policy, runs it now and
// returns the result.
func runScriptJob(t *testing.T, s *Scheduler, name, body string, spec JobSpec) Result {
	t.Helper()
	writeScript(t, s.Home, name, body)
	spec.Schedule, spec.Script, spec.NoAgent = "@daily", name, true
	j := addJob(t, s, spec)
	r, err := s.RunNow(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestConfinedScriptEscapes: a script job cannot write outside its
// folders, leave a process running, or reach a port on the host's
// loopback; the same script with the opt-out can, which shows each probe
// works. (Reading the scheduler's environment:
// TestConfinedScriptCannotReadSchedulerEnviron.)
func TestConfinedScriptEscapes(t *testing.T) {
	needConfinement(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	accepted := make(chan struct{}, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
			accepted <- struct{}{}
		}
	}()

	home := t.TempDir()
	outside := t.TempDir() // under /tmp, and /tmp is private to the script
	elsewhere := filepath.Join(filepath.Dir(home), "hermes-test-outside-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(elsewhere, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(elsewhere) })
	s := newTestScheduler(t, home, nil, nil)
	token := uniqueSleep()
	body := fmt.Sprintf(`#!/bin/bash
echo x > %s/written 2>/dev/null
echo x > %s/written 2>/dev/null
echo x > %s/jobs-written 2>/dev/null
if (echo hi >/dev/tcp/127.0.0.1/%d) 2>/dev/null; then echo CONNECTED; else echo NO-NETWORK; fi
m=/tmp/hermes-setsid-$$
(setsid sh -c "echo \$\$ > $m; exec sleep %s" </dev/null >/dev/null 2>&1 &)
while [ ! -s $m ]; do sleep 0.01; done; rm -f $m
echo done
`, outside, elsewhere, filepath.Join(home, "cron"), port, token)

	r := runScriptJob(t, s, "escape.sh", body, JobSpec{})
	if r.State != StateDone || !strings.Contains(r.Output, "done") {
		t.Fatalf("confined run: %+v", r)
	}
	for _, f := range []string{filepath.Join(outside, "written"), filepath.Join(elsewhere, "written"), filepath.Join(home, "cron", "jobs-written")} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("the confined script wrote %s", f)
		}
	}
	if !strings.Contains(r.Output, "NO-NETWORK") {
		t.Errorf("the confined script reached the host's loopback:\n%s", r.Output)
	}
	waitNoSleeper(t, token)

	// The opt-out: every probe gets through, with a warning in the log.
	var log strings.Builder
	s.Log = slog.New(slog.NewTextHandler(&log, nil))
	token2 := uniqueSleep()
	body2 := strings.Replace(body, token, token2, 1)
	t.Cleanup(func() {
		for _, p := range sleepers(token2) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	r = runScriptJob(t, s, "escape-none.sh", body2, JobSpec{ScriptIsolation: IsolationNone})
	if r.State != StateDone || !strings.Contains(r.Output, "CONNECTED") {
		t.Fatalf("unconfined run did not show the escapes: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "written")); err != nil {
		t.Errorf("unconfined run could not write outside: %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); len(sleepers(token2)) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // the detached shell execs sleep a moment after it wrote its mark
	}
	if len(sleepers(token2)) == 0 {
		t.Errorf("unconfined run left no sleeper: the lifetime probe proves nothing")
	}
	if !strings.Contains(log.String(), "script_isolation none") {
		t.Errorf("no warning for the opt-out: %q", log.String())
	}
	// A job may ask for the network.
	r = runScriptJob(t, s, "net.sh", fmt.Sprintf("#!/bin/bash\nif (echo hi >/dev/tcp/127.0.0.1/%d) 2>/dev/null; then echo CONNECTED; else echo NO-NETWORK; fi\n", port),
		JobSpec{ScriptNetwork: confine.NetworkHost})
	if !strings.Contains(r.Output, "CONNECTED") {
		t.Errorf("script_network host: %+v", r)
	}
}

// TestConfinedScriptCannotReadSchedulerEnviron runs a tick in a child
// process started with a secret in its environment (what /proc/<pid>/environ
// shows is the environment a process was started with): the confined
// script's view of /proc has no trace of it; the same script opted out
// reads it through $PPID.
func TestConfinedScriptCannotReadSchedulerEnviron(t *testing.T) {
	needConfinement(t)
	const secret = "hermes-test-secret-77c2e9"
	home := t.TempDir()
	clock := newFakeClock(utc("2026-05-01T10:00:00Z"))
	s := newTestScheduler(t, home, clock, nil)
	body := `#!/bin/sh
tr '\0' '\n' < /proc/$PPID/environ 2>/dev/null | grep HERMES_TEST
for p in /proc/[0-9]*; do tr '\0' '\n' < $p/environ 2>/dev/null; done | grep HERMES_TEST
echo done
`
	writeScript(t, home, "env.sh", body)
	writeScript(t, home, "env-none.sh", body)
	confined := addJob(t, s, JobSpec{Schedule: "every 10m", Script: "env.sh", NoAgent: true})
	open := addJob(t, s, JobSpec{Schedule: "every 10m", Script: "env-none.sh", NoAgent: true, ScriptIsolation: IsolationNone})
	at := utc("2026-05-01T10:10:00Z")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "HERMES_CRON_TEST_CHILD_HOME="+home, "HERMES_CRON_TEST_CHILD_NOW="+at.Format(time.RFC3339),
		"HERMES_TEST_SECRET_VALUE="+secret)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child tick: %v\n%s", err, out)
	}
	out := func(j *Job) string {
		e, err := s.Ledger.Get(context.Background(), ExecutionID(j.ID, at, TriggerSched))
		if err != nil || e.State != StateDone {
			t.Fatalf("execution of %s: %+v %v", j.Script, e, err)
		}
		return e.Output
	}
	if o := out(confined); strings.Contains(o, secret) || !strings.Contains(o, "done") {
		t.Errorf("the confined script read the scheduler's environment:\n%s", o)
	}
	if o := out(open); !strings.Contains(o, secret) {
		t.Errorf("the unconfined script did not: the probe proves nothing:\n%s", o)
	}
}

// TestConfinedScriptWorks: a confined script job reads its own folder and
// its job's delivered outputs, writes its working folder and /tmp, runs
// python, and its output is delivered as before.
func TestConfinedScriptWorks(t *testing.T) {
	needConfinement(t)
	home := t.TempDir()
	work := t.TempDir()
	s := newTestScheduler(t, home, nil, nil)
	if err := os.MkdirAll(filepath.Join(ScriptsDir(home), "report"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeScript(t, home, "report/data.txt", "from-data-file\n")
	writeScript(t, home, "report/run.sh", `#!/bin/sh
cat data.txt
echo made > made.txt && echo wrote-own-folder
echo t > /tmp/t && cat /tmp/t >/dev/null && echo wrote-tmp
test -d "$HOME" && test -w "$HOME" && echo has-home
echo "job $HERMES_PIPE_JOB_ID"
grep '^Seccomp:' /proc/self/status
`)
	j := addJob(t, s, JobSpec{Schedule: "@daily", Script: "report/run.sh", NoAgent: true})
	r, err := s.RunNow(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	// "Seccomp: 2": the script runs under the sandbox's seccomp filter.
	for _, w := range []string{"from-data-file", "wrote-own-folder", "wrote-tmp", "has-home", "job " + j.ID, "Seccomp:\t2"} {
		if !strings.Contains(r.Output, w) {
			t.Errorf("output lacks %q: %+v", w, r)
		}
	}
	if r.State != StateDone || r.Delivery == "" {
		t.Fatalf("result %+v", r)
	}
	files, _ := filepath.Glob(filepath.Join(OutputDir(home, j.ID), "*.md"))
	if len(files) != 1 {
		t.Fatalf("delivered files %v", files)
	}
	if b, _ := os.ReadFile(files[0]); !strings.Contains(string(b), "from-data-file") {
		t.Errorf("delivered %s", b)
	}
	if b, err := os.ReadFile(filepath.Join(ScriptsDir(home), "report", "made.txt")); err != nil || string(b) != "made\n" {
		t.Errorf("own folder write: %q %v", b, err)
	}

	// A script directly in the scripts folder may not rewrite it (other
	// jobs' scripts live there), but reads the job's earlier outputs and
	// writes the job's workdir; python runs.
	writeScript(t, home, "py.py", "import os\nprint(sorted(os.listdir('"+OutputDir(home, "JOB")+"'))[:1])\nopen('out.txt','w').write('py')\nprint('cwd', os.getcwd())\n")
	writeScript(t, home, "tamper.sh", "#!/bin/sh\necho evil > "+filepath.Join(ScriptsDir(home), "py.py")+" || echo refused\n")
	py := addJob(t, s, JobSpec{Schedule: "@daily", Script: "py.py", NoAgent: true, Workdir: work})
	if err := os.WriteFile(filepath.Join(ScriptsDir(home), "py.py"), []byte(strings.ReplaceAll(mustRead(t, filepath.Join(ScriptsDir(home), "py.py")), "JOB", py.ID)), 0o600); err != nil {
		t.Fatal(err)
	}
	// Not executable: run as python3 for its .py name (inside the
	// sandbox, the system's python3).
	if err := os.Chmod(filepath.Join(ScriptsDir(home), "py.py"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(OutputDir(home, py.ID), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(OutputDir(home, py.ID), "earlier.md"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err = s.RunNow(context.Background(), py.ID)
	if err != nil || r.State != StateDone || !strings.Contains(r.Output, "['earlier.md']") || !strings.Contains(r.Output, "cwd "+work) {
		t.Fatalf("python job: %+v %v", r, err)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "out.txt")); string(b) != "py" {
		t.Errorf("workdir write: %q", b)
	}
	tj := addJob(t, s, JobSpec{Schedule: "@daily", Script: "tamper.sh", NoAgent: true})
	r, err = s.RunNow(context.Background(), tj.ID)
	if err != nil || !strings.Contains(r.Output, "refused") {
		t.Fatalf("tamper job: %+v %v", r, err)
	}
	if strings.Contains(mustRead(t, filepath.Join(ScriptsDir(home), "py.py")), "evil") {
		t.Errorf("a confined script rewrote another job's script")
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestScriptConfinementUnavailable: where confinement cannot start the
// execution fails with the reason and the opt-out; the script never runs
// unconfined. The daemon-wide opt-out runs it.
func TestScriptConfinementUnavailable(t *testing.T) {
	old := probeConfinement
	t.Cleanup(func() { probeConfinement = old })
	probeConfinement = func() confine.Report {
		return confine.Report{Namespaces: errors.New("exec: \"bwrap\": executable file not found in $PATH")}
	}
	home := t.TempDir()
	s := newTestScheduler(t, home, nil, nil)
	ran := filepath.Join(home, "ran")
	r := runScriptJob(t, s, "x.sh", "#!/bin/sh\ntouch "+ran+"\necho hi\n", JobSpec{})
	if r.State != StateFailed || !strings.Contains(r.Error, "bwrap") || !strings.Contains(r.Error, "--script-isolation none") {
		t.Fatalf("result %+v", r)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the script ran although it could not be confined")
	}
	s.ScriptIsolation = IsolationNone
	r = runScriptJob(t, s, "y.sh", "#!/bin/sh\ntouch "+ran+"\necho hi\n", JobSpec{})
	if r.State != StateDone || strings.TrimSpace(r.Output) != "hi" {
		t.Fatalf("opt-out: %+v", r)
	}
	if _, err := os.Stat(ran); err != nil {
		t.Fatal("the opted-out script did not run in the home folder")
	}
}

func TestCheckScriptPolicy(t *testing.T) {
	for _, p := range []Policy{{}, {ScriptIsolation: "none"}, {ScriptIsolation: "bwrap", ScriptNetwork: "host"}, {ScriptNetwork: "none"}} {
		if err := CheckScriptPolicy(p); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	for _, p := range []Policy{{ScriptIsolation: "docker"}, {ScriptNetwork: "bridge"}} {
		if err := CheckScriptPolicy(p); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
	home := t.TempDir()
	writeScript(t, home, "a.sh", "#!/bin/sh\n")
	s := newTestScheduler(t, home, nil, nil)
	_, err := AddJob(context.Background(), s.Store, home, JobSpec{Schedule: "@daily", Script: "a.sh", NoAgent: true, Timezone: "UTC", ScriptNetwork: "wifi"}, time.Now())
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "script_network") {
		t.Fatalf("add: %v", err)
	}
}
