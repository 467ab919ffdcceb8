package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
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

// The chat route itself is probed before the output folder is made: a 404
// (wrong path) or 401 (wrong key) there is exit 1 naming the URL and the
// status, with no folder and no row tried. The probe sends no message, so
// fakellm does not count it as a request.
func TestGenerateProbesTheChatRoute(t *testing.T) {
	prompts := writePrompts(t, `{"prompt": "hello"}`)
	for _, tc := range []struct {
		name, status string
		code         int
	}{{"not found", "404 Not Found", http.StatusNotFound}, {"unauthorized", "401 Unauthorized", http.StatusUnauthorized}} {
		t.Run(tc.name, func(t *testing.T) {
			var chats atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/chat/completions") {
					chats.Add(1)
				}
				http.Error(w, `{"error": {"message": "nope"}}`, tc.code)
			}))
			t.Cleanup(srv.Close)
			out := filepath.Join(t.TempDir(), "out")
			code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", srv.URL+"/v1", "--model", "m", "--progress", "none")
			if code != exitFatal || !strings.Contains(errs, "POST "+srv.URL+"/v1/chat/completions: "+tc.status) {
				t.Fatalf("exit %d, want 1 naming the URL and %s: %s", code, tc.status, errs)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("output folder made: %v", err)
			}
			if n := chats.Load(); n != 1 {
				t.Errorf("%d chat requests, want the probe only", n)
			}
		})
	}

	fk := fakellm.New(fakellm.Config{KeepRequests: true})
	url := serveFake(t, fk)
	out := filepath.Join(t.TempDir(), "out")
	if code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none"); code != 0 {
		t.Fatalf("fakellm: exit %d: %s", code, errs)
	}
	if st := fk.Stats(); st.Probes != 1 || st.Requests != int64(len(fk.Requests())) || st.Requests < 1 {
		t.Errorf("fakellm stats: %+v, %d kept", st, len(fk.Requests()))
	}
}
