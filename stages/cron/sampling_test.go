package cron

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox/fake"
)

// A job's sampling parameters are stored in jobs.json, survive a reload and
// reach the model in every chat request of its agent executions; an edit
// replaces only what it gives, ClearSampling drops them, and a stored bad
// value makes the job invalid on load (reported, never run).
func TestJobSamplingReachesTheModel(t *testing.T) {
	home := t.TempDir()
	url, bodies := recordingServer(t, `{"scripts": [{"match": "report", "steps": [{"content": "done"}]}]}`)
	clock := newFakeClock(utc("2026-05-01T08:59:00Z"))
	s := newTestScheduler(t, home, clock, &RolloutRunner{Driver: fake.New(), DefaultBaseURL: url, DefaultModel: "m"})
	temp, seed := 0.25, int64(7)
	extra, err := ExtraBody(`{"top_k": 20, "chat_template_kwargs": {"enable_thinking": false}}`)
	if err != nil {
		t.Fatal(err)
	}
	j := addJob(t, s, JobSpec{Schedule: "0 9 * * *", Prompt: "nightly report",
		Sampling: Sampling{Temperature: &temp, MaxTokens: 300, Seed: &seed, ExtraBody: extra}})

	tick := func(at string) map[string]any {
		t.Helper()
		before := len(bodies())
		clock.Set(utc(at))
		rep, err := s.Tick(context.Background())
		if err != nil || len(rep.Results) != 1 || rep.Results[0].State != StateDone {
			t.Fatalf("tick: %+v %v", rep, err)
		}
		all := bodies()
		if len(all) != before+1 {
			t.Fatalf("%d chat requests, want 1", len(all)-before)
		}
		var body map[string]any
		if err := json.Unmarshal([]byte(all[len(all)-1]), &body); err != nil {
			t.Fatal(err)
		}
		return body
	}
	body := tick("2026-05-01T09:00:10Z")
	kw, _ := body["chat_template_kwargs"].(map[string]any)
	if body["temperature"] != 0.25 || body["max_tokens"] != 300.0 || body["seed"] != 7.0 || body["top_k"] != 20.0 || kw["enable_thinking"] != false {
		t.Fatalf("request body %v", body)
	}
	if _, ok := body["top_p"]; ok {
		t.Fatalf("top_p sent though unset: %v", body)
	}

	// An edit of one parameter keeps the others; stored, it survives a reload.
	topP := 0.5
	if _, err := EditJob(context.Background(), s.Store, home, j.ID, JobEdit{TopP: &topP, ExtraBody: ptr("")}, clock.Now()); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(home, "cron", "jobs.json"))
	if !strings.Contains(string(raw), `"sampling":{"temperature":0.25,"top_p":0.5,"max_tokens":300,"seed":7}`) {
		t.Fatalf("jobs.json:\n%s", raw)
	}
	body = tick("2026-05-02T09:00:10Z")
	if body["temperature"] != 0.25 || body["top_p"] != 0.5 || body["max_tokens"] != 300.0 {
		t.Fatalf("after edit: %v", body)
	}
	if _, ok := body["top_k"]; ok {
		t.Fatalf("extra body kept after it was removed: %v", body)
	}

	// ClearSampling drops them all: nothing is sent, nothing stored.
	if _, err := EditJob(context.Background(), s.Store, home, j.ID, JobEdit{ClearSampling: true}, clock.Now()); err != nil {
		t.Fatal(err)
	}
	body = tick("2026-05-03T09:00:10Z")
	for _, k := range []string{"temperature", "top_p", "max_tokens", "seed"} {
		if _, ok := body[k]; ok {
			t.Fatalf("%s sent after ClearSampling: %v", k, body)
		}
	}
	if raw, _ := os.ReadFile(filepath.Join(home, "cron", "jobs.json")); strings.Contains(string(raw), `"sampling"`) {
		t.Fatalf("sampling still stored:\n%s", raw)
	}

	// Bad values are refused by edit, and a bad stored value on load.
	bad := -1.0
	if _, err := EditJob(context.Background(), s.Store, home, j.ID, JobEdit{Temperature: &bad}, clock.Now()); err == nil || !strings.Contains(err.Error(), "temperature -1") {
		t.Fatalf("edit to temperature -1: %v", err)
	}
	if _, err := EditJob(context.Background(), s.Store, home, j.ID, JobEdit{Temperature: &temp, ExtraBody: ptr(`{"temperature": 1}`)}, clock.Now()); err == nil || !strings.Contains(err.Error(), `"temperature" is also set`) {
		t.Fatalf("extra body naming temperature: %v", err)
	}
	path := filepath.Join(home, "cron", "jobs.json")
	raw, _ = os.ReadFile(path)
	if !strings.Contains(string(raw), `"policy":{}`) {
		t.Fatalf("policy not empty:\n%s", raw)
	}
	raw = []byte(strings.Replace(string(raw), `"policy":{}`, `"policy":{"sampling":{"top_p":3}}`, 1))
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	tx, err := s.Store.Load()
	if err != nil {
		t.Fatal(err)
	}
	if inv := tx.Invalid(); len(inv) != 1 || inv[0].ID != j.ID || !strings.Contains(inv[0].Error, "top_p 3") {
		t.Fatalf("invalid jobs %+v\n%s", inv, raw)
	}
}
