package cron

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
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

func TestDefaultNameIsCutAtACharacterBoundary(t *testing.T) {
	home := t.TempDir()
	now := utc("2026-05-01T10:00:00Z")
	prompt := strings.Repeat("日", 49) + "éa long tail that is cut"
	j, err := NewJob(home, JobSpec{Schedule: "every 1h", Timezone: "UTC", Prompt: prompt}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.ValidString(j.Name) || j.Name != strings.Repeat("日", 49)+"é" {
		t.Fatalf("name %q (valid UTF-8: %v)", j.Name, utf8.ValidString(j.Name))
	}
	// A job with only skills is named after its first skill, as in Hermes.
	j, err = NewJob(home, JobSpec{Schedule: "every 1h", Timezone: "UTC", Skills: []string{"daily-digest"}}, now)
	if err != nil || j.Name != "daily-digest" {
		t.Fatalf("skills-only job named %q (%v)", j.Name, err)
	}
}

func TestUnknownToolsetsAreRefusedWithTheKnownList(t *testing.T) {
	home := t.TempDir()
	now := utc("2026-05-01T10:00:00Z")
	st := NewStore(home)
	_, err := AddJob(context.Background(), st, home, JobSpec{Schedule: "every 1h", Timezone: "UTC", Prompt: "search the web", Toolsets: []string{"terminal", "web"}}, now)
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), `unknown toolsets web (known: terminal, file, todo, skills, execute_code)`) {
		t.Fatalf("add: %v", err)
	}
	j, err := AddJob(context.Background(), st, home, JobSpec{Schedule: "every 1h", Timezone: "UTC", Prompt: "tidy", Toolsets: []string{"terminal", "file"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	bad := []string{"browser"}
	if _, err := EditJob(context.Background(), st, home, j.ID, JobEdit{Toolsets: &bad}, now); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "known: terminal, file, todo, skills, execute_code") {
		t.Fatalf("edit: %v", err)
	}
}

// A stored job asking for a toolset the agent lacks (imported from Hermes)
// fails each execution naming it, instead of running without it.
func TestExecutionWithUnknownToolsetFails(t *testing.T) {
	home := t.TempDir()
	writeHandStore(t, home, `{"jobs":[{"id":"webjob","prompt":"search the news","schedule":{"kind":"interval","minutes":60},"next_run_at":"2026-05-01T09:00:00Z","timezone":"UTC","enabled_toolsets":["web","terminal"]}]}`)
	clock := newFakeClock(utc("2026-05-01T09:00:10Z"))
	agent := &fakeAgent{reply: "ok"}
	s := newTestScheduler(t, home, clock, agent)
	rep, err := s.Tick(context.Background())
	if err != nil || len(rep.Results) != 1 {
		t.Fatalf("tick %+v %v", rep, err)
	}
	if r := rep.Results[0]; r.State != StateFailed || !strings.Contains(r.Error, "unknown toolsets web (known: terminal, file, todo, skills, execute_code)") || agent.total() != 0 {
		t.Fatalf("result %+v, agent runs %d", r, agent.total())
	}
}

func TestEditRefusesAOneShotInThePast(t *testing.T) {
	home := t.TempDir()
	now := utc("2026-05-01T10:00:00Z")
	st := NewStore(home)
	j, err := AddJob(context.Background(), st, home, JobSpec{Schedule: "every 1h", Timezone: "UTC", Prompt: "x"}, now)
	if err != nil {
		t.Fatal(err)
	}
	past := "2026-04-30T10:00:00Z"
	if _, err := EditJob(context.Background(), st, home, j.ID, JobEdit{Schedule: &past}, now); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "in the past") {
		t.Fatalf("edit to a past one-shot: %v", err)
	}
}
