package rollout

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// toolsetTools maps each toolset to the tools it brings, in the order they are
// offered to the model.
var toolsetTools = map[string][]string{
	"terminal": {"terminal"},
	"file":     {"read_file", "write_file", "patch", "search_files"},
}

// toolSpecs are the OpenAI tool definitions, with Hermes' tool and parameter
// names. Parameters are raw JSON so their key order is stable in the system turn.
var toolSpecs = map[string]schemas.Tool{
	"terminal": fn("terminal",
		"Execute a shell command in the sandbox and return its output and exit code. The working directory and exported variables persist between calls. Commands that run longer than the timeout are killed and return exit code 124.",
		`{"type": "object", "properties": {"command": {"type": "string", "description": "The shell command to execute"}, "timeout": {"type": "integer", "description": "Timeout in seconds (optional)", "minimum": 1}}, "required": ["command"]}`),
	"read_file": fn("read_file",
		"Read a text file with line numbers and pagination. Output format: 'LINE_NUM|CONTENT'. Use offset and limit for large files.",
		`{"type": "object", "properties": {"path": {"type": "string", "description": "Path to the file to read (absolute or relative to the working directory)"}, "offset": {"type": "integer", "description": "Line number to start reading from (1-indexed, default: 1)", "default": 1, "minimum": 1}, "limit": {"type": "integer", "description": "Maximum number of lines to read (default: 500, max: 2000)", "default": 500, "maximum": 2000}}, "required": ["path"]}`),
	"write_file": fn("write_file",
		"Write content to a file, completely replacing existing content. Creates parent directories as needed.",
		`{"type": "object", "properties": {"path": {"type": "string", "description": "Path to the file to write"}, "content": {"type": "string", "description": "Complete content to write to the file"}}, "required": ["path", "content"]}`),
	"patch": fn("patch",
		"Replace text in a file. old_string must match exactly once unless replace_all is true.",
		`{"type": "object", "properties": {"path": {"type": "string", "description": "Path to the file to edit"}, "old_string": {"type": "string", "description": "Exact text to find"}, "new_string": {"type": "string", "description": "Replacement text"}, "replace_all": {"type": "boolean", "description": "Replace every occurrence (default: false)", "default": false}}, "required": ["path", "old_string", "new_string"]}`),
	"search_files": fn("search_files",
		"Search file contents with a regular expression, or find files by name.",
		`{"type": "object", "properties": {"pattern": {"type": "string", "description": "Regex for content search, or glob for file search"}, "target": {"type": "string", "enum": ["content", "files"], "description": "What to search (default: content)", "default": "content"}, "path": {"type": "string", "description": "Folder to search in (default: working directory)", "default": "."}, "file_glob": {"type": "string", "description": "Only search files whose name matches this glob (content search)"}, "limit": {"type": "integer", "description": "Maximum number of results (default: 50)", "default": 50}}, "required": ["pattern"]}`),
}

func fn(name, desc, params string) schemas.Tool {
	return schemas.Tool{Type: "function", Function: schemas.FunctionSpec{Name: name, Description: desc, Parameters: json.RawMessage(params)}}
}

// AllToolNames lists every built-in tool, in offer order.
func AllToolNames() []string {
	var out []string
	for _, ts := range schemas.KnownToolsets {
		out = append(out, toolsetTools[ts]...)
	}
	return out
}

// ToolsFor returns the tool definitions offered for the given toolsets, in a
// stable order (toolsets sorted by name as given in KnownToolsets).
func ToolsFor(toolsets []string) []schemas.Tool {
	want := map[string]bool{}
	for _, ts := range toolsets {
		want[ts] = true
	}
	var out []schemas.Tool
	for _, ts := range schemas.KnownToolsets {
		if !want[ts] {
			continue
		}
		for _, name := range toolsetTools[ts] {
			out = append(out, toolSpecs[name])
		}
	}
	return out
}

// errBadCall is a tool call the model got wrong (unknown tool or arguments that
// do not parse or lack a required field). Three in a row end the rollout.
type errBadCall struct{ msg string }

func (e *errBadCall) Error() string { return e.msg }

