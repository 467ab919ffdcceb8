package confine

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// TestCgroupLimitsProcesses: a loop starting 100 sleeps in a group limited to
// 20 processes gets at most 20, and KillAll plus Remove clear the group.
func TestCgroupLimitsProcesses(t *testing.T) {
	r := Probe(context.Background())
	if r.Cgroup == "" {
		t.Skip("no usable cgroup here")
	}
	name := "hermes-confine-test-" + strconv.Itoa(os.Getpid())
	c, err := NewCgroup(r.Cgroup, name, Limits{Processes: 20, MemoryBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Remove()
	argv := c.Wrap([]string{"/bin/bash", "-c", `for i in $(seq 100); do sleep 600 </dev/null >/dev/null 2>&1 & done 2>/dev/null; echo started`})
	// bash gives up (after its own fork retries) once the group is full.
	out, _ := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	p := c.Procs()
	if len(p) == 0 || len(p) > 20 {
		t.Fatalf("group holds %d processes, want 1..20 (%s)", len(p), out)
	}
	if err := c.KillAll(); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, d := range c.Dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("cgroup %s still there", d)
		}
	}
	if RemoveStale("hermes-confine-test-") != 0 {
		t.Errorf("RemoveStale found groups after Remove")
	}
}
