package main

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox/docker"
	"github.com/hermes-pipe/hermes-pipe/sandbox/docker/dockertest"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout/mcp/mcptest"
)

func TestMain(m *testing.M) {
	mcptest.MaybeServe() // the test binary doubles as a stdio MCP server
	defer dockertest.Done()
	m.Run()
}

var runIDPattern = regexp.MustCompile(`generate: run (\S+) `)

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runContainers lists the containers of one run still present.
func runContainers(t *testing.T, runID string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+docker.LabelRun+"="+runID).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

// TestGenerateDockerSandbox: cd and export persist inside the container, and
// rows whose image is missing are rejected before any LLM request.
func TestGenerateDockerSandbox(t *testing.T) {
	dockertest.Require(t)
	scripts, err := fakellm.ParseScripts([]byte(`{"scripts": [
	  {"name": "env", "match": "^state", "steps": [
	    {"tool_calls": [{"name": "terminal", "arguments": {"command": "cd /tmp && export X=1"}}]},
	    {"tool_calls": [{"name": "terminal", "arguments": {"command": "pwd; echo $X"}}]},
	    {"content": "done"}]},
	  {"name": "missing", "match": "^ghost", "steps": [{"content": "must never be asked"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	fake := fakellm.New(fakellm.Config{Scripts: scripts})
	srv := httptest.NewServer(fake)
	defer srv.Close()
	img := dockertest.Image()
	prompts := writePrompts(t,
		`{"prompt": "state", "image": "`+img+`"}`,
		`{"prompt": "ghost row", "image": "hermes-pipe-test/no-such-image:404"}`)
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", srv.URL+"/v1", "--model", "m",
		"--sandbox", "docker", "--toolsets", "terminal", "--progress", "none")
	if code != exitRowsFailed {
		t.Fatalf("exit %d (want 3: one row failed): %s", code, errs)
	}
	// The row whose image is missing ends sandbox_error without a model
	// call, as in every mode that runs images, and --resume retries it.
	recs := catRecords(t, out)
	if len(recs) != 2 || recs[0]["outcome"] != "completed" || recs[1]["outcome"] != "sandbox_error" ||
		!strings.Contains(recs[1]["error"].(string), "image unavailable: hermes-pipe-test/no-such-image:404") {
		t.Fatalf("records = %v\n%s", recs, errs)
	}
	if !strings.Contains(errs, "pre-flight: image hermes-pipe-test/no-such-image:404 unavailable") {
		t.Errorf("stderr does not name the missing image:\n%s", errs)
	}
	found := false
	for _, turn := range recs[0]["conversations"].([]any) {
		v := turn.(map[string]any)["value"].(string)
		found = found || strings.Contains(v, `"output": "/tmp\n1\n", "exit_code": 0`)
	}
	if !found {
		conv, _ := json.Marshal(recs[0]["conversations"])
		t.Errorf("trajectory does not show /tmp and 1:\n%s", conv)
	}
	if n := fake.Stats().ByScript["missing"]; n != 0 {
		t.Errorf("fakellm got %d requests for the row whose image is missing", n)
	}
	mustVerify(t, out)
	var manifest struct {
		Options struct {
			RunID string `json:"run_id"`
		} `json:"options"`
	}
	if b, err := os.ReadFile(filepath.Join(out, "run.json")); err != nil || json.Unmarshal(b, &manifest) != nil || manifest.Options.RunID == "" {
		t.Fatalf("run.json has no run id: %v", err)
	}
	if left := runContainers(t, manifest.Options.RunID); len(left) != 0 {
		t.Errorf("containers left after the run: %v", left)
	}
}

// TestKilledDockerRunIsCollected: after kill -9 of a docker run, sandbox gc
// leaves no container behind.
func TestKilledDockerRunIsCollected(t *testing.T) {
	dockertest.Require(t)
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	scripts, _ := fakellm.ParseScripts([]byte(`{"scripts": [{"match": "^work", "steps": [
	  {"tool_calls": [{"name": "terminal", "arguments": {"command": "sleep 30"}}]}, {"content": "done"}]}]}`))
	srv := httptest.NewServer(fakellm.New(fakellm.Config{Scripts: scripts}))
	defer srv.Close()
	var lines []string
	for i := 0; i < 4; i++ {
		lines = append(lines, `{"prompt": "work `+string(rune('a'+i))+`"}`)
	}
	prompts := writePrompts(t, lines...)
	cmd := exec.Command(bin, "generate", "--prompts", prompts, "--out", filepath.Join(t.TempDir(), "out"), "--base-url", srv.URL+"/v1",
		"--model", "m", "--sandbox", "docker", "--docker-image", dockertest.Image(), "--toolsets", "terminal", "--progress", "none", "--workers", "4")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The run prints its id; other packages' tests may have containers of
	// their own running, so only this run's are counted and collected.
	var runID string
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if m := runIDPattern.FindStringSubmatch(stderr.String()); m != nil {
			runID = m[1]
			if len(runContainers(t, runID)) >= 4 {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if runID == "" || len(runContainers(t, runID)) == 0 {
		t.Fatalf("no container of the run was up when it was killed; the test proves nothing\n%s", stderr.String())
	}
	gcStart := time.Now()
	if code, out, errs := hp(t, "sandbox", "gc", "--run", runID); code != 0 {
		t.Fatalf("sandbox gc: exit %d: %s%s", code, out, errs)
	}
	// A create call the killed process had already sent may still complete
	// in a loaded daemon after gc listed the containers: such a container is
	// younger than the gc and is collected by the next one. Any container
	// that existed when gc ran and is still there is a failure.
	left := runContainers(t, runID)
	for _, id := range left {
		created := containerCreated(t, id)
		if !created.After(gcStart) {
			t.Fatalf("container %s (created %s) left after a gc started at %s", id, created.Format(time.RFC3339Nano), gcStart.Format(time.RFC3339Nano))
		}
		t.Logf("container %s was created at %s, after the gc started: collecting it again", id, created.Format(time.RFC3339Nano))
	}
	if len(left) > 0 {
		if code, out, errs := hp(t, "sandbox", "gc", "--run", runID); code != 0 {
			t.Fatalf("second sandbox gc: exit %d: %s%s", code, out, errs)
		}
		if left := runContainers(t, runID); len(left) != 0 {
			t.Fatalf("containers left after a second gc: %v", left)
		}
	}
}

// containerCreated returns when the daemon created container id.
func containerCreated(t *testing.T, id string) time.Time {
	t.Helper()
	out, err := exec.Command("docker", "inspect", "-f", "{{.Created}}", id).Output()
	if err != nil {
		t.Fatalf("docker inspect %s: %v", id, err)
	}
	created, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("docker inspect %s: created %q: %v", id, out, err)
	}
	return created
}
