package main

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// A prompts file whose every row is bad is refused before anything is made:
// exit 2, the first reasons as file:line: field: reason, no output folder
// and no model call.
func TestGenerateAllRowsInvalidMakesNothing(t *testing.T) {
	fk := fakellm.New(fakellm.Config{KeepRequests: true})
	url := serveFake(t, fk)
	lines := []string{`{"prompt": 7}`, `not json`, ``, `{"id": "a"}`}
	for i := 0; i < 6; i++ {
		lines = append(lines, `{"prompt": ""}`)
	}
	prompts := writePrompts(t, lines...)
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none")
	if code != exitUsage {
		t.Fatalf("exit %d, want 2: %s", code, errs)
	}
	for _, want := range []string{"none of its 9 rows is valid", prompts + ":1: prompt: ", prompts + ":2: invalid JSON", prompts + ":4: prompt: missing", "... and 4 more"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("output folder made: %v", err)
	}
	if n := len(fk.Requests()); n != 0 {
		t.Errorf("%d chat requests", n)
	}

	// One good row is enough: the bad ones are rejects, the run goes on.
	good := writePrompts(t, append(lines, `{"prompt": "hello"}`)...)
	code, _, errs = hp(t, "generate", "--prompts", good, "--out", out, "--base-url", url, "--model", "m", "--progress", "none")
	if code != exitRowsFailed || !strings.Contains(errs, "9 rejected") {
		t.Fatalf("one good row: exit %d, want 3: %s", code, errs)
	}
}

// serveFake serves fk on loopback and returns its /v1 URL.
func serveFake(t *testing.T, fk *fakellm.Server) string {
	t.Helper()
	srv := httptest.NewServer(fk)
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