// toolResult renders a tool's result as the JSON text the model sees.
func toolResult(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return `{"error": "internal: cannot encode tool result"}`
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func toolError(msg string) string { return toolResult(map[string]any{"error": msg}) }

// runTool executes one tool call in the session. It returns the result text
// for the model, a *errBadCall for a call the model got wrong, or another error
// when the sandbox itself failed (the rollout then ends as sandbox_error).
func runTool(ctx context.Context, s sandbox.Session, allowed map[string]bool, call schemas.ToolCall, cmdTimeout time.Duration) (string, error) {
	name := call.Function.Name
	if _, known := toolSpecs[name]; !known || !allowed[name] {
		avail := make([]string, 0, len(allowed))
		for n := range allowed {
			avail = append(avail, n)
		}
		sort.Strings(avail)
		msg := fmt.Sprintf("unknown tool %q; available tools: %s", name, strings.Join(avail, ", "))
		return toolError(msg), &errBadCall{msg}
	}
	args := map[string]json.RawMessage{}
	argText := strings.TrimSpace(call.Function.Arguments)
	if argText == "" {
		argText = "{}"
	}
	if err := json.Unmarshal([]byte(argText), &args); err != nil || args == nil {
		msg := fmt.Sprintf("invalid arguments for %s: not a JSON object: %v", name, errText(err))
		return toolError(msg), &errBadCall{msg}
	}
	switch name {
	case "terminal":
		return terminal(ctx, s, args, cmdTimeout)
	case "read_file":
		return readFile(ctx, s, args)
	case "write_file":
		return writeFile(ctx, s, args)
	case "patch":
		return patchFile(ctx, s, args)
	case "search_files":
		return searchFiles(ctx, s, args)
	}
	return toolError("unreachable"), nil
}

func errText(err error) string {
	if err == nil {
		return "null"
	}
	return err.Error()
}

func strArg(args map[string]json.RawMessage, tool, key string, required bool) (string, error) {
	v, ok := args[key]
	if !ok || string(v) == "null" {
		if required {
			msg := fmt.Sprintf("invalid arguments for %s: missing required %q", tool, key)
			return "", &errBadCall{msg}
		}
		return "", nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		msg := fmt.Sprintf("invalid arguments for %s: %q must be a string", tool, key)
		return "", &errBadCall{msg}
	}
	return s, nil
}

func intArg(args map[string]json.RawMessage, tool, key string, def int) (int, error) {
	v, ok := args[key]
	if !ok || string(v) == "null" {
		return def, nil
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		// Models often send numbers as strings.
		var s string
		if json.Unmarshal(v, &s) == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil {
				return n, nil
			}
		}
		return 0, &errBadCall{fmt.Sprintf("invalid arguments for %s: %q must be an integer", tool, key)}
	}
	return int(f), nil
}

func boolArg(args map[string]json.RawMessage, key string) bool {
	var b bool
	_ = json.Unmarshal(args[key], &b)
	return b
}

// badCall turns an argument error into the (result, error) pair of runTool.
func badCall(err error) (string, error) { return toolError(err.Error()), err }

func terminal(ctx context.Context, s sandbox.Session, args map[string]json.RawMessage, def time.Duration) (string, error) {
	command, err := strArg(args, "terminal", "command", true)
	if err != nil {
		return badCall(err)
	}
	secs, err := intArg(args, "terminal", "timeout", 0)
	if err != nil {
		return badCall(err)
	}
	timeout := def
	if secs > 0 {
		timeout = time.Duration(secs) * time.Second
		if def > 0 && timeout > 4*def {
			timeout = 4 * def // the model may not hold a worker forever
		}
	}
	res, err := s.Exec(ctx, sandbox.Cmd{Command: command, Timeout: timeout})
	if err != nil {
		return "", err
	}
	out := res.Stdout
	if res.Stderr != "" {
		if out != "" && !strings.HasSuffix(out, "\n") {
			out += "\n"
		}
		out += res.Stderr
	}
	// Hermes' result shape and key order: output, exit_code, error.
	result := struct {
		Output   string  `json:"output"`
		ExitCode int     `json:"exit_code"`
		Error    *string `json:"error"`
	}{Output: out, ExitCode: res.ExitCode}
	if res.TimedOut {
		msg := fmt.Sprintf("command timed out after %s", timeout)
		result.Error = &msg
	}
	return toolResult(result), nil
}

