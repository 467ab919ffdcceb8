package local

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/sandboxtest"
	"golang.org/x/sys/unix"
)

// TestPooledRowCannotReachSupervisor is the attack of issue 25 on a pooled
// sandbox: a row runs under a seccomp filter, tries ptrace attach,
// process_vm_readv and /proc/<pid>/mem on its shell and on the shell's
// parent (the supervisor), which all fail; it then leaves a file, a process
// and a function, and the next row, in the same sandbox (same folder,
// reused), sees none of them: both when its shell is refreshed in place
// and when it gets a new one.
func TestPooledRowCannotReachSupervisor(t *testing.T) {
	bin := sandboxtest.TracerBinary(t)
	for _, c := range []struct {
		name    string
		extra   string // makes the row need a new shell, or not
		inPlace bool
	}{{"refreshed", "", true}, {"new shell", "; trap 'echo planted' EXIT", false}} {
		t.Run(c.name, func(t *testing.T) {
			d := poolDriver(t, 0)
			a := openIn(t, d, sandbox.Spec{})
			dir := a.Dir()
			st := exec1(t, a, "grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status", 0)
			if !strings.Contains(st.Stdout, "Seccomp:\t2") {
				t.Fatalf("no seccomp filter in the sandbox:\n%s%s", st.Stdout, st.Stderr)
			}
			// The shell itself cannot open its memory for a child to write
			// through (a redirection of a group runs in the shell).
			self := exec1(t, a, `{ :; } 3</proc/$$/mem && echo SELF-OPEN; { :; } 3<>/proc/self/mem && echo SELF-OPEN; { :; } 3</proc/thread-self/mem && echo SELF-OPEN; echo tried`, 0)
			if !strings.Contains(self.Stdout, "tried") || strings.Contains(self.Stdout, "SELF-OPEN") {
				t.Errorf("the shell opens its own memory:\n%s%s", self.Stdout, self.Stderr)
			}
			if err := a.WriteFile(context.Background(), "/tmp/tracer", bin, 0o755); err != nil {
				t.Fatal(err)
			}
			res := exec1(t, a, `echo "shell=$$ parent=$PPID"; /tmp/tracer $$ $PPID`, 0)
			if !strings.Contains(res.Stdout, "shell=") || strings.Contains(res.Stdout, "parent=0") {
				t.Fatalf("tracer row: %+v", res)
			}
			var shell, parent string
			fmt.Sscanf(strings.SplitN(res.Stdout, "\n", 2)[0], "shell=%s parent=%s", &shell, &parent)
			// Here the shell is kept for the next row too: its memory is as
			// closed as the supervisor's.
			if bad := sandboxtest.TracerVerdict(t, res.Stdout, shell, parent); len(bad) > 0 {
				t.Errorf("the row reached its sandbox's processes: %q\n%s", bad, res.Stdout)
			}
			for _, l := range strings.Split(res.Stdout, "\n") {
				if f := strings.Fields(l); len(f) == 3 && (f[0] == "ptrace" || f[0] == "vmread") && f[2] != "operation not permitted" {
					t.Errorf("%s: want EPERM from the seccomp filter", l)
				}
			}
			tag := "hermes-guard-" + strings.TrimPrefix(dir[strings.LastIndex(dir, "/")+1:], folderPrefix)
			row := fmt.Sprintf(`echo planted >/tmp/%[1]s; echo planted >"$HOME/%[1]s"; echo planted >/%[1]s
(sh -c 'while :; do sleep 1; done; : %[1]s' </dev/null >/dev/null 2>&1 &)
planted_fn() { echo planted; }%[2]s`, tag, c.extra)
			if sandbox.RefreshSafe(row) != c.inPlace {
				t.Fatalf("RefreshSafe(row) = %v", !c.inPlace)
			}
			exec1(t, a, row, 0)
			for deadline := time.Now().Add(30 * time.Second); len(hostProcs(tag)) == 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the row's process is not running")
				}
			}
			if err := a.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			idle(t, d, 1)
			b := openIn(t, d, sandbox.Spec{})
			defer b.Close(context.Background())
			if !b.Reused() || b.Dir() != dir {
				t.Fatalf("the next row did not get the same sandbox (reused %v)", b.Reused())
			}
			if b.Refreshed() != c.inPlace {
				t.Errorf("refreshed in place = %v, want %v", b.Refreshed(), c.inPlace)
			}
			got := exec1(t, b, fmt.Sprintf(`a=hermes-guard; tag=$a-%s
for f in /tmp/$tag "$HOME/$tag" /$tag /tmp/tracer; do [ -e "$f" ] && echo "FILE $f"; done
type planted_fn >/dev/null 2>&1 && echo FUNCTION
for p in /proc/[0-9]*; do [ "$p" = /proc/$$ ] && continue; tr '\0' ' ' <$p/cmdline 2>/dev/null | grep -q "[h]${tag#h}" && echo "PROCESS $p"; done
echo checked`, strings.TrimPrefix(tag, "hermes-guard-")), 0)
			if !strings.Contains(got.Stdout, "checked") || strings.Contains(got.Stdout, "FILE") ||
				strings.Contains(got.Stdout, "FUNCTION") || strings.Contains(got.Stdout, "PROCESS") {
				t.Errorf("the next row sees what the last one left:\n%s%s", got.Stdout, got.Stderr)
			}
			if p := hostProcs(tag); len(p) > 0 {
				t.Errorf("the row's processes %v are alive in the pooled sandbox", p)
			}
			if self := exec1(t, b, `{ :; } 3</proc/$$/mem && echo SELF-OPEN; echo tried`, 0); !strings.Contains(self.Stdout, "tried") || strings.Contains(self.Stdout, "SELF-OPEN") {
				t.Errorf("the next row's shell opens its own memory:\n%s%s", self.Stdout, self.Stderr)
			}
		})
	}
}

