package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// Hermes' offline toolsets, offered as built-ins: a task list kept for the
// rollout (todo), read-only access to a skills folder (skills), code run in
// the rollout's sandbox (execute_code), and scheduling against a job store
// kept for the rollout (cronjob: cronjob.go). Names and argument shapes
// follow Hermes' tools.
var offlineToolsetTools = map[string][]string{
	"todo":         {"todo"},
	"skills":       {"skills_list", "skill_view"},
	"execute_code": {"execute_code"},
	"cronjob":      {"cronjob"},
}

var offlineToolSpecs = map[string]struct{ desc, params string }{
	"cronjob": {cronjobDesc, cronjobParams},
	"todo": {
		"Manage a task list for multi-step work. Call with no arguments to read the list; pass todos to write it (replacing the list, or updating items by id when merge is true). Every call returns the whole list. Keep one item in_progress at a time.",
		`{"type": "object", "properties": {"todos": {"type": "array", "description": "Items to write", "items": {"type": "object", "properties": {"id": {"type": "string", "description": "Unique item id"}, "content": {"type": "string", "description": "What the task is"}, "status": {"type": "string", "enum": ["pending", "in_progress", "completed", "cancelled"], "description": "Task status"}}, "required": ["id", "content", "status"]}}, "merge": {"type": "boolean", "description": "Update items by id and append new ones instead of replacing the list (default: false)", "default": false}}, "required": []}`,
	},
	"skills_list": {
		"List the available skills with their descriptions. Use skill_view to read one.",
		`{"type": "object", "properties": {"category": {"type": "string", "description": "Only list skills of this category (optional)"}}, "required": []}`,
	},
	"skill_view": {
		"Read a skill's SKILL.md, or another file inside the skill's folder.",
		`{"type": "object", "properties": {"name": {"type": "string", "description": "The skill's name (as skills_list shows it)"}, "file_path": {"type": "string", "description": "A file inside the skill's folder to read instead of SKILL.md (optional)"}}, "required": ["name"]}`,
	},
	"execute_code": {
		"Run a Python or shell snippet in the sandbox and return its output. Use it for computations and multi-step scripts; the working directory is the terminal's.",
		`{"type": "object", "properties": {"code": {"type": "string", "description": "The code to run"}, "language": {"type": "string", "enum": ["python", "bash"], "description": "Language of the code (default: python)", "default": "python"}}, "required": ["code"]}`,
	},
}

// todoItem is one entry of the todo list.
type todoItem struct {
	ID      string `json:"id"`
	Content string `json:"content"`
	Status  string `json:"status"`
}

var todoStatuses = map[string]bool{"pending": true, "in_progress": true, "completed": true, "cancelled": true}

// todoTool answers todo for one rollout's list.
func todoTool(list *[]todoItem, args map[string]json.RawMessage) (string, error) {
	if raw, ok := args["todos"]; ok && string(raw) != "null" {
		var items []map[string]any
		if err := json.Unmarshal(raw, &items); err != nil {
			var s string // models sometimes send the list as a JSON string
			if json.Unmarshal(raw, &s) != nil || json.Unmarshal([]byte(s), &items) != nil {
				return badCall(&errBadCall{"invalid arguments for todo: todos must be an array of objects"})
			}
		}
		clean := make([]todoItem, 0, len(items))
		for i, it := range items {
			t := todoItem{ID: strings.TrimSpace(fmt.Sprint(orEmpty(it["id"]))), Content: strings.TrimSpace(fmt.Sprint(orEmpty(it["content"]))),
				Status: strings.ToLower(strings.TrimSpace(fmt.Sprint(orEmpty(it["status"]))))}
			if t.ID == "" {
				t.ID = fmt.Sprint(i + 1)
			}
			clean = append(clean, t)
		}
		if boolArg(args, "merge") {
			for _, t := range clean {
				found := false
				for j := range *list {
					if (*list)[j].ID == t.ID {
						found = true
						if t.Content != "" {
							(*list)[j].Content = t.Content
						}
						if todoStatuses[t.Status] {
							(*list)[j].Status = t.Status
						}
					}
				}
				if !found {
					*list = append(*list, normTodo(t))
				}
			}
		} else {
			*list = (*list)[:0]
			seen := map[string]int{}
			for _, t := range clean {
				if i, dup := seen[t.ID]; dup {
					(*list)[i] = normTodo(t) // the last occurrence wins
					continue
				}
				seen[t.ID] = len(*list)
				*list = append(*list, normTodo(t))
			}
		}
	}
	counts := map[string]int{}
	for _, t := range *list {
		counts[t.Status]++
	}
	items := *list
	if items == nil {
		items = []todoItem{}
	}
	return schemas.ToolResultJSON(struct {
		Todos   []todoItem `json:"todos"`
		Summary struct {
			Total      int `json:"total"`
			Pending    int `json:"pending"`
			InProgress int `json:"in_progress"`
			Completed  int `json:"completed"`
			Cancelled  int `json:"cancelled"`
		} `json:"summary"`
	}{Todos: items, Summary: struct {
		Total      int `json:"total"`
		Pending    int `json:"pending"`
		InProgress int `json:"in_progress"`
		Completed  int `json:"completed"`
		Cancelled  int `json:"cancelled"`
	}{len(items), counts["pending"], counts["in_progress"], counts["completed"], counts["cancelled"]}}), nil
}

