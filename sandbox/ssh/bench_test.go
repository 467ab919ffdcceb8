package ssh

import (
	"context"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/sandboxtest"
)

// benchModes are the isolation × shell modes the benchmarks compare:
// unconfined-fresh is what every command cost before confinement and
// long-lived shells.
var benchModes = []struct {
	name string
	set  func(*Options)
}{
	{"confined-persistent", func(o *Options) {}},
	{"confined-fresh", func(o *Options) { o.ShellMode = ShellFresh }},
	{"unconfined", func(o *Options) { o.Isolation = IsolationNone }},
	{"unconfined-fresh", func(o *Options) { o.Isolation, o.ShellMode = IsolationNone, ShellFresh }},
}

func benchDriver(b *testing.B, set func(*Options)) *Driver {
	o := sharedSSHD(b).options()
	set(&o)
	return newDriver(b, o)
}

// BenchmarkExec measures the median per-command overhead (`true`) against
// the test sshd on loopback.
func BenchmarkExec(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			d := benchDriver(b, m.set)
			s, err := d.Open(context.Background(), sandbox.Spec{RunID: "bench", RolloutID: "exec"})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close(context.Background())
			sandboxtest.BenchExec(b, s)
		})
	}
}

// BenchmarkOpenClose measures the median cost of one session's life.
func BenchmarkOpenClose(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			sandboxtest.BenchOpenClose(b, benchDriver(b, m.set), sandbox.Spec{RunID: "bench", RolloutID: "life"})
		})
	}
}

// BenchmarkOpenExecClose measures a session's life with one command, which
// includes starting the long-lived shell.
func BenchmarkOpenExecClose(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			d := benchDriver(b, m.set)
			sandboxtest.BenchLife(b, d, sandbox.Spec{RunID: "bench", RolloutID: "life1"})
		})
	}
}
