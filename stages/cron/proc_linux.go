package cron

import "syscall"

// setParentDeathSignal makes a script die with the process that started it,
// so a killed scheduler does not leave a job running unaccounted.
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
