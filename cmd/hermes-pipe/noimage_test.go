package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox/docker/dockertest"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// With --sandbox docker and no --docker-image, a prompts file none of whose
// rows names an image is refused before anything is made (exit 2, the first
// five rows as file:line: image: ..., no folder, no model call); so is it by
// `hermes-pipe preflight`. Neither needs docker: the refusal comes first.
func TestDockerRowsWithoutImageRefusedUpFront(t *testing.T) {
	fk := fakellm.New(fakellm.Config{KeepRequests: true})
	url := serveFake(t, fk)
	var lines []string
	for i := range 7 {
		lines = append(lines, fmt.Sprintf(`{"prompt": "echo %d"}`, i))
	}
	prompts := writePrompts(t, lines...)
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m",
		"--sandbox", "docker", "--toolsets", "terminal", "--progress", "none")
	if code != exitUsage {
		t.Fatalf("generate: exit %d, want 2: %s", code, errs)
	}
	for _, want := range []string{"none of its 7 rows is valid", prompts + ":1: image: the row names no image", prompts + ":5: image: ", "... and 2 more"} {
		if !strings.Contains(errs, want) {
			t.Errorf("generate: stderr lacks %q:\n%s", want, errs)
		}
	}
	if strings.Contains(errs, prompts+":6:") {
		t.Errorf("generate: more than five rows listed:\n%s", errs)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("output folder made: %v", err)
	}
	if n := len(fk.Requests()); n != 0 {
		t.Errorf("%d chat requests", n)
	}

	code, stdout, errs := hp(t, "preflight", "--prompts", prompts)
	if code != exitUsage || !strings.Contains(errs, prompts+":1: image: the row names no image") || !strings.Contains(errs, "... and 2 more") {
		t.Fatalf("preflight: exit %d, want 2:\n%s%s", code, stdout, errs)
	}
}

// A row without an image beside rows with one: generate rejects it into
// rejects.jsonl (field image, its line) and runs the others; preflight lists
// it and exits 3; with --docker-image both accept it.
func TestDockerRowWithoutImageRejectedOthersRun(t *testing.T) {
	dockertest.Require(t)
	fk := fakellm.New(fakellm.Config{KeepRequests: true})
	url := serveFake(t, fk)
	img := dockertest.Image()
	prompts := writePrompts(t, `{"prompt": "hello", "image": "`+img+`"}`, `{"prompt": "no image here"}`)
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m",
		"--sandbox", "docker", "--toolsets", "terminal", "--progress", "none")
	if code != exitRowsFailed || !strings.Contains(errs, "1 written (1 ok, 0 failed), 1 rejected") {
		t.Fatalf("generate: exit %d, want 3: %s", code, errs)
	}
	rejects, err := os.ReadFile(filepath.Join(out, "rejects.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if s := string(rejects); strings.Count(s, "\n") != 1 || !strings.Contains(s, `"line":2`) || !strings.Contains(s, `"field":"image"`) || !strings.Contains(s, "names no image") {
		t.Fatalf("rejects.jsonl:\n%s", rejects)
	}
	if recs := catRecords(t, out); len(recs) != 1 || recs[0]["outcome"] != "completed" {
		t.Fatalf("records %v", recs)
	}

	code, stdout, errs := hp(t, "preflight", "--prompts", prompts)
	if code != exitRowsFailed || !strings.Contains(stdout, "no image 1 rows") || !strings.Contains(stdout, prompts+":2: image: ") || !strings.Contains(stdout, "ok       "+img) {
		t.Fatalf("preflight: exit %d, want 3:\n%s%s", code, stdout, errs)
	}
	code, stdout, errs = hp(t, "preflight", "--prompts", prompts, "--docker-image", img)
	if code != 0 || strings.Contains(stdout, "no image") {
		t.Fatalf("preflight --docker-image: exit %d, want 0:\n%s%s", code, stdout, errs)
	}
	out2 := filepath.Join(t.TempDir(), "out2")
	code, _, errs = hp(t, "generate", "--prompts", prompts, "--out", out2, "--base-url", url, "--model", "m",
		"--sandbox", "docker", "--docker-image", img, "--toolsets", "terminal", "--progress", "none")
	if code != 0 || !strings.Contains(errs, "2 written (2 ok, 0 failed), 0 rejected") {
		t.Fatalf("generate --docker-image: exit %d, want 0: %s", code, errs)
	}
}
