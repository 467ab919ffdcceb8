package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// TestGenerateGradesRollouts is the graders' acceptance test: 20 tasks with
// a verify command (the agents of half of them leave the file it checks),
// 20 question rows with an answer (right or wrong as their prompt asks the
// fake model to answer, in varied forms), one row whose verify command
// outlasts --grader-timeout, --samples 4, in the real local sandbox. Every
// record has a reward member; the passes are what the agents and answers
// dictate; the slow grader leaves reward null with its error.
func TestGenerateGradesRollouts(t *testing.T) {
	url := startFake(t, fakellm.Config{}, "")
	var lines []string
	wantPass := map[string]bool{} // row id → its rollouts pass
	for i := range 20 {
		id := fmt.Sprintf("task-%02d", i)
		written := i
		if i%2 == 1 {
			written = i + 100 // the agent writes the wrong number
		}
		row, _ := json.Marshal(map[string]any{"id": id, "toolsets": []string{"terminal"},
			"prompt": fmt.Sprintf("Write %d into result.txt. [[run=mkdir -p work && echo %d > work/result.txt]] [[answer=done]]", i, written),
			"verify": fmt.Sprintf("grep -qx %d work/result.txt", i)})
		lines = append(lines, string(row))
		wantPass[id] = i%2 == 0
	}
	// The fake's answer to question i and whether it is right: right ones
	// in the forms the number grader reads, wrong ones off by one.
	forms := []string{"%d", "%d.0", `\boxed{%d}`, "$%d", "%d apples"}
	for i := range 20 {
		id := fmt.Sprintf("qa-%02d", i)
		want := 1000 + 37*i
		said, right := fmt.Sprintf(forms[i%len(forms)], want), i%4 != 3
		if !right {
			said = fmt.Sprint(want + 1)
		}
		row, _ := json.Marshal(map[string]any{"id": id, "toolsets": []string{"terminal"},
			"prompt": fmt.Sprintf("What is 1000 + 37*%d? [[answer=%s]]", i, said), "answer": fmt.Sprint(want)})
		lines = append(lines, string(row))
		wantPass[id] = right
	}
	lines = append(lines, `{"id": "slow", "prompt": "[[answer=x]]", "verify": "sleep 120", "toolsets": ["terminal"]}`)
	prompts := writePrompts(t, lines...)
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m",
		"--progress", "none", "--samples", "4", "--grader-timeout", "10s")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	recs := catRecords(t, out)
	if len(recs) != 41*4 {
		t.Fatalf("%d records, want 164", len(recs))
	}
	passes, fails := map[string]int{}, map[string]int{}
	for _, r := range recs {
		id, _ := r["id"].(string)
		reward, has := r["reward"]
		if !has {
			t.Fatalf("record %v has no reward member", r["key"])
		}
		g, _ := r["grade"].(map[string]any)
		if r["outcome"] != "completed" || g == nil {
			t.Fatalf("record %v: outcome %v grade %v (%v)", r["key"], r["outcome"], r["grade"], r["error"])
		}
		if tm, _ := r["timings"].(map[string]any); tm == nil || tm["grader_ms"] == nil {
			t.Errorf("record %v: timings %v, want grader_ms", r["key"], r["timings"])
		}
		if id == "slow" {
			if reward != nil || g["value"] != nil || g["passed"] != nil || !strings.Contains(fmt.Sprint(g["error"]), "timed out") {
				t.Errorf("slow grader: reward %v grade %v, want null and a timeout error", reward, g)
			}
			continue
		}
		kind := "cmd"
		if strings.HasPrefix(id, "qa-") {
			kind = "number"
		}
		if g["grader"] != kind || g["error"] != nil || reward != g["value"] {
			t.Errorf("record %v: reward %v grade %v, want a %s verdict", r["key"], reward, g, kind)
		}
		switch reward {
		case 1.0:
			passes[id]++
		case 0.0:
			fails[id]++
		default:
			t.Errorf("record %v: reward %v", r["key"], reward)
		}
	}
	total := 0
	for id, pass := range wantPass {
		got := passes[id]
		if pass && got != 4 || !pass && fails[id] != 4 {
			t.Errorf("%s: %d passes, %d fails, want all 4 to pass=%v", id, got, fails[id], pass)
		}
		total += got
	}
	if total != 4*(10+15) {
		t.Errorf("%d passing records, want %d", total, 4*(10+15))
	}
	mustVerify(t, out)

	// run.json records the grader flags, and --resume with another grader
	// is refused: it would change what the rewards mean.
	man, ok, err := outdir.ReadManifest(out)
	if err != nil || !ok || !strings.Contains(string(man.Options), `"grader-timeout"`) {
		t.Fatalf("run.json options %s (%v)", man.Options, err)
	}
	code, _, errs = hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m",
		"--progress", "none", "--resume", "--grader", "exact")
	if code != exitUsage || !strings.Contains(errs, "--grader") {
		t.Fatalf("resume with another --grader: exit %d: %s", code, errs)
	}
}

// TestGraderFlagErrors: bad grader flags are usage errors before any output
// folder is made.
func TestGraderFlagErrors(t *testing.T) {
	prompts := writePrompts(t, `{"prompt": "p", "answer": "1"}`)
	notExec := filepath.Join(t.TempDir(), "judge.txt")
	if err := os.WriteFile(notExec, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--grader", "judge"}, `unknown grader "judge"`},
		{[]string{"--grader", "exec"}, "--grader-exec"},
		{[]string{"--grader", "cmd", "--grader-exec", notExec}, "does not use it"},
		{[]string{"--grader-exec", notExec}, "not an executable file"},
		{[]string{"--grader-timeout", "0s"}, "--grader-timeout must be positive"},
		{[]string{"--grader-tolerance", "-1"}, "--grader-tolerance must not be negative"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		args := append([]string{"generate", "--prompts", prompts, "--out", out, "--base-url", "http://127.0.0.1:9/v1", "--model", "m"}, c.args...)
		code, _, errs := hp(t, args...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d: %s, want 2 and %q", c.args, code, errs, c.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%v: output folder made (%v)", c.args, err)
		}
	}
}
