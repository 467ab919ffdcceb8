package sandboxtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// The tracer probe (Escape/TraceSupervisor) asks the kernel directly what a
// debugger would: images hold no gdb, so the battery builds a small static
// program (testdata/tracer) once per test binary and copies it into the
// sandbox with the session's WriteFile.

var tracer struct {
	once sync.Once
	bin  []byte
	err  error
}

// TracerBinary returns the static tracer program (testdata/tracer) for this
// machine's architecture, built once per test process with the Go
// toolchain that runs the tests. Drivers' own tests use it too.
func TracerBinary(t testing.TB) []byte {
	t.Helper()
	tracer.once.Do(func() {
		_, file, _, ok := runtime.Caller(0)
		if !ok {
			tracer.err = fmt.Errorf("cannot find the tracer's source")
			return
		}
		dir, err := os.MkdirTemp("", "hermes-tracer-")
		if err != nil {
			tracer.err = err
			return
		}
		defer os.RemoveAll(dir)
		goBin, err := exec.LookPath("go")
		if err != nil {
			tracer.err = fmt.Errorf("the go command builds it: %w", err)
			return
		}
		out := filepath.Join(dir, "tracer")
		cmd := exec.Command(goBin, "build", "-o", out, "./testdata/tracer")
		cmd.Dir = filepath.Dir(file)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			tracer.err = fmt.Errorf("go build testdata/tracer: %v: %s", err, stderr.String())
			return
		}
		tracer.bin, tracer.err = os.ReadFile(out)
	})
	if tracer.err != nil {
		t.Fatalf("the tracer program: %v", tracer.err)
	}
	return tracer.bin
}

// TracerVerdict reads the tracer's output and returns what got through:
// ptrace or process_vm_readv of any pid, /proc/<pid>/mem of the pids in
// memOf. It fails t when the tracer did not run at all.
func TracerVerdict(t testing.TB, out string, memOf ...string) []string {
	t.Helper()
	var bad []string
	n := 0
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		switch f[0] {
		case "ptrace", "vmread", "mem", "memw":
			n++
		default:
			continue
		}
		if f[2] != "ok" {
			continue
		}
		if f[0] == "ptrace" || f[0] == "vmread" {
			bad = append(bad, l)
			continue
		}
		for _, p := range memOf {
			if f[1] == p {
				bad = append(bad, l)
			}
		}
	}
	if n == 0 {
		t.Fatalf("the tracer printed no verdict:\n%s", out)
	}
	return bad
}

// traceSupervisor is a row that tries, from inside, to read or rewrite the
// processes that run its commands: ptrace attach and process_vm_readv on its
// shell and on the shell's parent (a supervisor, bwrap's init; outside the
// sandbox's PID namespace in a container: then it is pid 0 and skipped),
// and /proc/<pid>/mem of the parent. Every one must fail. The row then
// plants a file in /tmp and in its home, a process and a function, and the
// next row opened with the same Spec (on a pooling driver, the same
// sandbox) must see none of them.
func (e *escape) traceSupervisor(t *testing.T) {
	bin := TracerBinary(t)
	sp := e.spec(t)
	d := e.open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sess, err := d.Open(ctx, sp)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(ctx)
	files, ok := sess.(sandbox.Files)
	if !ok {
		t.Fatalf("session %T moves no files", sess)
	}
	tag := "hermes-planted-" + e.id
	prog := "/tmp/" + tag + "-tracer"
	if err := files.WriteFile(ctx, prog, bin, 0o755); err != nil {
		t.Fatalf("WriteFile %s: %v", prog, err)
	}
	t.Cleanup(func() {
		for _, pid := range hostProcs(tag) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	res := run(t, sess, fmt.Sprintf(`echo "shell=$$ parent=$PPID"; %s $$ $PPID 2>&1`, prog), 0)
	e.noSecret(t, res)
	var shell, parent string
	for _, w := range strings.Fields(res.Stdout) {
		if v, ok := strings.CutPrefix(w, "shell="); ok {
			shell = v
		}
		if v, ok := strings.CutPrefix(w, "parent="); ok {
			parent = v
		}
	}
	if shell == "" {
		t.Fatalf("the row did not run: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	t.Logf("the tracer's verdicts (shell %s, parent %s):\n%s", shell, parent, res.Stdout)
	if bad := TracerVerdict(t, res.Stdout, parent); len(bad) > 0 {
		t.Errorf("a row reached a process of its sandbox (shell %s, parent %s): %q\n%s", shell, parent, bad, res.Stdout)
	}
	// What a row that got through would leave for the next one.
	plant := fmt.Sprintf(`echo planted >/tmp/%[1]s; echo planted >"$HOME/%[1]s"
(sh -c 'while :; do sleep 1; done; : %[1]s' </dev/null >/dev/null 2>&1 &)
%[2]s() { echo planted; }
echo done`, tag, strings.ReplaceAll(tag, "-", "_"))
	if r := run(t, sess, plant, 0); !strings.Contains(r.Stdout, "done") {
		t.Fatalf("planting: exit %d\n%s%s", r.ExitCode, r.Stdout, r.Stderr)
	}
	if err := sess.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	next, err := d.Open(ctx, sp)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close(ctx)
	// The tag is put together at run time and looked for as "[h]ermes-...":
	// no command line of the check (a fresh shell's, its bwrap's) holds it.
	check := fmt.Sprintf(`a=hermes-planted; tag=$a-%[1]s
for f in "/tmp/$tag" "/tmp/$tag-tracer" "$HOME/$tag"; do [ -e "$f" ] && echo "FILE $f"; done
type %[2]s >/dev/null 2>&1 && echo "FUNCTION %[2]s"
for p in /proc/[0-9]*; do
  [ "$p" = /proc/$$ ] && continue
  tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q "[h]${tag#h}" && echo "PROCESS ${p#/proc/}"
done
echo checked`, e.id, strings.ReplaceAll(tag, "-", "_"))
	r := run(t, next, check, 0)
	if !strings.Contains(r.Stdout, "checked") {
		t.Fatalf("the next row did not run: exit %d\n%s%s", r.ExitCode, r.Stdout, r.Stderr)
	}
	for _, l := range strings.Split(r.Stdout, "\n") {
		if strings.HasPrefix(l, "FILE ") || strings.HasPrefix(l, "FUNCTION ") || strings.HasPrefix(l, "PROCESS ") {
			t.Errorf("the next row of the sandbox sees what the last one left: %s", l)
		}
	}
}
