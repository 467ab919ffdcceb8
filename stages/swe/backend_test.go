package swe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A task's "env" is Hermes' mini_swe_runner's backend name; variables are
// in "environment", and an object-valued "env" (the earlier form) still
// reads as variables.
func TestTaskEnvIsTheBackend(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tasks.jsonl")
	data := `{"task": "a", "env": "docker", "image": "python:3.11-slim"}
{"task": "b", "env": "local", "environment": {"A": "1"}}
{"task": "c", "env": {"B": "2"}}
{"task": "d"}
`
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	tasks, err := LoadTasks(TaskSource{File: p})
	if err != nil {
		t.Fatal(err)
	}
	if tasks[0].Backend != "docker" || tasks[0].Image != "python:3.11-slim" || tasks[1].Backend != "local" || tasks[1].Environment["A"] != "1" ||
		tasks[2].Backend != "" || tasks[2].Environment["B"] != "2" || tasks[3].Backend != "" {
		t.Fatalf("tasks %+v", tasks)
	}
	// One run has one sandbox: tasks naming two are refused, naming both lines.
	if _, err := TasksBackend(tasks); err == nil || !strings.Contains(err.Error(), "line 2: env:") || !strings.Contains(err.Error(), "line 1 asks for \"docker\"") {
		t.Errorf("two backends: %v", err)
	}
	if b, err := TasksBackend(tasks[1:]); err != nil || b != "local" {
		t.Errorf("one backend: %q %v", b, err)
	}
	// A run whose sandbox is another refuses the task, naming file, line
	// and field.
	_, err = LoadTasks(TaskSource{File: p, Sandbox: "local"})
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "line 1: env: asks for the docker backend, but this run's sandbox is local") ||
		strings.Contains(err.Error(), "line 2:") {
		t.Errorf("sandbox local: %v", err)
	}
	for bad, want := range map[string]string{
		`{"task": "x", "env": "modal", "image": "python:3.11-slim"}`:  `line 1: env: "modal" is not a backend hermes-pipe runs (local, docker, ssh)`,
		`{"task": "x", "env": 3}`:                                     "line 1: env: must be a backend's name",
		`{"task": "x", "env": {"A": "1"}, "environment": {"B": "2"}}`: `line 1: env: an object of variables beside "environment"`,
		`{"task": "x", "environment": {"A": 1}}`:                      "line 1: environment: must be an object of string values",
		`{"task": "x", "environment": {"A=B": "1"}}`:                  `line 1: environment: "A=B" is not a variable name`,
	} {
		if _, err := ParseTasks([]byte(bad)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %s", bad, err, want)
		}
	}
}
