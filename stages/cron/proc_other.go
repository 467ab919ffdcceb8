//go:build !linux

package cron

import "syscall"

func setParentDeathSignal(*syscall.SysProcAttr) {}
