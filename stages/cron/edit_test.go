package cron

import (
	"context"
	"errors"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

func TestEditJobAppliesOnlyWhatIsSet(t *testing.T) {
	home := t.TempDir()
	clock := newFakeClock(utc("2026-05-01T08:00:00Z"))
	s := newTestScheduler(t, home, clock, nil)
	j := addJob(t, s, JobSpec{Name: "digest", Schedule: "0 9 * * *", Prompt: "daily digest", Skills: []string{"a"}, Deliver: "local"})
	ctx := context.Background()

	// The zone applies before the schedule: 09:00 in Tokyo is 00:00 UTC.
	got, err := EditJob(ctx, s.Store, home, j.ID, JobEdit{Timezone: ptr("Asia/Tokyo"), Skills: &[]string{"b", "c"},
		Timeout: ptr(90 * time.Second)}, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "digest" || got.Prompt != "daily digest" || got.Timezone != "Asia/Tokyo" || got.NextRunAt != "2026-05-02T00:00:00Z" {
		t.Fatalf("after zone edit: name %q prompt %q tz %q next %q", got.Name, got.Prompt, got.Timezone, got.NextRunAt)
	}
	if len(got.Skills) != 2 || got.Skill != "b" || got.Policy.TimeoutSeconds == nil || *got.Policy.TimeoutSeconds != 90 {
		t.Fatalf("skills %v skill %q timeout %v", got.Skills, got.Skill, got.Policy.TimeoutSeconds)
	}
	// A one-shot schedule runs once unless a repeat count is set.
	got, err = EditJob(ctx, s.Store, home, j.ID, JobEdit{Schedule: ptr("in 30m")}, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got.Schedule.Kind != KindOnce || got.Repeat.Times == nil || *got.Repeat.Times != 1 {
		t.Fatalf("one-shot: kind %v repeat %v", got.Schedule.Kind, got.Repeat.Times)
	}
	// Bad values are usage errors and change nothing.
	for name, e := range map[string]JobEdit{
		"zone":    {Timezone: ptr("Mars/Olympus")},
		"deliver": {Deliver: ptr("carrier-pigeon:x")},
		"empty":   {Prompt: ptr(""), Skills: &[]string{}},
	} {
		if _, err := EditJob(ctx, s.Store, home, j.ID, e, clock.Now()); !errors.Is(err, ErrUsage) {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
	}
	tx, _ := s.Store.Load()
	after, _ := tx.Get(j.ID)
	if after.Timezone != "Asia/Tokyo" || after.Prompt != "daily digest" || after.Deliver != "local" {
		t.Fatalf("a refused edit changed the job: %+v", after)
	}
}
