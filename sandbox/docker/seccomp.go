package docker

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
	seccomp "github.com/moby/profiles/seccomp"
)

// Every container runs under docker's default seccomp profile (an
// allow-list: what is not named fails with EPERM) with the system calls
// the confined local sandbox denies (confine.SeccompDenied: ptrace,
// process_vm_readv/writev, pidfd_getfd, kcmp, io_uring, key rings, bpf,
// perf events, mounts, ...) taken out of every rule that allows them,
// whatever capability or kernel the rule asks for: docker's default allows
// ptrace and process_vm_* on kernels from 4.8 on, so that a command could
// read or rewrite the container's other processes. The profile goes
// inline in HostConfig.SecurityOpt ("seccomp=<JSON>", what `docker run
// --security-opt seccomp=FILE` sends), built once per process.

// seccompOpt returns the SecurityOpt entry of the profile.
func seccompOpt() (string, error) { return seccompOnce() }

var seccompOnce = sync.OnceValues(func() (string, error) {
	p := seccomp.DefaultProfile()
	deny := map[string]bool{}
	for _, n := range confine.SeccompDenied {
		deny[n] = true
	}
	kept := p.Syscalls[:0]
	// The default profile names its calls in Names only (the single Name
	// is deprecated and unused there), so filtering Names covers it.
	for _, sc := range p.Syscalls {
		had := len(sc.Names)
		sc.Names = slices.DeleteFunc(slices.Clone(sc.Names), func(n string) bool { return deny[n] })
		if had > 0 && len(sc.Names) == 0 {
			continue
		}
		kept = append(kept, sc)
	}
	p.Syscalls = kept
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("docker sandbox: seccomp profile: %w", err)
	}
	return "seccomp=" + string(b), nil
})
