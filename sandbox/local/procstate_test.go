package local

import (
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// TestProcFilesSeeChangesAndEnd: the kept /proc files of a process show
// its state as it is at each read (a limit changed in between is seen) and
// fail once the process is gone.
func TestProcFilesSeeChangesAndEnd(t *testing.T) {
	c := exec.Command("sleep", "1000")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	pid := c.Process.Pid
	defer func() { _ = c.Process.Kill(); _ = c.Wait() }()
	var f procFiles
	defer f.close()
	before, err := f.state(pid, withFDs)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := f.state(pid, withFDs); err != nil || before.differs(again, "process") != nil {
		t.Fatalf("two reads of an unchanged process differ: %v, %v", err, before.differs(again, "process"))
	}
	lim := unix.Rlimit{Cur: 55, Max: 55}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		t.Fatal(err)
	}
	after, err := f.state(pid, withFDs)
	if err != nil {
		t.Fatal(err)
	}
	if before.differs(after, "process") == nil {
		t.Errorf("a changed limit is not seen through the kept files")
	}
	_ = c.Process.Kill()
	_ = c.Wait()
	if _, err := f.state(pid, withFDs); err == nil {
		t.Errorf("the files of a process that is gone still read")
	}
}
