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

func benchDriver(b *testing.B, iso, mode string) *Driver {
	d, err := New(sandbox.Config{ShellMode: mode, Local: sandbox.LocalConfig{BaseDir: b.TempDir(), Isolation: iso,
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
			s, err := benchDriver(b, m.iso, m.mode).Open(context.Background(), sandbox.Spec{RunID: "bench", RolloutID: "exec"})
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
			d := benchDriver(b, m.iso, m.mode)
			sandboxtest.BenchLife(b, d, sandbox.Spec{RunID: "bench", RolloutID: "life"})
		})
	}
}

// BenchmarkColdOpenExecClose measures the median life of a session with one
// command when no pooled session can serve it: a new sandbox is started and
// torn down each time (what each worker pays once per run).
func BenchmarkColdOpenExecClose(b *testing.B) {
	d, err := New(sandbox.Config{Local: sandbox.LocalConfig{BaseDir: b.TempDir(), Pool: -1,
		Limits: sandbox.LocalLimits{Processes: 1024, FileSizeBytes: 4 << 30}}})
	if err != nil {
		b.Fatal(err)
	}
	sandboxtest.BenchLife(b, d, sandbox.Spec{RunID: "bench", RolloutID: "cold"})
}