// TestChangedSupervisorMeansNewSandbox: a supervisor whose state changed
// (here its open-file limit, set from the host: a row cannot) fails the
// check before reuse, and the next row gets a new sandbox.
func TestChangedSupervisorMeansNewSandbox(t *testing.T) {
	d := poolDriver(t, 0)
	a := openIn(t, d, sandbox.Spec{})
	dir := a.Dir()
	exec1(t, a, "echo hi", 0)
	p := a.proc()
	if err := p.checkSandbox(); err != nil {
		t.Fatalf("a clean sandbox fails the check: %v", err)
	}
	lim := unix.Rlimit{Cur: 77, Max: 77}
	if err := unix.Prlimit(p.sup, unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := openIn(t, d, sandbox.Spec{})
	defer b.Close(context.Background())
	if b.Reused() || b.Dir() == dir {
		t.Fatalf("a sandbox whose supervisor changed was reused")
	}
}

// TestCheckSandboxSeesLeftProcess: a process left beside the shell fails
// the check (the supervisor normally kills it first; a supervisor that did
// not would be caught here).
func TestCheckSandboxSeesLeftProcess(t *testing.T) {
	d := poolDriver(t, 0)
	a := openIn(t, d, sandbox.Spec{})
	defer a.Close(context.Background())
	exec1(t, a, "(sleep 1000 </dev/null >/dev/null 2>&1 &)", 0)
	p := a.proc()
	err := p.checkSandbox()
	if err == nil || !strings.Contains(err.Error(), "processes left") {
		t.Fatalf("check with a process left: %v", err)
	}
}

// TestOnlyKnownCountsTasks: a sandbox holding only bwrap, the supervisor
// and the shell passes the cgroup's task count (the quick way of alone and
// others); a process left beside them fails it, and the listing then finds
// it.
func TestOnlyKnownCountsTasks(t *testing.T) {
	d := poolDriver(t, 0)
	a := openIn(t, d, sandbox.Spec{})
	defer a.Close(context.Background())
	exec1(t, a, "true", 0)
	p := a.proc()
	cg := a.cgroupIfAny()
	if cg == nil {
		t.Skip("no cgroup for the session here")
	}
	if err := p.find(); err != nil {
		t.Fatal(err)
	}
	if !p.onlyKnown(cg) || !p.alone() {
		t.Fatalf("a sandbox of bwrap, supervisor and shell: onlyKnown %v, alone %v", p.onlyKnown(cg), p.alone())
	}
	exec1(t, a, "(sleep 1000 </dev/null >/dev/null 2>&1 &)", 0)
	if p.onlyKnown(cg) || p.alone() {
		t.Errorf("a process left: onlyKnown %v, alone %v; want false", p.onlyKnown(cg), p.alone())
	}
	if len(p.others()) != 1 {
		t.Errorf("others: %v, want the one process left", p.others())
	}
}
