// Package ssh is the sandbox driver that runs a rollout's commands on a remote
// host over SSH (golang.org/x/crypto/ssh).
//
// One Driver talks to one host through one TCP connection shared by all of
// its sessions, as SSH channels on it (at most Options.MaxSessions at
// once), plus, when more sessions keep long-lived shells than half of
// MaxSessions, extra connections that carry those shells only (up to
// MaxSessions each, see below). A dropped connection is redialled once,
// after which the failure is reported wrapping sandbox.ErrUnavailable; a
// channel the server refuses is retried for a few seconds first (OpenSSH
// frees a closed channel's place a moment after the close arrives).
// Authentication uses private key files and ssh-agent
// and never prompts. Host keys are checked against known_hosts, strictly
// unless Options.AcceptNewHostKeys is set; a changed key is always refused.
//
// Commands are confined by default (Options.Isolation "bwrap"): the first
// Open probes the host once for bubblewrap, bash, which system folders exist
// and which secrets to mask (a confine.Layout), and runs one command under
// that policy; a host that cannot confine commands makes Open and Preflight
// fail with the host, the reason and the opt-out (--ssh-isolation none),
// never a silent fallback. Commands then run in bash (sh without it) inside
// bwrap, built by confine.Policy as for local sessions: system folders
// read-only with secrets masked, the session folder read-write (and
// Spec.Cwd at its own path, Spec.ReadOnly folders read-only), the session's
// tmp folder as /tmp, HOME in the session folder, a fresh /proc, and PID,
// network, IPC and UTS namespaces of their own, so nothing they start
// outlives the session, and they cannot signal or read the environment of
// any process outside, nor reach the host's loopback; Options.Limits are
// set as rlimits. File operations run inside a sandbox of the same policy,
// so they see what commands see.
//
// Every session keeps one long-lived bash on a channel of its own
// (Options.ShellMode "persistent", the default, on a host with bash) and
// writes every command to it through sandbox.Shell: `cd`, `export`,
// functions and aliases persist, a command that ends the shell (`exit 3`)
// gets a new one with the saved state, and a timeout kills the command's
// processes, not the shell, over a second short channel. A relay on the
// remote side kills the session's processes when the channel ends (Close,
// cancellation, a dropped connection, the shell's end). Confined, the
// shell runs inside bwrap, and a timeout kills every process of its PID
// namespace but the shell. Unconfined, the shell leads no namespace: a
// timeout kills every process of the channel's session (sshd starts each
// channel's command in a new one) but the launcher, the relay and the
// shell, and every process carrying the session's marker, as fresh
// shells' watchers do (see shell.go). These channels are held for a
// session's life: the first MaxSessions/2 of them go on the main
// connection, the next ones on extra connections to the same host, dialled
// as needed, MaxSessions shells each, and kept until Release. A ShellMode
// "fresh" driver, or a host without bash, runs every command in a fresh
// shell on a new channel (confined: a fresh bwrap), as below.
//
// Fresh shells, unconfined, run as the login, as described next.
//
// Each Session owns a private remote folder (a random name made like mktemp
// -d: mkdir under umask 077, failing if the name exists) holding the shell
// state (exported variables and working folder) and, unconfined, a small
// POSIX sh wrapper that restores the state before and saves it after every
// command, so `cd` and `export` persist. sshd starts each command in a new session, so its process
// group holds everything the command starts; a watcher forked first kills that
// group when the command ends (leftover background jobs), and on timeout or
// cancellation also the processes that escaped it (found on Linux hosts by the
// HERMES_SANDBOX variable in /proc/<pid>/environ). The remote host needs
// /bin/sh and grep (confined: bubblewrap able to create user namespaces as
// the login, and bash when limits are set); the login shell must accept a
// POSIX-quoted command line.
// A server that does not close a command's stdin when it exits (OpenSSH does)
// leaves background jobs holding the output running until the timeout.
//
// Files move over one channel each running a short sh script, as raw bytes
// on the channel's stdin (writes: a temporary file renamed over the target)
// or stdout (reads: dd seeks and head stops after the range); no SFTP
// subsystem is needed.
//
// Tests run against a real sshd on loopback started by scripts/sshd.sh (the
// test helper starts it when its env file is missing; it needs root, and
// bubblewrap for the confined tests). They skip only when /usr/sbin/sshd is
// absent, and fail instead when CI is set.
//
// It must not import pipeline or stages.
package ssh
