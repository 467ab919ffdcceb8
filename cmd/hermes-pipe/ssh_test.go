package main

import (
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox/ssh/sshtest"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// sshEnv is the test sshd's settings (sshtest.Env).
func sshEnv(t *testing.T) map[string]string { return sshtest.Env(t) }

// TestGenerateSSHSandbox runs a rollout whose commands execute over ssh.
func TestGenerateSSHSandbox(t *testing.T) {
	env := sshEnv(t)
	scripts, err := fakellm.ParseScripts([]byte(`{"scripts": [{"match": "^state", "steps": [
	    {"tool_calls": [{"name": "terminal", "arguments": {"command": "cd /tmp && export X=1"}}]},
	    {"tool_calls": [{"name": "terminal", "arguments": {"command": "pwd; echo $X; whoami"}}]},
	    {"content": "done"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(fakellm.New(fakellm.Config{Scripts: scripts}))
	defer srv.Close()
	prompts := writePrompts(t, `{"prompt": "state"}`)
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", srv.URL+"/v1", "--model", "m",
		"--sandbox", "ssh", "--ssh-host", env["HERMES_TEST_SSH_ADDR"], "--ssh-user", env["HERMES_TEST_SSH_USER"],
		"--ssh-key", env["HERMES_TEST_SSH_KEY"], "--ssh-known-hosts", env["HERMES_TEST_SSH_KNOWN_HOSTS"],
		"--toolsets", "terminal", "--progress", "none")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	recs := catRecords(t, out)
	want := `"output": "/tmp\n1\n` + env["HERMES_TEST_SSH_USER"] + `\n"`
	found := false
	for _, turn := range recs[0]["conversations"].([]any) {
		found = found || strings.Contains(turn.(map[string]any)["value"].(string), want)
	}
	if !found {
		t.Fatalf("trajectory lacks %s: %v", want, recs[0]["conversations"])
	}
	mustVerify(t, out)
}
