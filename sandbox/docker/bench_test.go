package docker

import (
	"context"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/sandboxtest"
)

// BenchmarkExecTrue measures per-command overhead (`true` written to the
// long-lived shell; the shell starts before the timed loop); it reports the
// median.
func BenchmarkExecTrue(b *testing.B) { benchExec(b, "") }

// BenchmarkExecTrueFresh is BenchmarkExecTrue in ShellMode "fresh": one
// docker exec of the state-restoring wrapper per command.
func BenchmarkExecTrueFresh(b *testing.B) { benchExec(b, "fresh") }

func benchExec(b *testing.B, mode string) {
	d := newDriver(b, sandbox.Config{ShellMode: mode})
	s, err := d.Open(context.Background(), sandbox.Spec{RunID: "bench", RolloutID: "exec"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	if _, err := s.Exec(context.Background(), sandbox.Cmd{Command: "true"}); err != nil {
		b.Fatal(err)
	}
	sandboxtest.BenchExec(b, s)
}

// BenchmarkFirstCommand measures a session's open, first command (which
// starts the long-lived shell) and close.
func BenchmarkFirstCommand(b *testing.B) {
	d := newDriver(b, sandbox.Config{})
	sandboxtest.BenchLife(b, d, sandbox.Spec{RunID: "bench", RolloutID: "first"})
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
