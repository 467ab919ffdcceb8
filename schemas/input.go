package schemas

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Toolset names understood by the agent loop. A row's `toolsets` field and the
// --toolsets flag may name these and MCP toolsets (see IsKnownToolset).
var KnownToolsets = []string{"terminal", "file", "todo", "skills", "execute_code", "cronjob"}

// MCPToolsetPrefix starts the toolset of an MCP server: "mcp-<server>", the
// server's name sanitised to [A-Za-z0-9_-]. Whether the server is configured
// is checked by the run, which knows its --mcp-config.
const MCPToolsetPrefix = "mcp-"

// FieldError is a problem with one field of one input row; Field is a JSON path
// such as "prompt" or "toolsets[2]", empty when the row as a whole is bad.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// ParseInputRow validates one non-blank line of a generate prompts file and
// returns the row. It never panics on any input; a bad row yields a
// *FieldError naming the field. Unknown fields are ignored. Called once per line
// by the prompts source; it costs one JSON decode.
func ParseInputRow(line []byte) (InputRow, error) {
	if row, ok := parseInputRowFast(line); ok {
		return row, nil
	}
	return parseInputRowSlow(line)
}

// parseInputRowSlow validates with encoding/json and explains the first
// problem it finds; the fast path falls back to it for any row it does not
// accept, so both agree on what is valid. On an error the row holds the
// fields read before the bad one.
func parseInputRowSlow(line []byte) (InputRow, error) {
	var row InputRow
	raw, err := decodeRowObject(line)
	if err != nil {
		return row, err
	}
	if err := slowPrompt(raw, &row); err != nil {
		return row, err
	}
	if err := optionalString(raw, "id", &row.ID); err != nil {
		return row, err
	}
	if err := slowImage(raw, &row); err != nil {
		return row, err
	}
	if err := slowCwd(raw, &row); err != nil {
		return row, err
	}
	if err := slowToolsets(raw, &row); err != nil {
		return row, err
	}
	if err := slowCheck(raw, "verify", &row.Verify); err != nil {
		return row, err
	}
	if err := slowCheck(raw, "answer", &row.Answer); err != nil {
		return row, err
	}
	if v, ok := raw["metadata"]; ok && !isNull(v) {
		if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '{' {
			return row, &FieldError{Field: "metadata", Reason: "must be a JSON object"}
		}
		row.Metadata = append(json.RawMessage(nil), v...)
	}
	return row, nil
}

// decodeRowObject checks that line is valid UTF-8 holding one JSON object
// nested no deeper than MaxFieldDepth, and returns its members undecoded.
func decodeRowObject(line []byte) (map[string]json.RawMessage, error) {
	if !utf8.Valid(line) {
		return nil, &FieldError{Reason: "invalid UTF-8"}
	}
	if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '{' {
		if json.Valid(t) {
			return nil, &FieldError{Reason: "a row must be a JSON object, got " + jsonKind(t)}
		}
		return nil, &FieldError{Reason: "invalid JSON: a row must be a JSON object"}
	}
	if field, deep := tooDeep(line); deep {
		return nil, &FieldError{Field: field, Reason: fmt.Sprintf("nested deeper than %d levels", MaxFieldDepth)}
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&raw); err != nil {
		return nil, &FieldError{Reason: "invalid JSON: " + err.Error()}
	}
	if raw == nil {
		return nil, &FieldError{Reason: "a row must be a JSON object"}
	}
	if dec.More() {
		return nil, &FieldError{Reason: "invalid JSON: trailing data after the object"}
	}
	return raw, nil
}

// slowPrompt reads the required, non-empty prompt string into row.
func slowPrompt(raw map[string]json.RawMessage, row *InputRow) error {
	p, ok := raw["prompt"]
	if !ok {
		return &FieldError{Field: "prompt", Reason: "missing (required string)"}
	}
	if isNull(p) {
		return &FieldError{Field: "prompt", Reason: "must be a string, got null"}
	}
	if err := stringField(p, "prompt", &row.Prompt); err != nil {
		return err
	}
	if row.Prompt == "" {
		return &FieldError{Field: "prompt", Reason: "empty"}
	}
	return nil
}

