package local

import (
	"context"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/sandboxtest"
)

// benchModes are the isolation × shell-mode pairs the benchmarks compare.
var benchModes = []struct{ name, iso, mode string }{
	{"confined/persistent", "", ""},
	{"confined/fresh", "", "fresh"},
	{"unconfined/persistent", "none", ""},
	{"unconfined/fresh", "none", "fresh"},
}

// benchDriver is a driver of the given isolation, shell mode and pool
// (sandbox.LocalConfig.Pool: negative = none).
func benchDriver(b *testing.B, iso, mode string, pool int) *Driver {
	d, err := New(sandbox.Config{ShellMode: mode, Local: sandbox.LocalConfig{BaseDir: b.TempDir(), Isolation: iso, Pool: pool,
		Limits: sandbox.LocalLimits{Processes: 1024, FileSizeBytes: 4 << 30}}})
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkExec measures the median per-command overhead (`true`) in one
// session.
func BenchmarkExec(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			s, err := benchDriver(b, m.iso, m.mode, 0).Open(context.Background(), sandbox.Spec{RunID: "bench", RolloutID: "exec"})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close(context.Background())
			sandboxtest.BenchExec(b, s)
		})
	}
}

// BenchmarkOpenExecClose measures the median cost of one session's life
// with one command in it (the persistent shell starts on the first command).
func BenchmarkOpenExecClose(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			d := benchDriver(b, m.iso, m.mode, 0)
			sandboxtest.BenchLife(b, d, sandbox.Spec{RunID: "bench", RolloutID: "life"})
		})
	}
}

// BenchmarkColdOpenExecClose measures the median life of a session with one
// command when no pooled session can serve it: a new sandbox is started and
// torn down each time (what each worker pays once per run).
func BenchmarkColdOpenExecClose(b *testing.B) {
	sandboxtest.BenchLife(b, benchDriver(b, "", "", -1), sandbox.Spec{RunID: "bench", RolloutID: "cold"})
}
