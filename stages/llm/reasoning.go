package llm

import (
	"encoding/json"
	"slices"
	"strings"
)

// joinReasoning combines reasoning parts the way Hermes' agent does: the
// `reasoning` field first, then `reasoning_content` unless it repeats a part
// already taken, then reasoning_details texts likewise, joined by a blank
// line. Empty parts are skipped.
func joinReasoning(parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" && !slices.Contains(kept, p) {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "\n\n")
}

// rawString decodes a raw JSON value that should be a string; anything else
// (null, missing, other types) yields "".
func rawString(raw string) string {
	if len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal([]byte(raw), &s) != nil {
		return ""
	}
	return s
}

// detailsText pulls the text out of an OpenRouter reasoning_details array:
// each item's summary, content or text, whichever comes first.
func detailsText(raw string) []string {
	if len(raw) < 2 || raw[0] != '[' {
		return nil
	}
	var items []map[string]any
	if json.Unmarshal([]byte(raw), &items) != nil {
		return nil
	}
	var out []string
	for _, it := range items {
		for _, k := range []string{"summary", "content", "text"} {
			if s, ok := it[k].(string); ok && s != "" {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// SplitThink splits a leading <think>...</think> block (after optional
// leading whitespace) off content. It returns the trimmed text inside the
// block, the content after it with leading whitespace removed, and whether a
// complete block was found. Callers that want reasoning a model wrote inline
// use it; Chat leaves such content untouched unless Options.ThinkToReasoning
// is set.
func SplitThink(content string) (think, rest string, ok bool) {
	s := strings.TrimLeft(content, " \t\r\n")
	if !strings.HasPrefix(s, "<think>") {
		return "", content, false
	}
	end := strings.Index(s, "</think>")
	if end < 0 {
		return "", content, false
	}
	think = strings.TrimSpace(s[len("<think>"):end])
	rest = strings.TrimLeft(s[end+len("</think>"):], " \t\r\n")
	return think, rest, true
}
