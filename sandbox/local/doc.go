// Package local is the sandbox driver that runs commands on this machine:
// each session gets a private folder (mode 0700) and every command runs in a
// fresh bash that restores the previous command's exported environment and
// working folder. The environment is built from an allowlist, so API keys and
// tokens of hermes-pipe itself never reach a command. A timeout kills the
// command's whole process group and session. Files are read and written
// with the OS directly (ReadAt of the range; a temporary file renamed over
// the target).
//
// It imports only sandbox and the standard library; it must not import
// pipeline, stages or another driver.
package local
