//go:build unix

package grade

import (
	"os/exec"
	"syscall"
)

// groupKill makes cmd a process group leader and its cancellation kill the
// whole group, so a grader's children die with it.
func groupKill(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
