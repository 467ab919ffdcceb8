package cron

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/sandbox/fake"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// recordingServer is the fake model endpoint behind a recorder of request
// bodies, so a test sees exactly what reached the model.
func recordingServer(t *testing.T, js string) (url string, bodies func() []string) {
	t.Helper()
	scripts, err := fakellm.ParseScripts([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	h := fakellm.New(fakellm.Config{Scripts: scripts, KeepRequests: true})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/v1", h.Requests
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Skills, SOUL.md and the workdir's AGENTS.md reach the model as Hermes
// places them; a missing skill fails the execution naming it.
func TestSkillsAndContextFilesReachTheModel(t *testing.T) {
	home := t.TempDir()
	work := t.TempDir()
	writeFile(t, filepath.Join(home, "skills", "digest", "SKILL.md"), "---\nname: digest\n---\n# Digest\nGroup the items by team.")
	writeFile(t, filepath.Join(home, "skills", "research", "arxiv", "SKILL.md"), "# arXiv\nSearch arXiv first.")
	writeFile(t, filepath.Join(home, "SOUL.md"), "You are Ada, the team's night operator.")
	writeFile(t, filepath.Join(work, "AGENTS.md"), "Run make test before reporting.")
	writeFile(t, filepath.Join(work, "CLAUDE.md"), "not loaded: AGENTS.md wins")
	url, bodies := recordingServer(t, `{"scripts": [{"match": "digest", "steps": [{"content": "All green."}]}]}`)

	clock := newFakeClock(utc("2026-05-01T08:59:00Z"))
	s := newTestScheduler(t, home, clock, &RolloutRunner{Driver: fake.New(), DefaultBaseURL: url, DefaultModel: "m"})
	j := addJob(t, s, JobSpec{Schedule: "0 9 * * *", Skills: []string{"digest", "arxiv"}, Workdir: work}) // skills and no prompt
	missing := addJob(t, s, JobSpec{Schedule: "0 9 * * *", Prompt: "use a skill", Skills: []string{"nosuch"}})
	clock.Set(utc("2026-05-01T09:00:10Z"))
	rep, err := s.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res := map[string]Result{}
	for _, r := range rep.Results {
		res[r.JobID] = r
	}
	if r := res[j.ID]; r.State != StateDone || r.Output != "All green." {
		t.Fatalf("skill job %+v", r)
	}
	if r := res[missing.ID]; r.State != StateFailed || !strings.Contains(r.Error, `skill "nosuch" not found`) {
		t.Fatalf("missing skill %+v", r)
	}
	b := bodies()
	if len(b) != 1 {
		t.Fatalf("%d model requests", len(b))
	}
	for _, want := range []string{
		`You are Ada, the team's night operator.`,
		`# Project Context\n\nThe following project context files have been loaded and should be followed:\n\n## AGENTS.md\n\nRun make test before reporting.`,
		`[IMPORTANT: The user has invoked the \"digest\" skill, indicating they want you to follow its instructions. The full skill content is loaded below.]\n\n---\nname: digest\n---\n# Digest\nGroup the items by team.`,
		`[IMPORTANT: The user has invoked the \"arxiv\" skill`,
		`Search arXiv first.`,
		`The user has provided the following instruction alongside the skill invocation: [You are running as a scheduled job`,
	} {
		if !strings.Contains(b[0], want) {
			t.Errorf("the model request lacks %s\n%s", want, b[0])
		}
	}
	if strings.Contains(b[0], "not loaded") {
		t.Errorf("CLAUDE.md loaded although AGENTS.md is there")
	}
	// The execution's trajectory is a verified output folder.
	if rep, err := pipeline.Verify(RunDir(home, j.ID, res[j.ID].ExecutionID)); err != nil || !rep.OK() {
		t.Fatalf("verify: %+v %v", rep.Problems, err)
	}
}

func TestProjectContextOrder(t *testing.T) {
	work := t.TempDir()
	writeFile(t, filepath.Join(work, ".cursorrules"), "tabs, not spaces")
	writeFile(t, filepath.Join(work, ".cursor", "rules", "b.mdc"), "rule b")
	files, err := projectContext(work)
	if err != nil || len(files) != 2 || files[0].name != ".cursorrules" || files[1].name != ".cursor/rules/b.mdc" {
		t.Fatalf("%+v %v", files, err)
	}
	writeFile(t, filepath.Join(work, "CLAUDE.md"), "claude rules")
	if files, _ = projectContext(work); len(files) != 1 || files[0].name != "CLAUDE.md" {
		t.Fatalf("CLAUDE.md before .cursorrules: %+v", files)
	}
	long := strings.Repeat("x", contextFileMaxChars+100)
	if got := truncateContext(long, "AGENTS.md"); len(got) >= len(long) || !strings.Contains(got, "[...truncated AGENTS.md") {
		t.Fatalf("no truncation: %d chars", len(got))
	}
	if _, err := LoadSkill(t.TempDir(), "../etc"); err == nil {
		t.Fatal("a skill name escaping the skills folder was accepted")
	}
}
