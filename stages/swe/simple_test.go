package swe

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/local"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout"
)

func TestLoadTasksDefaultImageEnvAndOneTask(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tasks.jsonl")
	data := `{"task": "a"}
{"task": "b", "image": "img:1", "env": {"A": "1", "B": "two words"}}
`
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	tasks, err := LoadTasks(TaskSource{File: p, DefaultImage: DefaultImage, NeedImage: true})
	if err != nil {
		t.Fatal(err)
	}
	if tasks[0].Image != "python:3.11-slim" || tasks[1].Image != "img:1" || tasks[1].Environment["B"] != "two words" {
		t.Errorf("tasks %+v", tasks)
	}
	if _, err := LoadTasks(TaskSource{File: p, NeedImage: true}); err == nil || !strings.Contains(err.Error(), "line 1: image: missing") {
		t.Errorf("no default image with docker: %v", err)
	}
	if tasks, err = LoadTasks(TaskSource{File: p}); err != nil || tasks[0].Image != "" {
		t.Errorf("no image without docker: %v %+v", err, tasks)
	}
	one, err := LoadTasks(TaskSource{Text: "Create hello.py", DefaultImage: DefaultImage, NeedImage: true})
	if err != nil || len(one) != 1 || one[0].ProblemStatement != "Create hello.py" || !one[0].Simple || one[0].Image != DefaultImage {
		t.Fatalf("--task: %v %+v", err, one)
	}
	again, _ := LoadTasks(TaskSource{Text: "Create hello.py"})
	if again[0].Key != one[0].Key {
		t.Error("the same --task gets another key: --resume could not find it")
	}
	for _, bad := range []string{`{"task": "x", "env": ["A=1"]}`, `{"task": "x", "env": {"A": 1}}`, `{"task": "x", "env": {"A=B": "1"}}`} {
		if _, err := ParseTasks([]byte(bad)); err == nil || !strings.Contains(err.Error(), "env") {
			t.Errorf("%s: %v", bad, err)
		}
	}
	if FinalResult("\n MINI_SWE_AGENT_FINAL_OUTPUT\nwrote it\n  all done \n") != "wrote it\n  all done" {
		t.Error("final result")
	}
}

// Simple tasks without an image run with the local driver: env reaches the
// agent and the grader, the text after the sentinel is kept, and a session
// without git is judged by its submission alone.
func TestSimpleTasksLocal(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	step := func(cmd string) map[string]any {
		return map[string]any{"tool_calls": []any{map[string]any{"name": "terminal", "arguments": map[string]any{"command": cmd}}}}
	}
	scripts := map[string]any{"scripts": []any{
		map[string]any{"name": "greet", "match": "^write the greeting", "steps": []any{
			step(`printf '%s\n' "$GREETING" > greeting.txt`),
			step(`echo MINI_SWE_AGENT_FINAL_OUTPUT; echo "wrote $GREETING"`),
		}},
		map[string]any{"name": "nogit", "match": "^say hello", "steps": []any{
			step(`echo MINI_SWE_AGENT_FINAL_OUTPUT; echo hello from $WHO`),
		}},
	}}
	raw, _ := json.Marshal(scripts)
	sp := filepath.Join(dir, "scripts.json")
	if err := os.WriteFile(sp, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	sc, err := fakellm.LoadScripts(sp)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(fakellm.New(fakellm.Config{Scripts: sc}))
	t.Cleanup(hs.Close)

	tasks := filepath.Join(dir, "tasks.jsonl")
	lines := `{"id": "sub", "task": "write the greeting", "env": {"GREETING": "bonjour tout le monde"}}
{"id": "exit", "task": "write the greeting, checked", "env": {"GREETING": "hola"}, "test_cmd": "test -n \"$GREETING\" && grep -qx \"$GREETING\" greeting.txt"}
{"id": "nogit", "task": "say hello", "env": {"PATH": "/nonexistent-hermes-path", "WHO": "nowhere"}}
`
	if err := os.WriteFile(tasks, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := local.New(sandbox.Config{Local: sandbox.LocalConfig{BaseDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	res, err := Run(context.Background(), Options{
		RunConfig: pipeline.RunConfig{Out: out, Workers: 1, CommitInterval: 10 * time.Millisecond},
		Tasks:     TaskSource{File: tasks},
		Rollout:   rollout.Options{Client: client(t, hs.URL+"/v1"), Model: "fake", Driver: d},
		Grade:     GradeOptions{TestTimeout: time.Minute, Clone: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	// report.html is written next to report.json, with each task in its table.
	html, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"sub", "exit", "nogit"} {
		if !bytes.Contains(html, []byte("<td><code>"+id+"</code></td><td class=\"ok\">resolved</td>")) {
			t.Errorf("report.html has no resolved row for %s", id)
		}
	}
	for id, want := range map[string]string{"sub": "submission", "exit": "exit_code", "nogit": "submission"} {
		in := res.Report.Instances[id]
		if in.Outcome != string(OutcomeResolved) {
			t.Errorf("%s: outcome %s: %s %+v", id, in.Outcome, in.Reason, in.Grade)
		}
		if in.Grade == nil || in.Grade.GradedBy != want {
			t.Errorf("%s: graded by %+v, want %s", id, in.Grade, want)
		}
	}
	finals := map[string]string{}
	var sawPatch bool
	var cat bytes.Buffer
	if err := pipeline.Cat(out, &cat); err != nil {
		t.Fatal(err)
	}
	for _, r := range bytes.Split(bytes.TrimSpace(cat.Bytes()), []byte("\n")) {
		var rec struct {
			ID    string `json:"id"`
			Extra struct {
				Final string `json:"final_result"`
				Patch string `json:"model_patch"`
			} `json:"extra"`
		}
		if err := json.Unmarshal(r, &rec); err != nil {
			t.Fatal(err)
		}
		finals[rec.ID] = rec.Extra.Final
		if rec.ID == "sub" && strings.Contains(rec.Extra.Patch, "+bonjour tout le monde") {
			sawPatch = true
		}
	}
	if finals["sub"] != "wrote bonjour tout le monde" || finals["nogit"] != "hello from nowhere" {
		t.Errorf("final results %q", finals)
	}
	if !sawPatch {
		t.Error("the submission's patch does not hold the greeting written with the task's env")
	}
}
