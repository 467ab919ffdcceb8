package main

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/stages/cron"
)

// The operator's disabled_toolsets (<home>/cron/config.yaml) take toolsets
// away from every agent job whatever the job asks: their tools are not in
// the chat request that reaches the model, and `cron show` says so.
func TestCronDisabledToolsetsAreNotOfferedToTheModel(t *testing.T) {
	now := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	fk, deps := agentOnFake(t, "status", "all good", &now)
	home := t.TempDir()
	out, err := cronApp(t, deps, "--home", home, "add", "--tz", "UTC", "--toolsets", "terminal,file,todo", "0 10 * * *", "status", "check")
	if err != nil {
		t.Fatalf("add: %v\n%s", err, out)
	}
	id := regexp.MustCompile(`added (\S+)`).FindStringSubmatch(out)[1]
	offered := func() []string {
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
		var body struct {
			Tools []struct {
				Function struct{ Name string } `json:"function"`
			} `json:"tools"`
		}
		if err := json.Unmarshal([]byte(reqs[len(reqs)-1]), &body); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range body.Tools {
			names = append(names, tl.Function.Name)
		}
		return names
	}
	// Without the file, the job gets what it asks for.
	if got := offered(); !slices.Contains(got, "read_file") || !slices.Contains(got, "todo") || !slices.Contains(got, "terminal") {
		t.Fatalf("tools offered without disabled_toolsets: %v", got)
	}
	if err := os.WriteFile(cron.ConfigPath(home), []byte("# operator policy\ndisabled_toolsets:\n  - file\n  - todo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := offered(); !slices.Equal(got, []string{"terminal"}) {
		t.Fatalf("tools offered with file and todo disabled: %v, want [terminal]", got)
	}
	out, err = cronApp(t, deps, "--home", home, "show", id)
	if err != nil || !strings.Contains(out, "toolsets: terminal\n") || !strings.Contains(out, "disabled: file, todo (disabled_toolsets in "+cron.ConfigPath(home)) {
		t.Fatalf("show: %v\n%s", err, out)
	}
	out, err = cronApp(t, deps, "--home", home, "show", "--json", id)
	var shown struct{ Toolsets, DisabledToolsets []string }
	if err != nil || json.Unmarshal([]byte(out), &shown) != nil || !slices.Equal(shown.Toolsets, []string{"terminal"}) {
		t.Fatalf("show --json: %v\n%s", err, out)
	}

	// A job left with no toolset fails its execution naming the file; a bad
	// file fails it naming the file, the line and the key.
	if _, err := cronApp(t, deps, "--home", home, "edit", "--toolsets", "file", id); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	before := len(fk.Requests())
	out, err = cronApp(t, deps, "--home", home, "run", id)
	if err == nil || !strings.Contains(out, "every toolset of the job (file) is disabled by disabled_toolsets in "+cron.ConfigPath(home)) || len(fk.Requests()) != before {
		t.Fatalf("run with every toolset disabled: %v\n%s", err, out)
	}
	os.WriteFile(cron.ConfigPath(home), []byte("disabled_toolset:\n  - file\n"), 0o600)
	now = now.Add(time.Minute)
	out, err = cronApp(t, deps, "--home", home, "run", id)
	if err == nil || !strings.Contains(out, cron.ConfigPath(home)) || !strings.Contains(out, "line 1") || !strings.Contains(out, "disabled_toolset") {
		t.Fatalf("run with a bad config: %v\n%s", err, out)
	}
}
