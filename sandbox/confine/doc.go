// Package confine owns the confinement of sandbox commands on Linux: the
// Policy (session folder, working folder, extra mounts, network, limits), the
// bubblewrap command line that applies it, the probe of what a machine
// supports, and the Mapper that resolves a path as a confined command sees
// it to the host file behind it, so file operations done from the host see
// exactly what commands see and cannot be led outside by a planted symlink.
//
// It imports nothing of this module, so a remote driver can build the same
// command line for a remote host.
package confine
