// Package docker is the sandbox driver that runs each session in its own
// long-lived container. Commands go to one long-lived shell per container:
// the image's sh (busybox ash or bash), started by one docker exec with its
// three streams attached and driven by sandbox.Shell, so `cd`, `export`,
// functions and aliases persist and a command costs a write and a read on
// the daemon's connection, not an exec. A command that ends the shell (exit,
// exec, a crash) gets a new one with the exported environment and working
// folder restored from the state folder in the container. A timeout kills
// every process of the container but PID 1 and the shell from a second
// exec; when the runtime cannot start one (the command took every pid, a
// fork bomb) the container is restarted: its processes die, its files stay.
// ShellMode "fresh" runs every command through its own docker exec instead,
// wrapped by sandbox.StateScript so that `cd` and `export` persist.
//
// Containers start with secure defaults (all capabilities dropped,
// no-new-privileges, 256 pids, 512 MiB, 1 CPU, no network), are labelled
// with the run and rollout ids, and are force-removed at Close; GC removes
// what a killed run left. Files move through one exec each, as raw bytes on
// its stdin (writes: a temporary file renamed over the target) or stdout
// (reads: dd seeks and head stops after the range), run as the session's
// user so ownership and permissions are those of the commands; relative
// paths resolve against the shell's working folder, read from the state
// folder.
//
// It imports sandbox, the moby client and the standard library; it must not
// import pipeline, stages or another driver.
package docker