// optionalString reads member key into dst when it is present and not null.
func optionalString(raw map[string]json.RawMessage, key string, dst *string) error {
	if v, ok := raw[key]; ok && !isNull(v) {
		return stringField(v, key, dst)
	}
	return nil
}

// slowImage sets row.Image from image or its synonym docker_image, which
// must agree when both are given.
func slowImage(raw map[string]json.RawMessage, row *InputRow) error {
	var image, dockerImage string
	if err := optionalString(raw, "image", &image); err != nil {
		return err
	}
	if err := optionalString(raw, "docker_image", &dockerImage); err != nil {
		return err
	}
	if image != "" && dockerImage != "" && image != dockerImage {
		return &FieldError{Field: "docker_image", Reason: fmt.Sprintf("conflicts with image (%q vs %q)", dockerImage, image)}
	}
	row.Image = image
	if row.Image == "" {
		row.Image = dockerImage
	}
	return nil
}

// slowCwd reads the optional cwd into row and checks it (cwdProblem).
func slowCwd(raw map[string]json.RawMessage, row *InputRow) error {
	v, ok := raw["cwd"]
	if !ok || isNull(v) {
		return nil
	}
	if err := stringField(v, "cwd", &row.Cwd); err != nil {
		return err
	}
	if reason := cwdProblem(row.Cwd); reason != "" {
		return &FieldError{Field: "cwd", Reason: reason}
	}
	return nil
}

// slowCheck reads the optional verify or answer string into dst and checks
// it (checkProblem).
func slowCheck(raw map[string]json.RawMessage, key string, dst *string) error {
	if err := optionalString(raw, key, dst); err != nil {
		return err
	}
	if _, ok := raw[key]; ok && !isNull(raw[key]) {
		if reason := checkProblem(*dst); reason != "" {
			return &FieldError{Field: key, Reason: reason}
		}
	}
	return nil
}

// checkProblem says what is wrong with a row's verify command or expected
// answer, or "": it must be a non-empty string without NUL (a command cannot
// hold one, and an answer that does cannot be told apart from a cut one).
func checkProblem(s string) string {
	switch {
	case strings.TrimSpace(s) == "":
		return "empty (omit the field or use null when the row has nothing to check)"
	case strings.IndexByte(s, 0) >= 0:
		return "contains a NUL character"
	}
	return ""
}

