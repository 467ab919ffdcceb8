package local

import (
	"context"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/sandboxtest"
)

func benchDriver(b *testing.B) *Driver {
	d, err := New(sandbox.Config{Local: sandbox.LocalConfig{BaseDir: b.TempDir()}})
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkExec measures the median per-command overhead (`true`).
func BenchmarkExec(b *testing.B) {
	d := benchDriver(b)
	s, err := d.Open(context.Background(), sandbox.Spec{RunID: "bench", RolloutID: "exec"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	sandboxtest.BenchExec(b, s)
}

// BenchmarkOpenClose measures the median cost of one session's life.
func BenchmarkOpenClose(b *testing.B) {
	sandboxtest.BenchOpenClose(b, benchDriver(b), sandbox.Spec{RunID: "bench", RolloutID: "life"})
}
