// Package local is the sandbox driver that runs commands on this machine:
// each session gets a private folder (mode 0700) and, by default, one
// long-lived bash (sandbox.Shell) that every command is written to; confined,
// that bash is the command of one bubblewrap per session, so the session's
// PID namespace holds everything its commands start. A timeout kills the
// namespace's processes but the shell (the session's cgroup when it has one,
// else by PID namespace in /proc). In the fresh shell mode every command runs
// in a new bash (in a new bubblewrap) that restores the previous command's
// exported environment and working folder, and a timeout kills the command's
// whole process tree. The environment is built from an allowlist, so API
// keys and tokens of hermes-pipe itself never reach a command. Files are read
// and written with the OS directly (ReadAt of the range; a temporary file
// renamed over the target), through confine.Mapper when confined.
//
// Confined bash sessions are pooled (pool.go): a closed session of a Spec
// without its own working folder is reset (every process of its namespace
// killed but bwrap's init and a supervisor, a fresh shell, its folder and
// the sandbox's own tmpfs emptied) and handed to the next Open with the same
// Spec, so a run starts about one bubblewrap per worker instead of one per
// row. Release closes the pooled sessions.
//
// It imports only sandbox, sandbox/confine, the standard library and
// golang.org/x/sys/unix; it must not import pipeline, stages or another
// driver.
package local
