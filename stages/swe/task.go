package swe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// DefaultCwd is the repository folder of SWE-bench images, used when an
// instance names no cwd.
const DefaultCwd = "/testbed"

// Task is one evaluation instance. SWE-bench instances fill every field; the
// simple Hermes form ({"task", "env"?, "image"?, "test_cmd"?,
// "environment"?}) sets Simple and leaves the SWE-bench fields empty. A task
// without an image gets the run's default image (see LoadTasks).
type Task struct {
	InstanceID       string
	Repo             string
	BaseCommit       string // "" = the HEAD of the image's repository
	ProblemStatement string
	Image            string
	Cwd              string // repository folder in the image; "" = the image's working folder
	TestPatch        string
	TestCmd          string
	FailToPass       []string
	PassToPass       []string
	GoldPatch        string // the reference fix ("patch"), used only by tests and checks
	Simple           bool
	// Backend is the sandbox the task asks for, as Hermes' mini_swe_runner
	// names it ("env": "local" or "docker"; Backends); "" = the run's.
	Backend string
	// Environment holds environment variables set in the task's agent and
	// grading sessions ("environment": {"NAME": "value"}; an object-valued
	// "env", the form before Backend, is read as the same).
	Environment map[string]string

	Line int    // 1-based line in the tasks file
	Key  string // stable resume key
}

// TaskError is one bad line of a tasks file.
type TaskError struct {
	Line   int
	Field  string
	Reason string
}

func (e *TaskError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("line %d: %s", e.Line, e.Reason)
	}
	return fmt.Sprintf("line %d: %s: %s", e.Line, e.Field, e.Reason)
}

// ReadTasks reads a JSONL tasks file (a JSON array file is accepted too). It
// validates every line and returns every problem at once, joined, so a user
// fixes the file in one go; any bad line or a repeated instance id makes the
// whole file an error (a gate over a partly read suite would not mean much).
// It costs one JSON decode per line.
func ReadTasks(path string) ([]Task, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tasks: %w", err)
	}
	return ParseTasks(data)
}

// DefaultImage is the image of tasks that name none, as Hermes' SWE runner.
const DefaultImage = "python:3.11-slim"

// TaskSource says where a run's tasks come from and what a task without an
// image runs in.
type TaskSource struct {
	File string // tasks file (JSONL or a JSON array)
	Text string // one task given on the command line, instead of File
	// DefaultImage is the image of tasks without one; "" leaves them
	// without an image, which only a driver that ignores images accepts
	// (NeedImage false).
	DefaultImage string
	NeedImage    bool
	// CheckCwd, when set, is called with every task's cwd (when it has
	// one); an error makes the task a bad line (field "cwd"). The cmd layer
	// sets it for the drivers that clone the cwd from a folder of a host
	// (local, ssh) to sandbox.CwdRule.Check: a tasks file is untrusted
	// input and may not name any folder of the host.
	CheckCwd func(dir string) error
	// Sandbox is the run's backend (local, docker or ssh): a task whose
	// "env" names another is an error naming its line (field env). "" = no
	// check (see TasksBackend for a run whose tasks choose it).
	Sandbox string
}

// TasksBackend is the one backend the tasks name in "env" ("" when none
// names one); tasks that name two are an error naming a line of each.
func TasksBackend(tasks []Task) (string, error) {
	var first *Task
	for i := range tasks {
		t := &tasks[i]
		switch {
		case t.Backend == "":
		case first == nil:
			first = t
		case t.Backend != first.Backend:
			return "", &TaskError{Line: t.Line, Field: "env", Reason: fmt.Sprintf("%q, while line %d asks for %q: one run has one sandbox: split the file by env", t.Backend, first.Line, first.Backend)}
		}
	}
	if first == nil {
		return "", nil
	}
	return first.Backend, nil
}

