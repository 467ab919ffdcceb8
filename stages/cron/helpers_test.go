package cron

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// fakeClock is a manual clock shared by every participant of a test.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []clockWaiter
}

type clockWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{now: t.UTC()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After fires when the clock is set at or past now+d.
func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	at := c.now.Add(d)
	if !at.After(c.now) {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, clockWaiter{at, ch})
	return ch
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t.UTC()
	keep := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
		} else {
			keep = append(keep, w)
		}
	}
	c.waiters = keep
}

func (c *fakeClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// fakeAgent records every run it is asked for and answers with a fixed text.
type fakeAgent struct {
	mu    sync.Mutex
	runs  map[string]int // job id + scheduled instant -> count
	jobs  []AgentJob
	reply string
	delay time.Duration
	hold  chan struct{} // when set, a run waits until it is closed
	// started, when set, receives one value per run as the run begins (a
	// send that would block is dropped), so a test waits for a run to be
	// under way instead of polling for it.
	started chan struct{}
}

func (f *fakeAgent) RunAgent(ctx context.Context, job AgentJob) (AgentResult, error) {
	f.mu.Lock()
	if f.runs == nil {
		f.runs = map[string]int{}
	}
	f.runs[job.JobID+"@"+job.ScheduledAt.UTC().Format(time.RFC3339)]++
	f.jobs = append(f.jobs, job)
	f.mu.Unlock()
	if f.started != nil {
		select {
		case f.started <- struct{}{}:
		default:
		}
	}
	if f.hold != nil {
		select {
		case <-f.hold:
		case <-ctx.Done():
			return AgentResult{Outcome: schemas.OutcomeTimeout, Error: ctx.Err().Error()}, nil
		}
	}
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
			return AgentResult{Outcome: schemas.OutcomeTimeout, Error: ctx.Err().Error()}, nil
		}
	}
	return AgentResult{Output: f.reply + " " + job.ScheduledAt.UTC().Format(time.RFC3339), Outcome: schemas.OutcomeCompleted}, nil
}

func (f *fakeAgent) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[key]
}

func (f *fakeAgent) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.runs {
		n += c
	}
	return n
}

// newTestScheduler opens a scheduler on home with its own store and ledger handles.
func newTestScheduler(t testing.TB, home string, clock *fakeClock, agent AgentRunner) *Scheduler {
	t.Helper()
	s, err := NewScheduler(context.Background(), home)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if clock != nil {
		s.Now = clock.Now
		s.Store.Now = clock.Now
	}
	s.Agent = agent
	s.WebhookBackoff = func(int) time.Duration { return time.Millisecond }
	return s
}

func addJob(t testing.TB, s *Scheduler, spec JobSpec) *Job {
	t.Helper()
	if spec.Timezone == "" {
		spec.Timezone = "UTC"
	}
	j, err := AddJob(context.Background(), s.Store, s.Home, spec, s.now())
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func writeScript(t testing.TB, home, name, body string) {
	t.Helper()
	dir := ScriptsDir(home)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
}

// statesOf summarises a job's history as "state@RFC3339" lines.
func statesOf(t testing.TB, l *Ledger, jobID string) []string {
	t.Helper()
	h, err := l.History(context.Background(), jobID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range h {
		out = append(out, fmt.Sprintf("%s@%s", e.State, e.ScheduledAt.Format(time.RFC3339)))
	}
	sort.Strings(out)
	return out
}
