// Package docker is the sandbox driver that runs each session in its own
// long-lived container and every command through docker exec, wrapped so
// that `cd` and `export` persist (busybox ash is enough). Containers start
// with secure defaults (all capabilities dropped, no-new-privileges, 256
// pids, 512 MiB, 1 CPU, no network), are labelled with the run and rollout
// ids, and are force-removed at Close; GC removes what a killed run left.
// Files move through one exec each, as raw bytes on its stdin (writes: a
// temporary file renamed over the target) or stdout (reads: dd seeks and head
// stops after the range), run as the session's user so ownership and
// permissions are those of the commands.
//
// It imports sandbox, the moby client and the standard library; it must not
// import pipeline, stages or another driver.
package docker
