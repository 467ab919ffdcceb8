package confine

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestSeccompFilterBuilds(t *testing.T) {
	b, err := Seccomp()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 || len(b)%8 != 0 {
		t.Fatalf("filter of %d bytes is not a list of sock_filter entries", len(b))
	}
	b2, _ := Seccomp()
	if &b[0] != &b2[0] {
		t.Errorf("the filter is built again for each caller")
	}
}

// bwrapOutput runs the command line c (bwrap first), closes it once run
// and returns its combined output; the test fails if it exits non-zero.
func bwrapOutput(t *testing.T, c *Cmd) string {
	t.Helper()
	cmd := exec.Command(c.Args[0])
	c.Apply(cmd)
	out, err := cmd.CombinedOutput()
	c.Close()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return string(out)
}

// confinedRun runs script under a policy in a fresh folder and returns its
// output; it skips where bubblewrap cannot run (fails under CI).
func confinedRun(t *testing.T, p Policy, script string) string {
	t.Helper()
	r := Probe(context.Background())
	if err := r.Usable(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("confinement unavailable under CI: %v", err)
		}
		t.Skipf("confinement unavailable here: %v", err)
	}
	if !r.Seccomp {
		t.Fatalf("the probe's command did not run under the filter: %+v", r)
	}
	if p.SessionDir == "" {
		p.SessionDir = t.TempDir()
	}
	p.Env = append(p.Env, "PATH=/usr/bin:/bin:/usr/sbin:/sbin")
	c, err := p.Args(r.Bwrap, []string{"/bin/bash", "-c", script})
	if err != nil {
		t.Fatal(err)
	}
	return bwrapOutput(t, c)
}

// TestSeccompApplied: a confined command runs under the filter (Seccomp: 2)
// and bwrap's descriptor for it is not left open inside; the calls it
// denies fail while ordinary work goes on.
func TestSeccompApplied(t *testing.T) {
	out := confinedRun(t, Policy{}, `
grep '^Seccomp:' /proc/self/status
[ -e /proc/$$/fd/3 ] && echo "FD3-OPEN $(readlink /proc/$$/fd/3)"
unshare -U true 2>/dev/null && echo UNSHARE-OK
unshare -m true 2>/dev/null && echo UNSHARE-MOUNT-OK
mount -t tmpfs x /tmp 2>/dev/null && echo MOUNT-OK
echo hi > /tmp/f && cat /tmp/f
sleep 0.01 & wait && echo forked
`)
	if !strings.Contains(out, "Seccomp:\t2") {
		t.Errorf("no seccomp filter in the sandbox:\n%s", out)
	}
	if strings.Contains(out, "FD3-OPEN") {
		t.Errorf("the filter's descriptor is open inside:\n%s", out)
	}
	for _, bad := range []string{"UNSHARE-OK", "UNSHARE-MOUNT-OK", "MOUNT-OK"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s under the filter:\n%s", bad, out)
		}
	}
	if !strings.Contains(out, "hi\n") || !strings.Contains(out, "forked") {
		t.Errorf("ordinary commands failed under the filter:\n%s", out)
	}
}

// TestSeccompExtraFiles: the caller's descriptors keep their numbers and
// the filter comes after them.
func TestSeccompExtraFiles(t *testing.T) {
	r := Probe(context.Background())
	if err := r.Usable(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("confinement unavailable under CI: %v", err)
		}
		t.Skipf("confinement unavailable here: %v", err)
	}
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "extra"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("extra-file\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := Policy{SessionDir: dir, Env: []string{"PATH=/usr/bin:/bin"}}
	c, err := p.Args(r.Bwrap, []string{"/bin/sh", "-c", `cat <&3; grep '^Seccomp:' /proc/self/status`}, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Files) != 2 || c.Files[0] != f || !strings.Contains(strings.Join(c.Args, " "), "--seccomp 4 ") {
		t.Fatalf("the filter is not after the caller's descriptor: %v", c.Args)
	}
	out := bwrapOutput(t, c)
	if !strings.Contains(out, "extra-file\n") || !strings.Contains(out, "Seccomp:\t2") {
		t.Errorf("output:\n%s", out)
	}
}