// slowToolsets reads the optional toolsets array into row: a non-empty
// list of known toolset names (IsKnownToolset). On an error row.Toolsets
// holds the names before the bad one.
func slowToolsets(raw map[string]json.RawMessage, row *InputRow) error {
	v, ok := raw["toolsets"]
	if !ok || isNull(v) {
		return nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(v, &list); err != nil {
		return &FieldError{Field: "toolsets", Reason: "must be an array of strings"}
	}
	for i, item := range list {
		var name string
		if err := stringField(item, "toolsets["+strconv.Itoa(i)+"]", &name); err != nil {
			return err
		}
		if !IsKnownToolset(name) {
			return &FieldError{Field: "toolsets[" + strconv.Itoa(i) + "]", Reason: fmt.Sprintf("unknown toolset %q (known: %v or mcp-<server>)", name, KnownToolsets)}
		}
		row.Toolsets = append(row.Toolsets, name)
	}
	if len(row.Toolsets) == 0 {
		return &FieldError{Field: "toolsets", Reason: "empty (omit the field to use the run's toolsets)"}
	}
	return nil
}

// cwdProblem says what is wrong with a row's cwd, or "" when it is an
// absolute path every sandbox driver can be asked to start in. Which
// folders a row may name is the run's matter: with the local and ssh
// sandboxes the cmd layer checks each cwd against --cwd-root before the row
// becomes work (prompts.Options.CheckCwd, sandbox.CwdRule); docker creates a
// missing working folder in the container.
func cwdProblem(cwd string) string {
	switch {
	case cwd == "":
		return "empty (omit the field or use null for the session's own folder)"
	case cwd[0] != '/':
		return fmt.Sprintf("%q is not an absolute path", cwd)
	case strings.IndexByte(cwd, 0) >= 0:
		return "contains a NUL character"
	}
	return ""
}

// MaxFieldDepth bounds how deeply arrays and objects may nest inside one
// field of an input row (metadata, or a field hermes-pipe ignores). A record
// holds the row's metadata one level down, so a record nests at most
// MaxFieldDepth+1 levels: far within what the readers of the shards accept
// (schemas/pyjson: 1000; Python 3.11's json.loads at its default recursion
// limit reads 995 levels of objects or arrays and fails from 996, measured by
// loading "{\"a\":"*n + "1" + "}"*n for n near 1000; serde_json's default
// recursion limit is 128), with room for a reader that is itself called deep
// in a stack.
const MaxFieldDepth = 100

// tooDeep reports whether containers nest more than MaxFieldDepth levels
// inside one member of the JSON object in line, and which member (its key,
// unescaped). It costs two vectorised byte counts for ordinary rows and one
// byte scan, without allocation, for rows with many brackets, so both row
// parsers run it before decoding anything.
func tooDeep(line []byte) (string, bool) {
	// Fewer brackets than the limit, wherever they are, cannot nest past
	// it: two vectorised counts spare the scan for nearly every row.
	if bytes.Count(line, []byte{'{'})+bytes.Count(line, []byte{'['}) <= MaxFieldDepth+1 {
		return "", false
	}
	depth := 0
	inStr, esc := false, false
	strStart, keyStart, keyEnd := 0, -1, -1
	lastStart, lastEnd := -1, -1
	for i, c := range line {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
				if depth == 1 {
					lastStart, lastEnd = strStart, i+1
				}
			}
			continue
		}
		switch c {
		case '"':
			inStr, strStart = true, i
		case ':':
			if depth == 1 {
				keyStart, keyEnd = lastStart, lastEnd
			}
		case '{', '[':
			depth++
			if depth > MaxFieldDepth+1 {
				key := ""
				if keyStart >= 0 {
					if err := json.Unmarshal(line[keyStart:keyEnd], &key); err != nil {
						key = string(line[keyStart:keyEnd])
					}
				}
				return key, true
			}
		case '}', ']':
			depth--
		}
	}
	return "", false
}

// IsKnownToolset reports whether name is one of KnownToolsets or has the
// form of an MCP server's toolset (MCPToolsetPrefix and at least one of
// [A-Za-z0-9_-]).
func IsKnownToolset(name string) bool {
	for _, k := range KnownToolsets {
		if k == name {
			return true
		}
	}
	rest, ok := strings.CutPrefix(name, MCPToolsetPrefix)
	if !ok || rest == "" {
		return false
	}
	for _, c := range []byte(rest) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func stringField(v json.RawMessage, field string, dst *string) error {
	if err := json.Unmarshal(v, dst); err != nil {
		return &FieldError{Field: field, Reason: "must be a string, got " + jsonKind(v)}
	}
	return nil
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

func jsonKind(v json.RawMessage) string {
	t := bytes.TrimSpace(v)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// RowKey is the stable resume key of one (row, sample). A row with an explicit
// id is keyed by it; otherwise by its position among non-blank lines plus a hash
// of its text, so duplicated prompts on different lines are distinct rows and an
// edited row is treated as new work. Keys contain no '/' or whitespace other
// than the one '#' separator before the sample number.
func RowKey(index int, id string, line []byte, sample int) string {
	if id != "" {
		q := strconv.Quote(id) // escapes control characters and newlines
		return "id:" + q[1:len(q)-1] + "#" + strconv.Itoa(sample)
	}
	return string(strconv.AppendInt(AppendRowKeyPrefix(make([]byte, 0, 40), index, line), int64(sample), 10))
}

// AppendRowKeyPrefix appends to b what the keys of every sample of a row
// without an id share: RowKey(index, "", line, sample) is that prefix
// followed by the sample number. A source making several samples' keys
// hashes the line once.
func AppendRowKeyPrefix(b []byte, index int, line []byte) []byte {
	sum := sha256.Sum256(bytes.TrimSpace(line))
	b = append(b, "row:"...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, ':')
	b = hex.AppendEncode(b, sum[:6])
	return append(b, '#')
}
