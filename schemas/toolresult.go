package schemas

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/hermes-pipe/hermes-pipe/schemas/pyjson"
)

// ToolResultJSON renders a tool's result as the JSON text the model sees:
// one line, no HTML escaping (Hermes' json.dumps leaves <, > and & as they
// are). Every tool, built-in or MCP, answers through it.
func ToolResultJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return `{"error": "internal: cannot encode tool result"}`
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// ToolResultSucceeded judges one tool result the way Hermes' batch_runner
// does when it fills tool_stats:
//
//   - if content parses as JSON (Python json.loads rules) and is an object,
//     the call failed when it has an "error" member that is not null, when
//     its "content" member is an object whose "error" is not null, or when
//     its "success" member is exactly false; any other JSON value succeeded;
//   - if content is not JSON, the call failed when content is empty or, after
//     trimming Python whitespace, starts with "error:" in any letter case.
//
// A repeated key counts with its last value, as in a Python dict. It is
// called once per tool message; it does not allocate for the common shapes.
func ToolResultSucceeded(content string) bool {
	verdict, isJSON := pyjson.JudgeResult(content)
	if isJSON {
		return verdict
	}
	if content == "" {
		return false
	}
	s := pyLStrip(content)
	return !(len(s) >= 6 && asciiLowerEq(s[:6], "error:"))
}

func asciiLowerEq(s, lower string) bool {
	for i := 0; i < len(lower); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// ToolStatsOf counts tool calls and judges their results the way Hermes'
// batch_runner._extract_tool_stats does: every assistant tool call counts
// once under its function name, and every tool message whose tool_call_id
// names an earlier call adds one success or one failure (see
// ToolResultSucceeded) to that call's tool. Tool messages for unknown ids are
// ignored. The second map is tool_error_counts: the failures per tool.
//
// Only tools that were called appear; NormalizeToolStats adds zero entries
// for the other available tools as batch_runner does before writing a row.
// It is called once per record and allocates the two maps.
func ToolStatsOf(messages []Message) (map[string]ToolStat, map[string]int) {
	stats := map[string]ToolStat{}
	var byID map[string]string
	for i := range messages {
		m := &messages[i]
		switch {
		case m.Role == "assistant" && len(m.ToolCalls) > 0:
			for j := range m.ToolCalls {
				tc := &m.ToolCalls[j]
				st := stats[tc.Function.Name]
				st.Count++
				stats[tc.Function.Name] = st
				if byID == nil {
					byID = map[string]string{}
				}
				byID[tc.ID] = tc.Function.Name
			}
		case m.Role == "tool":
			name, ok := byID[m.ToolCallID]
			if !ok {
				continue
			}
			st := stats[name]
			if ToolResultSucceeded(m.Content) {
				st.Success++
			} else {
				st.Failure++
			}
			stats[name] = st
		}
	}
	errs := make(map[string]int, len(stats))
	for name, st := range stats {
		errs[name] = st.Failure
	}
	return stats, errs
}

// NormalizeToolStats adds a zero entry for every name in allTools that is
// missing from stats and errs, as batch_runner's _normalize_tool_stats and
// _normalize_tool_error_counts do so that every row has the same schema
// (Arrow/Parquet, Hugging Face datasets). Entries for tools outside allTools
// are kept. It edits the maps in place; nil maps are created.
func NormalizeToolStats(stats map[string]ToolStat, errs map[string]int, allTools []string) (map[string]ToolStat, map[string]int) {
	if stats == nil {
		stats = make(map[string]ToolStat, len(allTools))
	}
	if errs == nil {
		errs = make(map[string]int, len(allTools))
	}
	for _, name := range allTools {
		if _, ok := stats[name]; !ok {
			stats[name] = ToolStat{}
		}
		if _, ok := errs[name]; !ok {
			errs[name] = 0
		}
	}
	return stats, errs
}

// ReasoningStatsOf counts assistant turns with and without reasoning the way
// Hermes' batch_runner._extract_reasoning_stats does: a turn has reasoning
// when its content contains "<REASONING_SCRATCHPAD>" or its reasoning field
// is not blank (Python whitespace). batch_runner discards rows where
// HasAnyReasoning is false. It does not allocate.
func ReasoningStatsOf(messages []Message) ReasoningStats {
	var rs ReasoningStats
	for i := range messages {
		m := &messages[i]
		if m.Role != "assistant" {
			continue
		}
		rs.TotalAssistantTurns++
		if strings.Contains(m.Content, scratchpadOpen) || pyStrip(m.Reasoning) != "" {
			rs.TurnsWithReasoning++
		}
	}
	rs.TurnsWithoutReason = rs.TotalAssistantTurns - rs.TurnsWithReasoning
	rs.HasAnyReasoning = rs.TurnsWithReasoning > 0
	return rs
}

// pyIsSpace reports whether Python's str.isspace is true for r.
func pyIsSpace(r rune) bool {
	switch {
	case r <= 0x20:
		return r == ' ' || (r >= 0x09 && r <= 0x0d) || (r >= 0x1c && r <= 0x1f)
	case r < 0x85:
		return false
	}
	switch r {
	case 0x85, 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// pyText is text held as a string or as bytes.
type pyText interface{ ~string | ~[]byte }

// pyLStrip is Python's str.lstrip() with no argument. Invalid UTF-8 is not
// whitespace.
func pyLStrip[T pyText](s T) T {
	for len(s) > 0 {
		if c := s[0]; c < utf8.RuneSelf {
			if !pyIsSpace(rune(c)) {
				return s
			}
			s = s[1:]
			continue
		}
		// At most utf8.UTFMax bytes: converting them does not allocate.
		r, size := utf8.DecodeRuneInString(string(s[:min(len(s), utf8.UTFMax)]))
		if !pyIsSpace(r) {
			return s
		}
		s = s[size:]
	}
	return s
}

// pyRStrip is Python's str.rstrip() with no argument.
func pyRStrip[T pyText](s T) T {
	for len(s) > 0 {
		if c := s[len(s)-1]; c < utf8.RuneSelf {
			if !pyIsSpace(rune(c)) {
				return s
			}
			s = s[:len(s)-1]
			continue
		}
		r, size := utf8.DecodeLastRuneInString(string(s[max(0, len(s)-utf8.UTFMax):]))
		if !pyIsSpace(r) {
			return s
		}
		s = s[:len(s)-size]
	}
	return s
}

// pyStrip is Python's str.strip() with no argument.
func pyStrip[T pyText](s T) T { return pyRStrip(pyLStrip(s)) }
