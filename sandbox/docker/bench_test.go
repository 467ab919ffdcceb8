package docker

import (
	"context"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/sandboxtest"
)

// BenchmarkExecTrue measures per-command overhead (docker exec of the
// state-restoring wrapper around `true`); it reports the median.
func BenchmarkExecTrue(b *testing.B) {
	d := newDriver(b, sandbox.Config{})
	s, err := d.Open(context.Background(), sandbox.Spec{RunID: "bench", RolloutID: "exec"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	sandboxtest.BenchMedian(b, func() error {
		_, err := s.Exec(context.Background(), sandbox.Cmd{Command: "true"})
		return err
	})
}

// BenchmarkLifecycle measures container create+start+remove per session.
func BenchmarkLifecycle(b *testing.B) {
	d := newDriver(b, sandbox.Config{})
	sandboxtest.BenchMedian(b, func() error {
		s, err := d.Open(context.Background(), sandbox.Spec{RunID: "bench", RolloutID: "life"})
		if err != nil {
			return err
		}
		return s.Close(context.Background())
	})
}

// BenchmarkFiles1MiB measures a 1 MiB WriteFile plus reading it back.
func BenchmarkFiles1MiB(b *testing.B) {
	d := newDriver(b, sandbox.Config{})
	s, err := d.Open(context.Background(), sandbox.Spec{RunID: "bench", RolloutID: "files"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	sandboxtest.BenchWriteRead1MiB(b, s)
}