// catFile reads a whole file from the session as exact bytes (base64 over the
// wire so binary content and output limits cannot corrupt it).
func catFile(ctx context.Context, s sandbox.Session, path string) ([]byte, string, error) {
	cmd := fmt.Sprintf(`p=%s; if [ -d "$p" ]; then echo "is a directory" >&2; exit 3; fi; if [ ! -e "$p" ]; then echo "no such file" >&2; exit 2; fi; base64 < "$p"`, sandbox.ShellQuote(path))
	res, err := s.Exec(ctx, sandbox.Cmd{Command: cmd})
	if err != nil {
		return nil, "", err
	}
	if res.ExitCode != 0 {
		msg := strings.TrimSpace(res.Stderr)
		if msg == "" {
			msg = fmt.Sprintf("exit code %d", res.ExitCode)
		}
		return nil, fmt.Sprintf("cannot read %s: %s", path, msg), nil
	}
	if res.Truncated {
		return nil, fmt.Sprintf("cannot read %s: file too large for one read", path), nil
	}
	data, derr := base64.StdEncoding.DecodeString(strings.Map(dropSpace, res.Stdout))
	if derr != nil {
		return nil, fmt.Sprintf("cannot read %s: %v", path, derr), nil
	}
	return data, "", nil
}

func dropSpace(r rune) rune {
	if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
		return -1
	}
	return r
}

func readFile(ctx context.Context, s sandbox.Session, args map[string]json.RawMessage) (string, error) {
	path, err := strArg(args, "read_file", "path", true)
	if err != nil {
		return badCall(err)
	}
	offset, err := intArg(args, "read_file", "offset", 1)
	if err != nil {
		return badCall(err)
	}
	limit, err := intArg(args, "read_file", "limit", 500)
	if err != nil {
		return badCall(err)
	}
	if offset < 1 {
		offset = 1
	}
	if limit < 1 || limit > 2000 {
		limit = 2000
	}
	data, msg, err := catFile(ctx, s, path)
	if err != nil {
		return "", err
	}
	if msg != "" {
		return toolError(msg), nil
	}
	text := strings.ToValidUTF8(string(data), "\uFFFD")
	lines := strings.SplitAfter(text, "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	var b strings.Builder
	end := offset - 1 + limit
	if end > len(lines) {
		end = len(lines)
	}
	for i := offset - 1; i < end; i++ {
		fmt.Fprintf(&b, "%d|%s", i+1, strings.TrimRight(lines[i], "\n"))
		if i < end-1 {
			b.WriteByte('\n')
		}
	}
	return toolResult(struct {
		Content    string `json:"content"`
		TotalLines int    `json:"total_lines"`
		Truncated  bool   `json:"truncated"`
	}{b.String(), len(lines), end < len(lines)}), nil
}

// putFile writes data to path in the session, creating parent folders.
func putFile(ctx context.Context, s sandbox.Session, path string, data []byte) (string, error) {
	enc := base64.StdEncoding.EncodeToString(data)
	cmd := fmt.Sprintf(`p=%s; d=$(dirname -- "$p") && mkdir -p -- "$d" && printf '%%s' %s | base64 -d > "$p"`, sandbox.ShellQuote(path), sandbox.ShellQuote(enc))
	res, err := s.Exec(ctx, sandbox.Cmd{Command: cmd})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return fmt.Sprintf("cannot write %s: %s", path, strings.TrimSpace(res.Stderr+" exit code "+strconv.Itoa(res.ExitCode))), nil
	}
	return "", nil
}

func writeFile(ctx context.Context, s sandbox.Session, args map[string]json.RawMessage) (string, error) {
	path, err := strArg(args, "write_file", "path", true)
	if err != nil {
		return badCall(err)
	}
	content, err := strArg(args, "write_file", "content", true)
	if err != nil {
		return badCall(err)
	}
	msg, err := putFile(ctx, s, path, []byte(content))
	if err != nil {
		return "", err
	}
	if msg != "" {
		return toolError(msg), nil
	}
	return toolResult(struct {
		BytesWritten int `json:"bytes_written"`
	}{len(content)}), nil
}

