package cron

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofrs/flock"
)

const hermesJobs = `{
  "jobs": [
    {
      "id": "a1b2c3d4e5f6",
      "name": "Morning brief",
      "prompt": "Summarise my inbox",
      "skills": ["email"],
      "skill": "email",
      "model": null,
      "provider": null,
      "provider_snapshot": "openrouter",
      "base_url": null,
      "script": null,
      "no_agent": false,
      "context_from": null,
      "schedule": {"kind": "cron", "expr": "0 9 * * *", "display": "0 9 * * *"},
      "schedule_display": "0 9 * * *",
      "repeat": {"times": null, "completed": 4},
      "enabled": true,
      "state": "scheduled",
      "paused_at": null,
      "created_at": "2026-01-01T08:00:00+00:00",
      "next_run_at": "2026-01-05T09:00:00+00:00",
      "last_run_at": "2026-01-04T09:00:03.123456+00:00",
      "last_status": "ok",
      "last_error": null,
      "deliver": "telegram",
      "origin": {"platform": "telegram", "chat_id": "42"},
      "enabled_toolsets": ["web", "terminal"],
      "workdir": null
    },
    {
      "id": "ffeeddccbbaa",
      "name": "Every 30",
      "prompt": "check",
      "schedule": {"kind": "interval", "minutes": 30, "display": "every 30m"},
      "repeat": {"times": null, "completed": 0},
      "enabled": false,
      "state": "paused",
      "next_run_at": null,
      "deliver": "local"
    }
  ],
  "updated_at": "2026-01-04T09:00:04+00:00"
}`

func TestImportHermesKeepsFields(t *testing.T) {
	home := t.TempDir()
	src := filepath.Join(t.TempDir(), "jobs.json")
	os.WriteFile(src, []byte(hermesJobs), 0o600)
	st := NewStore(home)
	now := utc("2026-05-01T10:00:00Z")
	rep, err := ImportHermes(context.Background(), st, home, src, "Europe/London", now, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Imported) != 2 {
		t.Fatalf("%+v", rep)
	}
	// Hermes' web toolset is not available here: imported, with a warning
	// naming it and the known ones (each run fails until the job is edited).
	if w := rep.Warnings["a1b2c3d4e5f6"]; !strings.Contains(w, "unknown toolsets web (known: terminal, file, todo, skills, execute_code)") || !strings.Contains(w, `skill "email" not found`) {
		t.Fatalf("warnings %+v", rep.Warnings)
	}
	tx, err := st.Load()
	if err != nil {
		t.Fatal(err)
	}
	// A past next_run_at is kept: the first pass records what was missed
	// (and alerts) instead of the import dropping it unheard.
	j, _ := tx.Get("a1b2c3d4e5f6")
	if j.Timezone != "Europe/London" || j.NextRunAt != "2026-01-05T09:00:00+00:00" || j.Repeat.Completed != 4 || string(j.Extra["origin"]) == "" {
		t.Fatalf("imported job %+v", j)
	}
	// Unknown Hermes fields survive a rewrite byte for byte (compacted).
	if _, err := ModifyJob(context.Background(), st, home, j.ID, now, func(j *Job) error { j.Name = "renamed"; return nil }); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(st.Path())
	for _, want := range []string{`"origin":{"platform":"telegram","chat_id":"42"}`, `"provider_snapshot":"openrouter"`, `"name":"renamed"`, `"skills":["email"]`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("rewritten store lacks %s", want)
		}
	}
	var v struct{ Jobs []map[string]any }
	if err := json.Unmarshal(raw, &v); err != nil || len(v.Jobs) != 2 {
		t.Fatalf("store is not a Hermes jobs file: %v", err)
	}
	// Importing again refuses duplicates and writes nothing.
	if _, err := ImportHermes(context.Background(), st, home, src, "", now, false); !errors.Is(err, ErrUsage) {
		t.Fatalf("duplicate import: %v", err)
	}
}