func orEmpty(v any) any {
	if v == nil {
		return ""
	}
	return v
}

func normTodo(t todoItem) todoItem {
	if t.Content == "" {
		t.Content = "(no description)"
	}
	if !todoStatuses[t.Status] {
		t.Status = "pending"
	}
	return t
}

// skill is one skill found in the skills folder.
type skill struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Category    string `json:"category,omitempty"`
	dir         string
}

var frontDescription = regexp.MustCompile(`(?m)^description:\s*(.*?)\s*$`)

// listSkills finds <dir>/<name>/SKILL.md and <dir>/<category>/<name>/SKILL.md
// (the layout cron jobs load skills from), sorted by name.
func listSkills(dir string) ([]skill, error) {
	var out []skill
	add := func(path, category string) {
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		sd := filepath.Dir(path)
		sk := skill{Name: filepath.Base(sd), Category: category, dir: sd}
		text := string(b)
		if strings.HasPrefix(text, "---") {
			if end := strings.Index(text[3:], "\n---"); end >= 0 {
				if m := frontDescription.FindStringSubmatch(text[3 : 3+end]); m != nil {
					sk.Description = strings.Trim(m[1], `"'`)
				}
			}
		}
		if sk.Description == "" { // the first line of prose
			for _, l := range strings.Split(text, "\n") {
				l = strings.TrimSpace(strings.TrimLeft(l, "#"))
				if l != "" && l != "---" && !strings.Contains(l, ":") {
					sk.Description = l
					break
				}
			}
		}
		out = append(out, sk)
	}
	direct, err := filepath.Glob(filepath.Join(dir, "*", "SKILL.md"))
	if err != nil {
		return nil, err
	}
	for _, p := range direct {
		add(p, "")
	}
	nested, _ := filepath.Glob(filepath.Join(dir, "*", "*", "SKILL.md"))
	for _, p := range nested {
		add(p, filepath.Base(filepath.Dir(filepath.Dir(p))))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// skillsIn lists the skills of dir, or gives the tool error the model sees
// when there is no skills folder or it cannot be read.
func skillsIn(dir string) ([]skill, string) {
	if dir == "" {
		return nil, toolError("no skills folder is configured for this run")
	}
	all, err := listSkills(dir)
	if err != nil {
		return nil, toolError("cannot list skills: " + err.Error())
	}
	return all, ""
}

func skillsList(dir string, args map[string]json.RawMessage) (string, error) {
	category, err := strArg(args, "skills_list", "category", false)
	if err != nil {
		return badCall(err)
	}
	all, fail := skillsIn(dir)
	if fail != "" {
		return fail, nil
	}
	skills := []skill{}
	for _, s := range all {
		if category == "" || s.Category == category {
			skills = append(skills, s)
		}
	}
	return schemas.ToolResultJSON(struct {
		Success bool    `json:"success"`
		Skills  []skill `json:"skills"`
		Count   int     `json:"count"`
	}{true, skills, len(skills)}), nil
}

// maxSkillFile bounds one file skill_view returns.
const maxSkillFile = 1 << 20

func skillView(dir string, args map[string]json.RawMessage) (string, error) {
	name, err := strArg(args, "skill_view", "name", true)
	if err != nil {
		return badCall(err)
	}
	file, err := strArg(args, "skill_view", "file_path", false)
	if err != nil {
		return badCall(err)
	}
	all, fail := skillsIn(dir)
	if fail != "" {
		return fail, nil
	}
	var sk *skill
	for i := range all {
		if all[i].Name == name || (all[i].Category != "" && all[i].Category+"/"+all[i].Name == name) {
			sk = &all[i]
			break
		}
	}
	if sk == nil {
		names := make([]string, len(all))
		for i := range all {
			names[i] = all[i].Name
		}
		return toolError(fmt.Sprintf("skill %q not found; available: %s", name, strings.Join(names, ", "))), nil
	}
	if file == "" {
		file = "SKILL.md"
	}
	// Reads stay inside the skill's folder: os.Root refuses paths (and
	// links) that leave it.
	root, err := os.OpenRoot(sk.dir)
	if err != nil {
		return toolError("cannot open skill: " + err.Error()), nil
	}
	defer root.Close()
	f, err := root.Open(filepath.Clean(file))
	if err != nil {
		msg := err.Error()
		if errors.Is(err, fs.ErrNotExist) {
			msg = "no such file in the skill"
		}
		return toolError(fmt.Sprintf("cannot read %s of skill %s: %s", file, name, msg)), nil
	}
	defer f.Close()
	b := make([]byte, maxSkillFile+1)
	n, _ := readFull(f, b)
	content := strings.ToValidUTF8(string(b[:min(n, maxSkillFile)]), "\uFFFD")
	return schemas.ToolResultJSON(struct {
		Success  bool   `json:"success"`
		Name     string `json:"name"`
		File     string `json:"file"`
		Content  string `json:"content"`
		Truncate bool   `json:"truncated"`
	}{true, sk.Name, file, content, n > maxSkillFile}), nil
}

func readFull(f *os.File, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := f.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// executeCode writes the snippet to a file in the sandbox's temporary
// folder and runs it there with python3 or sh, through the session like
// terminal (so it sees the same files, working folder and variables).
func executeCode(ctx context.Context, s sandbox.Session, args map[string]json.RawMessage, timeout time.Duration) (string, error) {
	code, err := strArg(args, "execute_code", "code", true)
	if err != nil {
		return badCall(err)
	}
	lang, err := strArg(args, "execute_code", "language", false)
	if err != nil {
		return badCall(err)
	}
	var interp, ext string
	switch strings.ToLower(lang) {
	case "", "python", "python3", "py":
		interp, ext = "python3", ".py"
	case "bash", "sh", "shell":
		interp, ext = "sh", ".sh"
	default:
		return badCall(&errBadCall{fmt.Sprintf("invalid arguments for execute_code: language must be \"python\" or \"bash\", got %q", lang)})
	}
	path := fmt.Sprintf("/tmp/hermes_exec_%d%s", time.Now().UnixNano(), ext)
	if err := s.WriteFile(ctx, path, []byte(code), 0o600); err != nil {
		msg, err := fileFailure(ctx, err)
		if err != nil {
			return "", err
		}
		return toolError("cannot write the snippet: " + msg), nil
	}
	res, err := s.Exec(ctx, sandbox.Cmd{Command: interp + " " + path + "; __rc=$?; rm -f " + path + "; (exit $__rc)", Timeout: timeout})
	if err != nil {
		return "", err
	}
	out := commandOutput(res)
	result := struct {
		Status   string  `json:"status"`
		Output   string  `json:"output"`
		ExitCode int     `json:"exit_code"`
		Error    *string `json:"error"`
	}{Status: "success", Output: out, ExitCode: res.ExitCode}
	switch {
	case res.TimedOut:
		msg := fmt.Sprintf("the code timed out after %s", timeout)
		result.Status, result.Error = "timeout", &msg
	case res.ExitCode != 0:
		msg := fmt.Sprintf("the code exited with status %d", res.ExitCode)
		result.Status, result.Error = "error", &msg
	}
	return schemas.ToolResultJSON(result), nil
}
