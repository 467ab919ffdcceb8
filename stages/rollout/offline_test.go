package rollout

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/local"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// toolTurns joins the tool turns of a record.
func toolTurns(rec *schemas.Record) string {
	var b strings.Builder
	for _, t := range rec.Conversations {
		if t.From == "tool" {
			b.WriteString(t.Value)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func TestOfflineToolsets(t *testing.T) {
	skills := t.TempDir()
	for p, text := range map[string]string{
		"deploy/SKILL.md":          "---\nname: deploy\ndescription: Ship a release\n---\n# Deploy\nSteps.",
		"deploy/notes.txt":         "extra notes",
		"ops/backup/SKILL.md":      "# Backup\nKeep copies.",
		"secret-outside/other.txt": "not a skill",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(skills, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(skills, p), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	client := env(t, fakellm.Config{Scripts: scripts(t, `{"scripts": [{"match": "^plan", "steps": [
		{"tool_calls": [{"name": "todo", "arguments": {"todos": [{"id": "1", "content": "look", "status": "in_progress"}, {"id": "2", "content": "fix", "status": "pending"}]}},
		                {"name": "todo", "arguments": {"todos": [{"id": "1", "status": "completed"}], "merge": true}},
		                {"name": "skills_list", "arguments": {}},
		                {"name": "skill_view", "arguments": {"name": "deploy"}},
		                {"name": "skill_view", "arguments": {"name": "deploy", "file_path": "../../secret-outside/other.txt"}},
		                {"name": "execute_code", "arguments": {"code": "print(6*7)"}},
		                {"name": "execute_code", "arguments": {"code": "echo from sh; exit 4", "language": "bash"}}]},
		{"content": "planned"}]}]}`)}, 0)
	d, err := local.New(sandbox.Config{Local: sandbox.LocalConfig{BaseDir: t.TempDir(), Isolation: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	rec := run(t, Options{Client: client, Model: "m", Driver: d, SkillsDir: skills, Toolsets: []string{"todo", "skills", "execute_code"}}, record("plan it"))
	if rec.Outcome != schemas.OutcomeCompleted {
		t.Fatalf("%s: %s", rec.Outcome, rec.Error)
	}
	tt := toolTurns(rec)
	for _, want := range []string{
		`"todos": [{"id": "1", "content": "look", "status": "completed"}, {"id": "2", "content": "fix", "status": "pending"}], "summary": {"total": 2, "pending": 1, "in_progress": 0, "completed": 1, "cancelled": 0}`,
		`{"name": "backup", "description": "Backup", "category": "ops"}, {"name": "deploy", "description": "Ship a release"}`,
		`"content": "---\nname: deploy\ndescription: Ship a release\n---\n# Deploy\nSteps."`,
		`"cannot read ../../secret-outside/other.txt of skill deploy`,
		`"output": "42\n", "exit_code": 0, "error": null`,
		`"status": "error", "output": "from sh\n", "exit_code": 4`,
	} {
		if !strings.Contains(tt, want) {
			t.Errorf("tool turns lack %s\n%s", want, tt)
		}
	}
	st := rec.ToolStats
	if st["todo"].Success != 2 || st["skills_list"].Success != 1 || st["skill_view"].Failure != 1 || st["execute_code"].Failure != 1 || st["execute_code"].Success != 1 {
		t.Errorf("tool_stats: %+v", st)
	}
	sys := rec.Conversations[0].Value
	for _, n := range []string{`"name": "todo"`, `"name": "skills_list"`, `"name": "skill_view"`, `"name": "execute_code"`} {
		if !strings.Contains(sys, n) {
			t.Errorf("system turn lacks %s", n)
		}
	}
	if strings.Contains(sys, `"name": "terminal"`) {
		t.Error("terminal offered without its toolset")
	}
}

func TestSkillsWithoutFolderAndUnknownMCPToolsetEndTheRow(t *testing.T) {
	client := env(t, fakellm.Config{}, 0)
	for _, ts := range []string{"skills", "mcp-nope", "cronjob"} {
		rec := run(t, Options{Client: client, Model: "m", Driver: nil2(t), Toolsets: []string{ts}}, record("x"))
		if rec.Outcome != schemas.OutcomeError || !strings.Contains(rec.Error, "toolset "+ts) || rec.APICalls != 0 {
			t.Errorf("%s: %s %q calls %d", ts, rec.Outcome, rec.Error, rec.APICalls)
		}
	}
}

func nil2(t *testing.T) sandbox.Driver {
	d, err := local.New(sandbox.Config{Local: sandbox.LocalConfig{BaseDir: t.TempDir(), Isolation: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDistributionFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "d.yaml")
	text := "research:\n  description: tools for research\n  toolsets:\n    terminal: 100\n    mcp-web: 50\nplain:\n  file: 30\n"
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := LoadDistributions(p, []string{"terminal", "file", "mcp-web"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(d)
	if string(b) != `{"plain":{"file":0.3},"research":{"mcp-web":0.5,"terminal":1}}` {
		t.Fatal(string(b))
	}
	for text, want := range map[string]string{
		"a:\n  toolsets:\n    web: 10\n":      "d.yaml:3: a.toolsets.web: unknown toolset",
		"a:\n  toolsets:\n    file: 150\n":    "d.yaml:3: a.toolsets.file: \"150\": want a probability in percent",
		"a:\n  description: x\n":              "has a description but no toolsets",
		"a:\n  toolsets:\n    file: \"50\"\n": "want a probability",
	} {
		_ = os.WriteFile(p, []byte(text), 0o644)
		if _, err := LoadDistributions(p, []string{"terminal", "file"}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
}
