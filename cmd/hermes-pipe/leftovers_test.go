package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/local"
)

// killedRunEnv is os.Environ() with TMPDIR set to a folder of the test's
// own, for runs the test kills: their local sandbox session folders go
// there, and when the test ends what they left is removed. A killed run's
// session folders keep their size-capped tmpfs mounted; in the shared
// temporary folder they stayed after the test, every mount making each
// later bubblewrap start slower (it copies the mount table).
func killedRunEnv(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() { removeLeftovers(t, dir) }) // before TempDir's own removal
	return append(os.Environ(), "TMPDIR="+dir)
}

// removeLeftovers runs the local sandbox's GC in base for each run that
// left session folders there, by run id: GC of every run would also reach
// the sessions of tests running beside this one.
func removeLeftovers(t *testing.T, base string) {
	t.Helper()
	runs := leftoverRuns(t, base)
	if len(runs) == 0 {
		return
	}
	d, err := local.New(sandbox.Config{Local: sandbox.LocalConfig{BaseDir: base}})
	if err != nil {
		t.Errorf("removing what killed runs left in %s: %v", base, err)
		return
	}
	defer releaseSandbox(d)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, run := range runs {
		if _, err := d.GC(ctx, run); err != nil {
			t.Errorf("removing what run %s left in %s: %v", run, base, err)
		}
	}
	if left := leftoverRuns(t, base); len(left) > 0 {
		t.Errorf("session folders of runs %v are still in %s after their GC", left, base)
	}
}

// leftoverRuns are the run ids of the session folders in base (named
// hermes-sbx-<run id>-<random>).
func leftoverRuns(t *testing.T, base string) []string {
	t.Helper()
	ents, err := os.ReadDir(base)
	if err != nil {
		t.Errorf("reading %s: %v", base, err)
		return nil
	}
	seen := map[string]bool{}
	var runs []string
	for _, e := range ents {
		name, ok := strings.CutPrefix(e.Name(), "hermes-sbx-")
		i := strings.LastIndexByte(name, '-')
		if !ok || i <= 0 || seen[name[:i]] {
			continue
		}
		seen[name[:i]] = true
		runs = append(runs, name[:i])
	}
	return runs
}
