// Package sshtest finds or starts the test sshd of scripts/sshd.sh for
// integration tests outside package ssh (the rollout's acceptance test, the
// CLI's ssh tests) and returns its settings.
//
// Tests skip only when /usr/sbin/sshd is absent, and fail instead when the
// CI variable is set. It imports the standard library only; only tests
// import it.
package sshtest
