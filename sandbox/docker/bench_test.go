package docker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
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
	var durs []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := s.Exec(context.Background(), sandbox.Cmd{Command: "true"}); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, time.Since(t0))
	}
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Microseconds())/1000, "median-ms")
}

// BenchmarkLifecycle measures container create+start+remove per session.
func BenchmarkLifecycle(b *testing.B) {
	d := newDriver(b, sandbox.Config{})
	var durs []time.Duration
	for b.Loop() {
		t0 := time.Now()
		s, err := d.Open(context.Background(), sandbox.Spec{RunID: "bench", RolloutID: "life"})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, time.Since(t0))
	}
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Microseconds())/1000, "median-ms")
}
