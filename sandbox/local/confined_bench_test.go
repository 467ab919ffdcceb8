package local

import (
	"context"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

func benchExec(b *testing.B, iso string) {
	d, err := New(sandbox.Config{Local: sandbox.LocalConfig{BaseDir: b.TempDir(), Isolation: iso, ShellMode: "fresh"}})
	if err != nil {
		b.Fatal(err)
	}
	s, err := d.Open(context.Background(), sandbox.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	for b.Loop() {
		if _, err := s.Exec(context.Background(), sandbox.Cmd{Command: "printf x"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecConfined and BenchmarkExecUnconfined measure one short
// command in fresh shell mode, confined and not.
func BenchmarkExecConfined(b *testing.B)   { benchExec(b, "") }
func BenchmarkExecUnconfined(b *testing.B) { benchExec(b, "none") }
