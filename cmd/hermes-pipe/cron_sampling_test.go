package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox/fake"
	"github.com/hermes-pipe/hermes-pipe/stages/cron"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// `cron add` and `cron edit` take the sampling flags; the job stores them,
// `cron show` prints them, and `cron run` sends them in the chat request
// that reaches the model. Bad values are usage errors naming the flag.
func TestCronSamplingFlagsReachTheModel(t *testing.T) {
	now := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	fk, deps := agentOnFake(t, "status", "all good", &now)
	home := t.TempDir()
	out, err := cronApp(t, deps, "--home", home, "add", "--tz", "UTC", "--temperature", "0.2", "--top-p", "0.9",
		"--max-tokens", "256", "--sampling-seed", "11", "--extra-body", `{"top_k": 20, "min_p": 0.05}`, "0 10 * * *", "status", "check")
	if err != nil {
		t.Fatalf("add: %v\n%s", err, out)
	}
	id := regexp.MustCompile(`added (\S+)`).FindStringSubmatch(out)[1]
	if !strings.Contains(out, `sampling: temperature 0.2, top_p 0.9, max_tokens 256, seed 11, extra body {"top_k":20,"min_p":0.05}`) {
		t.Fatalf("add output lacks the sampling line:\n%s", out)
	}
	run := func() map[string]any {
		t.Helper()
		now = now.Add(time.Minute) // a manual run's id is its time
		before := len(fk.Requests())
		if out, err := cronApp(t, deps, "--home", home, "run", id); err != nil {
			t.Fatalf("run: %v\n%s", err, out)
		}
		reqs := fk.Requests()
		if len(reqs) != before+1 {
			t.Fatalf("%d requests, want 1", len(reqs)-before)
		}
		var body map[string]any
		if err := json.Unmarshal([]byte(reqs[len(reqs)-1]), &body); err != nil {
			t.Fatal(err)
		}
		return body
	}
	body := run()
	for k, want := range map[string]any{"temperature": 0.2, "top_p": 0.9, "max_tokens": 256.0, "seed": 11.0, "top_k": 20.0, "min_p": 0.05} {
		if body[k] != want {
			t.Errorf("request %s = %v, want %v (body %v)", k, body[k], want, body)
		}
	}

	// An edit replaces what it gives and keeps the rest; show prints it.
	if out, err := cronApp(t, deps, "--home", home, "edit", "--temperature", "0.7", "--extra-body", "{}", id); err != nil {
		t.Fatalf("edit: %v\n%s", err, out)
	}
	out, err = cronApp(t, deps, "--home", home, "show", id)
	if err != nil || !strings.Contains(out, "sampling: temperature 0.7, top_p 0.9, max_tokens 256, seed 11\n") {
		t.Fatalf("show: %v\n%s", err, out)
	}
	body = run()
	if body["temperature"] != 0.7 || body["top_p"] != 0.9 || body["top_k"] != nil {
		t.Fatalf("after edit: %v", body)
	}

	// --no-sampling drops them: nothing sent, nothing shown.
	if out, err := cronApp(t, deps, "--home", home, "edit", "--no-sampling", id); err != nil || strings.Contains(out, "sampling:") {
		t.Fatalf("edit --no-sampling: %v\n%s", err, out)
	}
	body = run()
	for _, k := range []string{"temperature", "top_p", "max_tokens", "seed"} {
		if _, ok := body[k]; ok {
			t.Errorf("%s sent after --no-sampling: %v", k, body)
		}
	}

	// The sampling flags are spelled and checked as generate's, and --json
	// lists them under the job's policy.
	if out, err := cronApp(t, deps, "--home", home, "edit", "--top-p", "0.4", "--extra-body", `{"top_k": 8}`, id); err != nil {
		t.Fatalf("edit: %v\n%s", err, out)
	}
	out, err = cronApp(t, deps, "--home", home, "list", "--json")
	var listed []struct {
		Policy struct {
			Sampling json.RawMessage `json:"sampling"`
		} `json:"policy"`
	}
	if err != nil || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 ||
		!sameJSON(listed[0].Policy.Sampling, []byte(`{"top_p":0.4,"extra_body":{"top_k":8}}`)) {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	body = run()
	if body["top_p"] != 0.4 || body["top_k"] != 8.0 || body["temperature"] != nil {
		t.Fatalf("after edit --top-p --extra-body: %v", body)
	}
	// An empty --extra-body removes the job's, as '{}' does.
	if out, err := cronApp(t, deps, "--home", home, "edit", "--extra-body", "", id); err != nil || !strings.Contains(out, "sampling: top_p 0.4\n") {
		t.Fatalf("edit --extra-body '': %v\n%s", err, out)
	}
	if body = run(); body["top_k"] != nil || body["top_p"] != 0.4 {
		t.Fatalf("after edit --extra-body '': %v", body)
	}

	for _, bad := range [][]string{
		{"edit", "--top-p", "2", id},
		{"edit", "--extra-body", "[1]", id},
		{"edit", "--temperature", "0.5", "--extra-body", `{"temperature": 1}`, id},
		{"add", "--top-p", "0", "0 10 * * *", "status"},
		{"add", "--temperature", "-1", "0 10 * * *", "status"},
		{"add", "--max-tokens", "-5", "0 10 * * *", "status"},
		{"add", "--extra-body", `{"model": "x"}`, "0 10 * * *", "status"},
		{"add", "--extra-body", `{"top_k": 1} {}`, "0 10 * * *", "status"},
	} {
		out, err := cronApp(t, deps, append([]string{"--home", home}, bad...)...)
		if err == nil || exitCode(err) != exitUsage {
			t.Errorf("%q: err %v (exit %d), want a usage error\n%s", bad, err, exitCode(err), out)
		}
	}
}

// A job stored before jobs had sampling parameters (no "sampling" in its
// policy) loads and runs as before, sending none; `cron edit` then gives it
// some without touching its other fields.
func TestCronJobWithoutSamplingStillLoads(t *testing.T) {
	now := time.Date(2026, 5, 1, 9, 0, 30, 0, time.UTC)
	fk, deps := agentOnFake(t, "disk", "fine", &now)
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "cron"), 0o700); err != nil {
		t.Fatal(err)
	}
	old := `{"jobs":[{"id":"diskjob0001","name":"disk","prompt":"check the disk","schedule":{"kind":"cron","expr":"0 9 * * *"},` +
		`"repeat":{"times":null,"completed":0},"enabled":true,"state":"scheduled","next_run_at":"2026-05-01T09:00:00+00:00",` +
		`"deliver":"local","timezone":"UTC","policy":{"max_turns":7,"overlap":"forbid"}}],"updated_at":"2026-04-30T23:00:00+00:00"}`
	if err := os.WriteFile(filepath.Join(home, "cron", "jobs.json"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := cronApp(t, deps, "--home", home, "tick")
	if err != nil || !strings.Contains(out, "diskjob0001") {
		t.Fatalf("tick: %v\n%s", err, out)
	}
	reqs := fk.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1\n%s", len(reqs), out)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(reqs[0]), &body); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"temperature", "top_p", "max_tokens", "seed"} {
		if _, ok := body[k]; ok {
			t.Errorf("%s sent for a job without sampling: %v", k, body)
		}
	}
	out, err = cronApp(t, deps, "--home", home, "edit", "--temperature", "0.6", "diskjob0001")
	if err != nil || !strings.Contains(out, "sampling: temperature 0.6\n") {
		t.Fatalf("edit: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(home, "cron", "jobs.json"))
	if err != nil || !strings.Contains(string(raw), `"max_turns":7`) || !strings.Contains(string(raw), `"sampling":{"temperature":0.6}`) {
		t.Fatalf("jobs.json after edit: %v\n%s", err, raw)
	}
	if out, err := cronApp(t, deps, "--home", home, "run", "diskjob0001"); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	reqs = fk.Requests()
	if err := json.Unmarshal([]byte(reqs[len(reqs)-1]), &body); err != nil || body["temperature"] != 0.6 {
		t.Fatalf("after edit: %v %v", err, body)
	}
}

// agentOnFake is cron's deps for agent jobs run against a fake model that
// answers a prompt matching match with reply and keeps the requests, on the
// clock *now (a test moves it).
func agentOnFake(t *testing.T, match, reply string, now *time.Time) (*fakellm.Server, cronDeps) {
	t.Helper()
	scripts, err := fakellm.ParseScripts([]byte(`{"scripts": [{"match": "` + match + `", "steps": [{"content": "` + reply + `"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	fk := fakellm.New(fakellm.Config{Scripts: scripts, KeepRequests: true})
	srv := httptest.NewServer(fk)
	t.Cleanup(srv.Close)
	return fk, cronDeps{
		Agent: &cron.RolloutRunner{Driver: fake.New(), DefaultBaseURL: srv.URL + "/v1", DefaultModel: "m"},
		Now:   func() time.Time { return *now },
	}
}
