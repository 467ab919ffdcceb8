package cron

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// gateAgent counts the agent runs in flight, remembers the highest count and
// holds every run until release is closed.
type gateAgent struct {
	mu      sync.Mutex
	running int
	peak    int
	started chan struct{}
	release chan struct{}
}

func (g *gateAgent) RunAgent(ctx context.Context, job AgentJob) (AgentResult, error) {
	g.mu.Lock()
	g.running++
	g.peak = max(g.peak, g.running)
	g.mu.Unlock()
	g.started <- struct{}{}
	<-g.release
	g.mu.Lock()
	g.running--
	g.mu.Unlock()
	return AgentResult{Output: "ok", Outcome: schemas.OutcomeCompleted}, nil
}

func TestTickRunsDueJobsThroughABoundedPool(t *testing.T) {
	home := t.TempDir()
	clock := newFakeClock(utc("2026-05-01T08:59:00Z"))
	agent := &gateAgent{started: make(chan struct{}, 16), release: make(chan struct{})}
	s := newTestScheduler(t, home, clock, agent)
	s.MaxParallel = 2
	for i := range 6 {
		addJob(t, s, JobSpec{Name: fmt.Sprintf("job %d", i), Schedule: "0 9 * * *", Prompt: "report"})
	}
	clock.Set(utc("2026-05-01T09:00:30Z"))
	done := make(chan TickReport, 1)
	go func() {
		rep, err := s.Tick(context.Background())
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	// Two runs start; a third must not while they hold their slots.
	for range 2 {
		<-agent.started
	}
	select {
	case <-agent.started:
		t.Fatal("a third job started while two held both slots")
	case <-time.After(200 * time.Millisecond):
	}
	close(agent.release)
	rep := <-done
	if len(rep.Results) != 6 {
		t.Fatalf("%d results, want 6", len(rep.Results))
	}
	for _, r := range rep.Results {
		if r.State != StateDone {
			t.Fatalf("result %+v", r)
		}
	}
	if agent.peak != 2 {
		t.Fatalf("peak concurrency %d, want 2", agent.peak)
	}
}
