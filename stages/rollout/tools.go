package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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

// AllToolNames lists the terminal and file tools, in offer order: the tools
// every record's tool_stats holds (the stage adds those of the other
// toolsets its run offers).
func AllToolNames() []string {
	var out []string
	for _, ts := range []string{"terminal", "file"} {
		out = append(out, toolsetTools[ts]...)
	}
	return out
}

// errBadCall is a tool call the model got wrong (unknown tool or arguments that
// do not parse or lack a required field). Three in a row end the rollout.
type errBadCall struct{ msg string }

func (e *errBadCall) Error() string { return e.msg }

func toolError(msg string) string { return schemas.ToolResultJSON(map[string]any{"error": msg}) }

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
	out := commandOutput(res)
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
	return schemas.ToolResultJSON(result), nil
}

// commandOutput is what the model sees of a command: its stdout, then its
// stderr on a line of its own.
func commandOutput(res sandbox.Result) string {
	out := res.Stdout
	if res.Stderr != "" {
		if out != "" && !strings.HasSuffix(out, "\n") {
			out += "\n"
		}
		out += res.Stderr
	}
	return out
}

// Limits of the file tools.
const (
	// maxPageBytes bounds one read_file result: a page stops before the line
	// that would pass it (truncated is then true), and a single longer line
	// is cut with a marker.
	maxPageBytes = 1 << 20
	// maxPatchBytes is the largest file patch reads into memory.
	maxPatchBytes = 64 << 20
	// scanFirst and scanMax are the first and largest chunk read_file asks
	// for while it scans forward to its page.
	scanFirst = 64 << 10
	scanMax   = 1 << 20
	// countLocally is the largest rest of a file read_file counts lines in
	// itself after its page; beyond it the sandbox counts (wc -l), so the
	// rest never crosses the driver.
	countLocally = 1 << 20
)

// lineCutMarker ends a line longer than maxPageBytes in a read_file page.
const lineCutMarker = " ... [line cut: longer than 1 MiB]"

// fileFailure sorts the error of a file operation: a driver failure (the
// session could not open, the daemon or connection is gone, the session is
// closed, the rollout's context ended) is returned as an error, which ends
// the rollout as sandbox_error; anything else (a missing file, permission
// denied, a folder, a timeout of the operation itself) becomes the message
// the model sees as a tool error.
func fileFailure(ctx context.Context, err error) (string, error) {
	var oe *openError
	if ctx.Err() != nil || errors.Is(err, sandbox.ErrUnavailable) || errors.Is(err, sandbox.ErrClosed) || errors.As(err, &oe) {
		return "", err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no such file", nil
	case errors.Is(err, sandbox.ErrIsDir):
		return "is a directory", nil
	case errors.Is(err, fs.ErrPermission):
		return "permission denied", nil
	case errors.Is(err, sandbox.ErrNotRegular):
		return "not a regular file", nil
	case errors.Is(err, context.DeadlineExceeded):
		return "the file operation timed out", nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error(), nil
	}
	return err.Error(), nil
}

// page is what read_file collects while it scans a file forward.
type page struct {
	offset, end int // first and last line number wanted
	b           strings.Builder
	lines       int    // lines in b
	cur         []byte // the current line, when it is in the page
	curCut      bool   // the current line passed maxPageBytes
	full        bool   // a line did not fit: the page stops before it
}

// add ends line n (content without its newline) and reports whether the
// page can take more lines.
func (p *page) add(n int) bool {
	if n < p.offset || n > p.end || p.full {
		return !p.full && n < p.end
	}
	text := strings.ToValidUTF8(string(p.cur), "\uFFFD")
	if p.curCut {
		text += lineCutMarker
	}
	entry := strconv.Itoa(n) + "|" + text
	if p.lines > 0 && p.b.Len()+1+len(entry) > maxPageBytes {
		p.full = true
		return false
	}
	if p.lines > 0 {
		p.b.WriteByte('\n')
	}
	p.b.WriteString(entry)
	p.lines++
	p.cur, p.curCut = p.cur[:0], false
	return n < p.end
}

// take appends seg, part of line n, to the current line when n is in the page.
func (p *page) take(n int, seg []byte) {
	if n < p.offset || n > p.end || p.full || p.curCut {
		return
	}
	if room := maxPageBytes - len(p.cur); len(seg) > room {
		seg = seg[:room]
		for len(seg) > 0 && !utf8.RuneStart(seg[len(seg)-1]) {
			seg = seg[:len(seg)-1] // do not split a rune
		}
		if len(seg) > 0 && !utf8.FullRune(seg[len(seg)-1:]) {
			seg = seg[:len(seg)-1]
		}
		p.curCut = true
	}
	p.cur = append(p.cur, seg...)
}