func patchFile(ctx context.Context, s sandbox.Session, args map[string]json.RawMessage) (string, error) {
	path, err := strArg(args, "patch", "path", true)
	if err != nil {
		return badCall(err)
	}
	oldS, err := strArg(args, "patch", "old_string", true)
	if err != nil {
		return badCall(err)
	}
	newS, err := strArg(args, "patch", "new_string", true)
	if err != nil {
		return badCall(err)
	}
	all := boolArg(args, "replace_all")
	data, msg, err := catFile(ctx, s, path)
	if err != nil {
		return "", err
	}
	fail := func(m string) (string, error) {
		return toolResult(struct {
			Success bool   `json:"success"`
			Error   string `json:"error"`
		}{false, m}), nil
	}
	if msg != "" {
		return fail(msg)
	}
	text := string(data)
	if oldS == "" {
		return fail("old_string is empty")
	}
	n := strings.Count(text, oldS)
	switch {
	case n == 0:
		return fail(fmt.Sprintf("old_string not found in %s", path))
	case n > 1 && !all:
		return fail(fmt.Sprintf("old_string matches %d times in %s; add context or set replace_all", n, path))
	}
	if all {
		text = strings.ReplaceAll(text, oldS, newS)
	} else {
		text = strings.Replace(text, oldS, newS, 1)
	}
	if msg, err := putFile(ctx, s, path, []byte(text)); err != nil {
		return "", err
	} else if msg != "" {
		return fail(msg)
	}
	return toolResult(struct {
		Success      bool `json:"success"`
		Replacements int  `json:"replacements"`
	}{true, map[bool]int{true: n, false: 1}[all]}), nil
}

func searchFiles(ctx context.Context, s sandbox.Session, args map[string]json.RawMessage) (string, error) {
	pattern, err := strArg(args, "search_files", "pattern", true)
	if err != nil {
		return badCall(err)
	}
	target, err := strArg(args, "search_files", "target", false)
	if err != nil {
		return badCall(err)
	}
	dir, err := strArg(args, "search_files", "path", false)
	if err != nil {
		return badCall(err)
	}
	glob, err := strArg(args, "search_files", "file_glob", false)
	if err != nil {
		return badCall(err)
	}
	limit, err := intArg(args, "search_files", "limit", 50)
	if err != nil {
		return badCall(err)
	}
	if dir == "" {
		dir = "."
	}
	if limit < 1 || limit > 1000 {
		limit = 1000
	}
	var cmd string
	switch target {
	case "", "content":
		target = "content"
		nameFilter := ""
		if glob != "" {
			nameFilter = "-name " + sandbox.ShellQuote(glob)
		}
		cmd = fmt.Sprintf(`find %s -type f %s ! -path '*/.git/*' -exec grep -nHE -e %s -- {} + 2>/dev/null | head -n %d`, sandbox.ShellQuote(dir), nameFilter, sandbox.ShellQuote(pattern), limit+1)
	case "files":
		cmd = fmt.Sprintf(`find %s -name %s ! -path '*/.git/*' 2>/dev/null | head -n %d`, sandbox.ShellQuote(dir), sandbox.ShellQuote(pattern), limit+1)
	default:
		return badCall(&errBadCall{fmt.Sprintf("invalid arguments for search_files: target must be \"content\" or \"files\", got %q", target)})
	}
	res, err := s.Exec(ctx, sandbox.Cmd{Command: cmd})
	if err != nil {
		return "", err
	}
	var matches []string
	for _, l := range strings.Split(strings.TrimRight(res.Stdout, "\n"), "\n") {
		if l != "" {
			matches = append(matches, l)
		}
	}
	truncated := len(matches) > limit
	if truncated {
		matches = matches[:limit]
	}
	if matches == nil {
		matches = []string{}
	}
	return toolResult(struct {
		Target    string   `json:"target"`
		Matches   []string `json:"matches"`
		Count     int      `json:"count"`
		Truncated bool     `json:"truncated"`
	}{target, matches, len(matches), truncated}), nil
}
