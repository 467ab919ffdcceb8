package main

import (
	"fmt"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
	"github.com/hermes-pipe/hermes-pipe/stages/cron"
	"github.com/urfave/cli/v2"
)

// The per-row ceilings of the confined local sandbox (memory, disk, CPU
// weight), on by default: see sandbox/confine/ceilings.go for why these
// defaults.

// sizeValue is the value of a size flag: "auto" (a share of this machine,
// resolved once the number of workers is known), "none" or 0 (no ceiling),
// or a size (bytes, or with a unit: 512M, 2G).
type sizeValue struct {
	auto bool
	n    int64
}

func (v *sizeValue) Set(s string) error {
	if strings.EqualFold(strings.TrimSpace(s), "auto") {
		*v = sizeValue{auto: true}
		return nil
	}
	n, err := confine.ParseBytes(s)
	if err != nil {
		return fmt.Errorf("%w (or auto)", err)
	}
	*v = sizeValue{n: n}
	return nil
}

// Get is the value run.json records (flag.Getter): as the flag reads it.
func (v *sizeValue) Get() any { return v.String() }

func (v *sizeValue) String() string {
	switch {
	case v == nil:
		return ""
	case v.auto:
		return "auto"
	}
	return confine.FormatBytes(v.n)
}

// ceilingFlags are the flags of the local sandbox's per-session ceilings.
// Each call makes new values (a flag's value is set in place).
func ceilingFlags() []cli.Flag { return []cli.Flag{memoryFlag(), diskFlag(), cpuWeightFlag()} }

func memoryFlag() cli.Flag {
	return &cli.GenericFlag{Name: "local-max-memory", Value: &sizeValue{auto: true}, Usage: "memory per confined local session: its cgroup (its processes and the tmpfs pages they write, its folder included); past it the kernel kills the session's largest process, the row's command. auto = this machine's memory / --workers, at most half of it, at least 512 MiB; a size (2G, 512M, bytes); none or 0 = no ceiling. Without a cgroup memory controller: address space per process"}
}

func diskFlag() cli.Flag {
	return &cli.GenericFlag{Name: "local-max-disk", Value: &sizeValue{auto: true}, Usage: "size of each confined local session folder (home, /tmp, the shell's state), a tmpfs: a command that fills it gets ENOSPC and the next row finds it empty; its pages count against --local-max-memory. auto = half of auto memory, 256 MiB to 4 GiB; a size; none or 0 = no ceiling (the folder on the temporary folder's disk). Needs root: elsewhere a warning says there is none"}
}

func cpuWeightFlag() cli.Flag {
	return &cli.IntFlag{Name: "local-cpu-weight", Value: confine.DefaultCPUWeight, Usage: "cgroup CPU weight of each confined local session (1..10000; 100 = a plain process's): busy sessions share the CPU in proportion, however many processes each runs; 0 = the cgroup's default"}
}

// localCeilings resolves the ceiling flags for workers sessions at once
// into l.
func localCeilings(c *cli.Context, workers int, l *sandbox.LocalLimits) {
	l.MemoryBytes = sizeFlag(c, "local-max-memory", confine.DefaultMemory(workers))
	l.DiskBytes = sizeFlag(c, "local-max-disk", confine.DefaultDisk(workers))
	l.CPUWeight = max(c.Int("local-cpu-weight"), 0)
}

// sizeFlag is the value of the size flag name, auto when unset.
func sizeFlag(c *cli.Context, name string, auto int64) int64 {
	v, ok := c.Generic(name).(*sizeValue)
	if !ok || v == nil || v.auto {
		return auto
	}
	return v.n
}

// defaultCeilings are the ceilings of a local sandbox that no flag
// configures (cron's agent jobs: DefaultMaxParallel at once).
func defaultCeilings(l sandbox.LocalLimits) sandbox.LocalLimits {
	w := cron.DefaultMaxParallel
	l.MemoryBytes, l.DiskBytes, l.CPUWeight = confine.DefaultMemory(w), confine.DefaultDisk(w), confine.DefaultCPUWeight
	return l
}

// ceilingWarnings prints what the local driver d cannot hold of its
// ceilings on this machine.
func ceilingWarnings(c *cli.Context, label string, d sandbox.Driver) {
	if w, ok := d.(interface{ Warnings() []string }); ok {
		for _, s := range w.Warnings() {
			fmt.Fprintf(c.App.ErrWriter, "%s: warning: %s\n", label, s)
		}
	}
}

// describeCeilings is what `sandbox check` prints of the ceilings its
// flags give with --workers sessions at once.
func describeCeilings(c *cli.Context, r confine.Report) string {
	var l sandbox.LocalLimits
	workers := max(c.Int("workers"), 1)
	localCeilings(c, workers, &l)
	return fmt.Sprintf("per-session ceilings for --workers %d (set by --local-max-memory, --local-max-disk, --local-cpu-weight):\n%s",
		workers, r.Describe(confine.Ceilings{MemoryBytes: l.MemoryBytes, DiskBytes: l.DiskBytes, CPUWeight: l.CPUWeight}))
}
