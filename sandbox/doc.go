// Package sandbox defines the Environment a rollout's tool calls run in and the
// registry of drivers (local, docker, ssh, fake) chosen by scheme. Drivers are
// registered explicitly by cmd (no init magic); callers open a Session per
// rollout and run shell commands through it.
//
// Every Session also moves files natively (Files: ReadRange, Stat,
// WriteFile): byte ranges in and out without a shell command line, base64 or
// the output limit of Exec, relative paths resolved against the shell's
// current folder, and file errors (missing, permission, a folder) kept apart
// from driver failures (ErrUnavailable). The drivers that reach files only
// through a process (docker, ssh) share the POSIX sh scripts of
// fileshell.go, which stream raw bytes on the process's stdin and stdout.
//
// It must not import pipeline or stages.
package sandbox
