package cron

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// seedJobs writes n jobs (none due before `now`+1h) in one store write.
func seedJobs(b *testing.B, home string, n int, now time.Time) *Store {
	st := NewStore(home)
	err := st.Update(context.Background(), func(tx *Tx) error {
		for i := range n {
			j, err := NewJob(home, JobSpec{
				Name: fmt.Sprintf("job %d", i), Schedule: "0 */6 * * *", Timezone: "America/New_York",
				Prompt:   fmt.Sprintf("Summarise the overnight logs of service %d and list anything unusual.", i),
				Toolsets: []string{"terminal", "file"}, Deliver: "local",
			}, now)
			if err != nil {
				return err
			}
			if err := tx.Add(j); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// BenchmarkTickNoneDue10k is `cron tick` over 10,000 jobs, none due.
func BenchmarkTickNoneDue10k(b *testing.B) {
	home := b.TempDir()
	now := utc("2026-05-01T10:00:00Z")
	seedJobs(b, home, 10_000, now)
	s := newTestScheduler(b, home, nil, nil)
	s.Now = func() time.Time { return now }
	b.ResetTimer()
	for b.Loop() {
		rep, err := s.Tick(context.Background())
		if err != nil || len(rep.Claims) != 0 || rep.Busy {
			b.Fatalf("%+v %v", rep, err)
		}
	}
}

// BenchmarkTickNoneDue10kColdOpen includes opening the ledger, as one CLI run does.
func BenchmarkTickNoneDue10kColdOpen(b *testing.B) {
	home := b.TempDir()
	now := utc("2026-05-01T10:00:00Z")
	seedJobs(b, home, 10_000, now)
	b.ResetTimer()
	for b.Loop() {
		s, err := NewScheduler(context.Background(), home)
		if err != nil {
			b.Fatal(err)
		}
		s.Now = func() time.Time { return now }
		if _, err := s.Tick(context.Background()); err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}

// BenchmarkAdd10k is `cron add` with 10,000 jobs stored (the store grows by one per iteration).
func BenchmarkAdd10k(b *testing.B) {
	home := b.TempDir()
	now := utc("2026-05-01T10:00:00Z")
	st := seedJobs(b, home, 10_000, now)
	b.ResetTimer()
	for b.Loop() {
		if _, err := AddJob(context.Background(), st, home, JobSpec{Schedule: "every 30m", Prompt: "one more", Timezone: "UTC"}, now); err != nil {
			b.Fatal(err)
		}
	}
}