// LoadTasks reads the tasks of src and gives every task without an image
// src.DefaultImage. A task still without an image while src.NeedImage, or
// whose cwd src.CheckCwd refuses, is an error naming its line.
func LoadTasks(src TaskSource) ([]Task, error) {
	var (
		tasks []Task
		err   error
	)
	switch {
	case src.Text != "" && src.File != "":
		return nil, errors.New("give a tasks file or one task, not both")
	case src.Text != "":
		line, _ := json.Marshal(map[string]string{"task": src.Text})
		tasks, err = ParseTasks(line)
	case src.File != "":
		if tasks, err = ReadTasks(src.File); err != nil {
			err = fmt.Errorf("%s: %w", src.File, err)
		}
	default:
		return nil, errors.New("no tasks: give a tasks file or one task")
	}
	if err != nil {
		return nil, err
	}
	var errs []error
	for i := range tasks {
		if tasks[i].Image == "" {
			tasks[i].Image = src.DefaultImage
		}
		if b := tasks[i].Backend; b != "" && src.Sandbox != "" && b != src.Sandbox {
			errs = append(errs, &TaskError{Line: tasks[i].Line, Field: "env", Reason: fmt.Sprintf("asks for the %s backend, but this run's sandbox is %s (give --sandbox %s, or leave --sandbox out and the tasks choose)", b, src.Sandbox, b)})
		}
		if tasks[i].Image == "" && src.NeedImage {
			errs = append(errs, &TaskError{Line: tasks[i].Line, Field: "image", Reason: "missing, and no default image (the container image the task runs in)"})
		}
		if tasks[i].Cwd != "" && src.CheckCwd != nil {
			if err := src.CheckCwd(tasks[i].Cwd); err != nil {
				errs = append(errs, &TaskError{Line: tasks[i].Line, Field: "cwd", Reason: err.Error()})
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", taskSourceName(src), errors.Join(errs...))
	}
	return tasks, nil
}

// taskSourceName names where the tasks come from in an error.
func taskSourceName(src TaskSource) string {
	if src.File != "" {
		return "tasks file " + src.File
	}
	return "--task"
}

// ParseTasks is ReadTasks on the file's content.
func ParseTasks(data []byte) ([]Task, error) {
	lines, err := splitTasks(data)
	if err != nil {
		return nil, err
	}
	var (
		tasks []Task
		errs  []error
		seen  = map[string]int{}
	)
	index := 0
	for _, l := range lines {
		t, err := parseTask(l.text, l.line)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := seen[t.InstanceID]; dup {
			errs = append(errs, &TaskError{Line: l.line, Field: "instance_id", Reason: fmt.Sprintf("%q repeats line %d", t.InstanceID, prev)})
			continue
		}
		seen[t.InstanceID] = l.line
		id := t.InstanceID
		if t.Simple && !l.hasID {
			id = ""
		}
		t.Key = schemas.RowKey(index, id, l.text, 0)
		index++
		tasks = append(tasks, t)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("tasks file: %w", errors.Join(errs...))
	}
	if len(tasks) == 0 {
		return nil, errors.New("tasks file: no tasks")
	}
	return tasks, nil
}

type taskLine struct {
	line  int
	text  []byte
	hasID bool
}

// splitTasks returns the non-blank lines of a JSONL file, or the elements of
// a JSON array file (each numbered by its position).
func splitTasks(data []byte) ([]taskLine, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var items []json.RawMessage
		if err := json.Unmarshal(trimmed, &items); err != nil {
			return nil, fmt.Errorf("tasks file: a JSON array file must hold objects: %w", err)
		}
		out := make([]taskLine, 0, len(items))
		for i, it := range items {
			out = append(out, taskLine{line: i + 1, text: it, hasID: hasID(it)})
		}
		return out, nil
	}
	var out []taskLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	n := 0
	for sc.Scan() {
		n++
		t := bytes.TrimSpace(sc.Bytes())
		if len(t) == 0 {
			continue
		}
		text := append([]byte(nil), t...)
		out = append(out, taskLine{line: n, text: text, hasID: hasID(text)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("tasks file: line %d: %w", n+1, err)
	}
	return out, nil
}

func hasID(b []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return false
	}
	for _, k := range []string{"instance_id", "id"} {
		if v, ok := m[k]; ok && string(v) != "null" && string(v) != `""` {
			return true
		}
	}
	return false
}

// parseTask reads the task on line n: its fields (each under any of its
// accepted names), then the checks of its form (simple or SWE-bench) and of
// its values. A task that fails is returned as far as it was read.
func parseTask(line []byte, n int) (Task, error) {
	t := Task{Line: n}
	raw, err := taskObject(line, n)
	if err != nil {
		return t, err
	}
	if err := readTaskStrings(raw, n, &t); err != nil {
		return t, err
	}
	if err := readTaskLists(raw, n, &t); err != nil {
		return t, err
	}
	if err := checkTaskForm(raw, n, &t); err != nil {
		return t, err
	}
	return t, checkTaskValues(n, &t)
}

// taskObject decodes line n as a JSON object in valid UTF-8.
func taskObject(line []byte, n int) (map[string]json.RawMessage, error) {
	if !utf8.Valid(line) {
		return nil, &TaskError{Line: n, Reason: "invalid UTF-8"}
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil || raw == nil {
		return nil, &TaskError{Line: n, Reason: "not a JSON object"}
	}
	return raw, nil
}

// readTaskStrings fills the task's string fields, each from the first of
// its names that holds a non-empty string.
func readTaskStrings(raw map[string]json.RawMessage, n int, t *Task) error {
	for _, f := range []struct {
		dst   *string
		names []string
	}{
		{&t.InstanceID, []string{"instance_id", "id"}},
		{&t.Repo, []string{"repo"}},
		{&t.BaseCommit, []string{"base_commit"}},
		{&t.ProblemStatement, []string{"problem_statement", "task", "prompt"}},
		{&t.Image, []string{"image", "docker_image", "image_name"}},
		{&t.Cwd, []string{"cwd", "workdir"}},
		{&t.TestPatch, []string{"test_patch"}},
		{&t.TestCmd, []string{"test_cmd", "test_command"}},
		{&t.GoldPatch, []string{"patch"}},
	} {
		if err := taskString(raw, n, f.dst, f.names...); err != nil {
			return err
		}
	}
	return nil
}

// taskString sets *dst to the first non-empty string among names; a value
// that is neither null nor a string is an error naming its field.
func taskString(raw map[string]json.RawMessage, n int, dst *string, names ...string) error {
	for _, name := range names {
		v, ok := raw[name]
		if !ok || string(v) == "null" {
			continue
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return &TaskError{Line: n, Field: name, Reason: "must be a string"}
		}
		if s != "" {
			*dst = s
			return nil
		}
	}
	return nil
}

// readTaskLists fills the task's test lists and its environment, whose
// names must be variable names.
func readTaskLists(raw map[string]json.RawMessage, n int, t *Task) error {
	var err error
	if t.FailToPass, err = testList(raw, "FAIL_TO_PASS", n); err != nil {
		return err
	}
	if t.PassToPass, err = testList(raw, "PASS_TO_PASS", n); err != nil {
		return err
	}
	return readTaskEnv(raw, n, t)
}

// Backends are the sandboxes a task's "env" may name: Hermes'
// mini_swe_runner's local and docker, and hermes-pipe's ssh. Hermes' others
// (modal...) are refused.
var Backends = []string{"local", "docker", "ssh"}

// readTaskEnv reads "env" as Hermes does, the backend's name, and the
// variables from "environment" or, as before, from an object-valued "env".
func readTaskEnv(raw map[string]json.RawMessage, n int, t *Task) error {
	varsField := "environment"
	vars, hasVars := raw["environment"]
	if v, ok := raw["env"]; ok && string(v) != "null" {
		switch bytes.TrimSpace(v)[0] {
		case '"':
			var b string
			_ = json.Unmarshal(v, &b)
			if !slices.Contains(Backends, b) {
				return &TaskError{Line: n, Field: "env", Reason: fmt.Sprintf("%q is not a backend hermes-pipe runs (%s)", b, strings.Join(Backends, ", "))}
			}
			t.Backend = b
		case '{':
			if hasVars && string(vars) != "null" {
				return &TaskError{Line: n, Field: "env", Reason: "an object of variables beside \"environment\": give the variables in \"environment\" only"}
			}
			vars, hasVars, varsField = v, true, "env"
		default:
			return &TaskError{Line: n, Field: "env", Reason: fmt.Sprintf("must be a backend's name (%s) or, as before \"environment\", an object of variables", strings.Join(Backends, ", "))}
		}
	}
	if !hasVars || string(vars) == "null" {
		return nil
	}
	if err := json.Unmarshal(vars, &t.Environment); err != nil {
		return &TaskError{Line: n, Field: varsField, Reason: "must be an object of string values"}
	}
	for k := range t.Environment {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return &TaskError{Line: n, Field: varsField, Reason: fmt.Sprintf("%q is not a variable name", k)}
		}
	}
	return nil
}

// checkTaskForm tells the simple form (no "problem_statement") from the
// SWE-bench form, checks the fields each needs and fills the defaults: the
// SWE-bench form's cwd, and an instance id from the line number.
func checkTaskForm(raw map[string]json.RawMessage, n int, t *Task) error {
	_, hasPS := raw["problem_statement"]
	t.Simple = !hasPS
	switch {
	case t.ProblemStatement == "" && t.Simple:
		return &TaskError{Line: n, Field: "task", Reason: "missing (a task needs \"problem_statement\" or, in the simple form, \"task\")"}
	case t.ProblemStatement == "":
		return &TaskError{Line: n, Field: "problem_statement", Reason: "empty"}
	}
	if !t.Simple {
		if t.InstanceID == "" {
			return &TaskError{Line: n, Field: "instance_id", Reason: "missing"}
		}
		if t.TestCmd == "" {
			return &TaskError{Line: n, Field: "test_cmd", Reason: "missing (the command that runs the task's tests)"}
		}
		if t.Cwd == "" {
			t.Cwd = DefaultCwd
		}
	}
	if t.InstanceID == "" {
		t.InstanceID = "task-" + strconv.Itoa(n)
	}
	return nil
}

// checkTaskValues checks the instance id, base commit and cwd.
func checkTaskValues(n int, t *Task) error {
	if strings.ContainsAny(t.InstanceID, "\n\r\t") {
		return &TaskError{Line: n, Field: "instance_id", Reason: "must not contain control characters"}
	}
	if t.BaseCommit != "" && !isHex(t.BaseCommit) {
		return &TaskError{Line: n, Field: "base_commit", Reason: fmt.Sprintf("%q is not a commit hash", t.BaseCommit)}
	}
	if t.Cwd != "" && !strings.HasPrefix(t.Cwd, "/") {
		return &TaskError{Line: n, Field: "cwd", Reason: "must be an absolute path"}
	}
	return nil
}

// testList reads FAIL_TO_PASS / PASS_TO_PASS: a JSON list of strings, or a
// string holding one (as the SWE-bench datasets store them).
func testList(raw map[string]json.RawMessage, name string, n int) ([]string, error) {
	v, ok := raw[name]
	if !ok || string(v) == "null" {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(v, &list); err == nil {
		return list, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		if strings.TrimSpace(s) == "" {
			return nil, nil
		}
		if err := json.Unmarshal([]byte(s), &list); err == nil {
			return list, nil
		}
	}
	return nil, &TaskError{Line: n, Field: name, Reason: "must be a list of test names (or a string holding a JSON list)"}
}

func isHex(s string) bool {
	if len(s) < 4 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// Graded reports how the task is judged: "tests" when FAIL_TO_PASS or
// PASS_TO_PASS name tests, "exit_code" when only a test command is given,
// and "submission" for a simple task without one (resolved when the agent
// submitted a non-empty patch).
func (t Task) Graded() string {
	switch {
	case len(t.FailToPass)+len(t.PassToPass) > 0:
		return "tests"
	case t.TestCmd != "":
		return "exit_code"
	}
	return "submission"
}

// Prompt is the user message the agent gets: the problem statement and where
// the repository is. The finishing instructions go in the system prompt.
func (t Task) Prompt() string {
	if t.Cwd == "" {
		return t.ProblemStatement
	}
	return strings.TrimRight(t.ProblemStatement, "\n") + "\n\nThe repository is checked out at " + t.Cwd + "."
}

// SystemPrompt is the default system message of SWE runs. Like Hermes' mini
// SWE runner it is sent to the model but not recorded in trajectories.
const SystemPrompt = `You are a software engineer fixing an issue in a repository. Use the terminal tool to inspect the code, edit files and run commands; the working folder and exported variables persist between calls. Make the smallest change that resolves the issue and do not edit the tests.

When you are done, submit by running exactly:

echo MINI_SWE_AGENT_FINAL_OUTPUT

The submission counts only when MINI_SWE_AGENT_FINAL_OUTPUT is the first line of a command's output and that command exits 0. Your patch is what ` + "`git diff`" + ` shows against the starting commit.`
