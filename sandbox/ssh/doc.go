// Package ssh is the sandbox driver that runs a rollout's commands on a remote
// host over SSH (golang.org/x/crypto/ssh).
//
// One Driver talks to one host through one TCP connection shared by all of its
// sessions; every command opens a fresh SSH channel on it. A dropped
// connection is redialled once, after which the failure is reported wrapping
// sandbox.ErrUnavailable. Authentication uses private key files and ssh-agent
// and never prompts. Host keys are checked against known_hosts, strictly
// unless Options.AcceptNewHostKeys is set; a changed key is always refused.
//
// Each Session owns a private remote folder (mktemp -d, mode 0700) holding a
// small POSIX sh wrapper and the shell state (exported variables and working
// folder) that it restores before and saves after every command, so `cd` and
// `export` persist. Commands run in their own process group under setsid so a
// timeout or cancellation kills the whole remote process tree. The remote host
// needs /bin/sh, mktemp and setsid.
//
// It must not import pipeline or stages.
package ssh
