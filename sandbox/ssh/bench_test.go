package ssh

import (
	"context"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/sandboxtest"
)

// BenchmarkExec measures the median per-command overhead (`true`) against
// the test sshd on loopback.
func BenchmarkExec(b *testing.B) {
	d := newDriver(b, sharedSSHD(b).options())
	s, err := d.Open(context.Background(), sandbox.Spec{RunID: "bench", RolloutID: "exec"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	sandboxtest.BenchExec(b, s)
}

// BenchmarkOpenClose measures the median cost of one session's life.
func BenchmarkOpenClose(b *testing.B) {
	d := newDriver(b, sharedSSHD(b).options())
	sandboxtest.BenchOpenClose(b, d, sandbox.Spec{RunID: "bench", RolloutID: "life"})
}