// readFile answers read_file: lines offset..offset+limit-1 of the file,
// numbered, with the file's line count. It scans the file forward through
// sandbox.Files in growing chunks and stops once its page is complete, so
// only the bytes up to the page cross the driver; the line count of the
// rest comes from wc -l in the sandbox (or, where that does not work, a
// scan of the rest).
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
	pg := &page{offset: offset, end: offset - 1 + limit}
	line := 1 // number of the line the next byte belongs to
	var pos, size int64
	var last byte // the last byte scanned
	counting := false
	total := -1
	for chunk := scanFirst; ; chunk = min(2*chunk, scanMax) {
		if counting && size-pos > countLocally {
			if n, ok, err := countLines(ctx, s, path); err != nil {
				return "", err
			} else if ok {
				total = n
				break
			}
		}
		data, sz, err := s.ReadRange(ctx, path, pos, chunk)
		if err != nil {
			msg, err := fileFailure(ctx, err)
			if err != nil {
				return "", err
			}
			return toolError(fmt.Sprintf("cannot read %s: %s", path, msg)), nil
		}
		size = sz
		if len(data) == 0 {
			break
		}
		pos += int64(len(data))
		last = data[len(data)-1]
		if counting {
			line += bytes.Count(data, []byte{'\n'})
		} else {
			for len(data) > 0 {
				i := bytes.IndexByte(data, '\n')
				if i < 0 {
					pg.take(line, data)
					break
				}
				pg.take(line, data[:i])
				more := pg.add(line)
				line++
				data = data[i+1:]
				if !more {
					counting = true
					line += bytes.Count(data, []byte{'\n'})
					break
				}
			}
		}
		if pos >= size {
			break
		}
	}
	if total < 0 {
		total = line - 1
		if size > 0 && last != '\n' {
			total++ // the last line has no newline
			if !counting {
				pg.add(line)
			}
		}
	}
	end := min(offset-1+limit, total)
	return schemas.ToolResultJSON(struct {
		Content    string `json:"content"`
		TotalLines int    `json:"total_lines"`
		Truncated  bool   `json:"truncated"`
	}{pg.b.String(), total, pg.full || end < total}), nil
}

// countLines asks the sandbox for the line count of path: newlines, plus
// one when the last byte is not a newline. ok is false when the answer
// cannot be used (no wc, the file is gone); the caller then counts itself.
// The error is a driver failure.
func countLines(ctx context.Context, s sandbox.Session, path string) (int, bool, error) {
	if !strings.HasPrefix(path, "/") {
		path = "./" + path // not an option to tail
	}
	p := sandbox.ShellQuote(path)
	res, err := s.Exec(ctx, sandbox.Cmd{Command: "LC_ALL=C; export LC_ALL; wc -c <" + p + " && wc -l <" + p + " && tail -c 1 " + p + " | wc -l"})
	if err != nil {
		return 0, false, err
	}
	f := strings.Fields(res.Stdout)
	if res.ExitCode != 0 || len(f) != 3 {
		return 0, false, nil
	}
	var n [3]int64
	for i := range f {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil || v < 0 {
			return 0, false, nil
		}
		n[i] = v
	}
	// A file that grew since it was scanned (a log being written) is
	// counted as it is now: the page read is still a prefix of it.
	total := int(n[1])
	if n[0] > 0 && n[2] == 0 {
		total++
	}
	return total, true, nil
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
	if err := s.WriteFile(ctx, path, []byte(content), 0o644); err != nil {
		msg, err := fileFailure(ctx, err)
		if err != nil {
			return "", err
		}
		return toolError(fmt.Sprintf("cannot write %s: %s", path, msg)), nil
	}
	return schemas.ToolResultJSON(struct {
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
	fail := func(m string) (string, error) {
		return schemas.ToolResultJSON(struct {
			Success bool   `json:"success"`
			Error   string `json:"error"`
		}{false, m}), nil
	}
	data, err := sandbox.ReadAll(ctx, s, path, maxPatchBytes)
	if err != nil {
		msg, err := fileFailure(ctx, err)
		if err != nil {
			return "", err
		}
		return fail(fmt.Sprintf("cannot read %s: %s", path, msg))
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
	if err := s.WriteFile(ctx, path, []byte(text), 0o644); err != nil {
		msg, err := fileFailure(ctx, err)
		if err != nil {
			return "", err
		}
		return fail(fmt.Sprintf("cannot write %s: %s", path, msg))
	}
	return schemas.ToolResultJSON(struct {
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
	return schemas.ToolResultJSON(struct {
		Target    string   `json:"target"`
		Matches   []string `json:"matches"`
		Count     int      `json:"count"`
		Truncated bool     `json:"truncated"`
	}{target, matches, len(matches), truncated}), nil
}