func TestCorruptStoreIsNeverEmptied(t *testing.T) {
	home := t.TempDir()
	st := NewStore(home)
	now := utc("2026-05-01T10:00:00Z")
	if _, err := AddJob(context.Background(), st, home, JobSpec{Schedule: "every 5m", Prompt: "a", Timezone: "UTC"}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := AddJob(context.Background(), st, home, JobSpec{Schedule: "every 5m", Prompt: "b", Timezone: "UTC"}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(st.Path() + ".bak"); err != nil {
		t.Fatalf("no backup: %v", err)
	}
	garbage := []byte(`{"jobs": [{"id": "x", `)
	os.WriteFile(st.Path(), garbage, 0o600)
	_, err := AddJob(context.Background(), st, home, JobSpec{Schedule: "every 5m", Prompt: "c", Timezone: "UTC"}, now)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), st.Path()) {
		t.Fatalf("add on corrupt store: %v", err)
	}
	if b, _ := os.ReadFile(st.Path()); string(b) != string(garbage) {
		t.Fatal("corrupt store was modified")
	}
	s := &Scheduler{Home: home, Store: st}
	l, _ := OpenLedger(context.Background(), filepath.Join(home, "cron", "executions.db"))
	defer l.Close()
	s.Ledger = l
	if _, err := s.Tick(context.Background()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("tick on corrupt store: %v", err)
	}
	bak, _ := os.ReadFile(st.Path() + ".bak")
	if !strings.Contains(string(bak), `"prompt":"a"`) {
		t.Fatalf("backup lost the jobs: %s", bak)
	}
}

func TestStoreLockTimeoutRefusesToWrite(t *testing.T) {
	home := t.TempDir()
	st := NewStore(home)
	st.LockTimeout = 200 * time.Millisecond
	os.MkdirAll(st.Dir, 0o700)
	other := flock.New(st.lockPath())
	if ok, _ := other.TryLock(); !ok {
		t.Fatal("could not take the lock")
	}
	_, err := AddJob(context.Background(), st, home, JobSpec{Schedule: "every 5m", Prompt: "a", Timezone: "UTC"}, utc("2026-05-01T10:00:00Z"))
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("err %v, want ErrLocked", err)
	}
	if _, err := os.Stat(st.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("wrote without the lock")
	}
	// That a writer waits for the lock, and writes once it is released, is
	// TestStoreWriterWaitsForTheLock (store_lock_linux_test.go).
	other.Unlock()
	// The tick lock is non-blocking: a held lock means "busy", not an error.
	s := newTestScheduler(t, home, nil, nil)
	tl := flock.New(s.tickLockPath())
	tl.TryLock()
	defer tl.Unlock()
	rep, err := s.Tick(context.Background())
	if err != nil || !rep.Busy {
		t.Fatalf("tick with held lock: %+v %v", rep, err)
	}
}

func TestHandEditIsNoticedByTheIndex(t *testing.T) {
	home := t.TempDir()
	clock := newFakeClock(utc("2026-05-01T10:00:00Z"))
	agent := &fakeAgent{reply: "x"}
	s := newTestScheduler(t, home, clock, agent)
	j := addJob(t, s, JobSpec{Schedule: "@daily", Prompt: "x"})
	// Hand edit: make the job due now without going through the store.
	b, _ := os.ReadFile(s.Store.Path())
	edited := strings.Replace(string(b), string(j.NextRunAt), "2026-05-01T10:00:00Z", 1)
	os.WriteFile(s.Store.Path(), []byte(edited), 0o600)
	if _, fresh := s.Store.CachedNextDue(); fresh {
		t.Fatal("index claims to be fresh after a hand edit")
	}
	rep, err := s.Tick(context.Background())
	if err != nil || len(rep.Results) != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
}

// A crash between linking the backup and renaming it leaves jobs.json.bak.tmp
// behind; the next write must still refresh the backup.
func TestStoreBackupSurvivesStaleLink(t *testing.T) {
	home := t.TempDir()
	st := NewStore(home)
	now := utc("2026-05-01T10:00:00Z")
	if _, err := AddJob(context.Background(), st, home, JobSpec{Schedule: "every 5m", Prompt: "a", Timezone: "UTC"}, now); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(st.Path()+".bak.tmp", []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := AddJob(context.Background(), st, home, JobSpec{Schedule: "every 5m", Prompt: "b", Timezone: "UTC"}, now); err != nil {
		t.Fatal(err)
	}
	bak, err := os.ReadFile(st.Path() + ".bak")
	if err != nil || !strings.Contains(string(bak), `"prompt":"a"`) || strings.Contains(string(bak), `"prompt":"b"`) {
		t.Fatalf("backup after a stale link: %v %s", err, bak)
	}
	if _, err := os.Stat(st.Path() + ".bak.tmp"); !os.IsNotExist(err) {
		t.Fatalf("stale link left behind: %v", err)
	}
}
