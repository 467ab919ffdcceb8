package export

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"unsafe"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// The JSON names of the members export reads inside a record's usage,
// reasoning_stats and tool_stats, taken from the schemas types' tags so
// that they are declared once.
var (
	usageTotal   = jsonName[schemas.Usage]("TotalTokens")
	hasReasoning = jsonName[schemas.ReasoningStats]("HasAnyReasoning")
	statCount    = jsonName[schemas.ToolStat]("Count")
	statFailure  = jsonName[schemas.ToolStat]("Failure")
)

func jsonName[T any](field string) string {
	f, ok := reflect.TypeFor[T]().FieldByName(field)
	if !ok {
		panic("export: no field " + field)
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// Roles of ShareGPT turns.
const (
	fromSystem = "system"
	fromHuman  = "human"
	fromGPT    = "gpt"
	fromTool   = "tool"
)

// facts are what the selection reads of one record line.
type facts struct {
	key, id, outcome, model string
	pi, sample              int64
	tokens, apiCalls        int64
	cost                    float64
	hasCost                 bool
	reward                  float64
	hasReward               bool // the record's reward is a number (not null: ungraded, or its grader failed)
	turns                   int64
	toolCalls, toolFailures int64
	toolsUsed               int64
	hasReasoning            bool
	conv                    string // raw JSON of conversations
	toolStats               string // raw JSON of tool_stats (pass 2 counts its calls: addToolCalls)
}

// str is a zero-copy string of b, valid while b is.
func str(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// readFacts fills f from line (cleared first). Strings are copies only
// where they outlive the line: key and model are cloned by the callers
// that keep them.
func readFacts(line []byte, f *facts) {
	*f = facts{}
	s := strings.TrimSpace(str(line))
	schemas.EachMember(s, func(name, raw string) {
		switch name {
		case schemas.MemberKey:
			f.key, _ = schemas.JSONString(raw)
		case schemas.MemberID:
			f.id, _ = schemas.JSONString(raw)
		case schemas.MemberPromptIndex:
			f.pi, _ = schemas.JSONInt(raw)
		case schemas.MemberSample:
			f.sample, _ = schemas.JSONInt(raw)
		case schemas.MemberConversations:
			f.conv = raw
		case schemas.MemberOutcome:
			f.outcome, _ = schemas.JSONString(raw)
		case schemas.MemberModel:
			f.model, _ = schemas.JSONString(raw)
		case schemas.MemberAPICalls:
			f.apiCalls, _ = schemas.JSONInt(raw)
		case schemas.MemberUsage:
			if v, _, ok := schemas.FirstMember(raw, usageTotal); ok {
				f.tokens, _ = schemas.JSONInt(v)
			}
		case schemas.MemberCostUSD:
			if raw != "null" {
				c, err := strconv.ParseFloat(raw, 64)
				f.cost, f.hasCost = c, err == nil
			}
		case schemas.MemberReward:
			if schemas.IsJSONNumber(raw) {
				r, err := strconv.ParseFloat(raw, 64)
				f.reward, f.hasReward = r, err == nil
			}
		case schemas.MemberReasoningStats:
			v, _, _ := schemas.FirstMember(raw, hasReasoning)
			f.hasReasoning = v == "true"
		case schemas.MemberToolStats:
			f.toolStats = raw
			f.readToolStats(raw)
		}
	})
	if f.conv != "" {
		schemas.EachElement(f.conv, func(el string) {
			if v, _, ok := schemas.FirstMember(el, schemas.TurnFrom); ok && v == `"`+fromGPT+`"` {
				f.turns++
			}
		})
	}
}

func (f *facts) readToolStats(raw string) {
	if len(raw) == 0 || raw[0] != '{' {
		return
	}
	schemas.EachMember(raw, func(tool, st string) {
		var n, fail int64
		if v, _, ok := schemas.FirstMember(st, statCount); ok {
			n, _ = schemas.JSONInt(v)
		}
		if v, _, ok := schemas.FirstMember(st, statFailure); ok {
			fail, _ = schemas.JSONInt(v)
		}
		f.toolCalls += n
		f.toolFailures += fail
		if n > 0 {
			f.toolsUsed++
		}
	})
}

// addToolCalls adds the calls of each tool of a record's raw tool_stats to
// c.
func addToolCalls(c counts, raw string) {
	if len(raw) == 0 || raw[0] != '{' {
		return
	}
	schemas.EachMember(raw, func(tool, st string) {
		if v, _, ok := schemas.FirstMember(st, statCount); ok {
			if n, _ := schemas.JSONInt(v); n > 0 {
				c.add(tool, n)
			}
		}
	})
}

// turns decodes a record's conversations (raw JSON) into turns. ok is false
// when a turn is not an object of string from and value.
func decodeTurns(conv string, dst []schemas.Turn) ([]schemas.Turn, bool) {
	dst = dst[:0]
	if conv == "" || conv[0] != '[' {
		return dst, false
	}
	ok := true
	schemas.EachElement(conv, func(el string) {
		fr, _, ok1 := schemas.FirstMember(el, schemas.TurnFrom)
		va, _, ok2 := schemas.FirstMember(el, schemas.TurnValue)
		from, ok3 := schemas.JSONString(fr)
		value, ok4 := schemas.JSONString(va)
		if !(ok1 && ok2 && ok3 && ok4) {
			ok = false
		}
		dst = append(dst, schemas.Turn{From: from, Value: value})
	})
	return dst, ok
}

// promptGroup is the prompt a record answers: its id, else its first human
// turn's text, hashed.
func promptGroup(id, conv string) [16]byte {
	if id != "" {
		return hash16("id", id)
	}
	text := ""
	schemas.EachElement(conv, func(el string) {
		if text != "" {
			return
		}
		if fr, _, _ := schemas.FirstMember(el, schemas.TurnFrom); fr == `"`+fromHuman+`"` {
			va, _, _ := schemas.FirstMember(el, schemas.TurnValue)
			text, _ = schemas.JSONString(va)
			if text == "" {
				text = "\x00empty"
			}
		}
	})
	return hash16("prompt", text)
}

// Tags around the JSON blocks of gpt and tool turns.
var blockTags = [][2]string{{"<tool_call>", "</tool_call>"}, {"<tool_response>", "</tool_response>"}}

// conversationHash is the hash of a conversation normalised for exact
// dedupe: each turn's role and text, with the JSON inside <tool_call> and
// <tool_response> blocks re-encoded with sorted keys and no whitespace, so
// two conversations that differ only in key order or JSON spacing there
// hash alike.
func conversationHash(turns []schemas.Turn) [16]byte {
	parts := make([]string, 0, 2*len(turns))
	for _, t := range turns {
		parts = append(parts, t.From, normaliseBlocks(t.Value))
	}
	return hash16(parts...)
}

func normaliseBlocks(v string) string {
	if !strings.Contains(v, "<tool_") {
		return v
	}
	var b strings.Builder
	for {
		open, close, at := "", "", -1
		for _, tag := range blockTags {
			if i := strings.Index(v, tag[0]); i >= 0 && (at < 0 || i < at) {
				open, close, at = tag[0], tag[1], i
			}
		}
		if at < 0 {
			break
		}
		end := strings.Index(v[at+len(open):], close)
		if end < 0 {
			break
		}
		body := v[at+len(open) : at+len(open)+end]
		b.WriteString(v[:at+len(open)])
		b.WriteString(canonicalJSON(body))
		b.WriteString(close)
		v = v[at+len(open)+end+len(close):]
	}
	b.WriteString(v)
	return b.String()
}

// canonicalJSON re-encodes the JSON text s with sorted object keys and no
// whitespace; text that is not JSON is returned trimmed.
func canonicalJSON(s string) string {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil || d.More() {
		return strings.TrimSpace(s)
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return strings.TrimSpace(s)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// offeredTools reads the tool names of Hermes' system turn (the JSON list
// between the <tools> and </tools> lines); ok is false when there is none to read.
func offeredTools(system string) (map[string]bool, bool) {
	// The template names the tags in its prose too: the list is on lines
	// of its own.
	i := strings.Index(system, "\n<tools>\n")
	j := strings.LastIndex(system, "\n</tools>\n")
	if i < 0 || j < i {
		return nil, false
	}
	var list []struct {
		Name string `json:"name"`
	}
	if json.Unmarshal([]byte(system[i+len("\n<tools>\n"):j]), &list) != nil {
		return nil, false
	}
	names := make(map[string]bool, len(list))
	for _, t := range list {
		names[t.Name] = true
	}
	return names, true
}

// callsUnknownTool reports whether a gpt turn calls a tool the system turn
// does not offer. A record without a readable tool list offers none.
func callsUnknownTool(turns []schemas.Turn) bool {
	var offered map[string]bool
	if len(turns) > 0 && turns[0].From == fromSystem {
		offered, _ = offeredTools(turns[0].Value)
	}
	for _, t := range turns {
		if t.From != fromGPT {
			continue
		}
		unknown := false
		schemas.EachBlock(t.Value, "<tool_call>", "</tool_call>", func(_ int, block string) bool {
			var call struct {
				Name string `json:"name"`
			}
			unknown = json.Unmarshal([]byte(block), &call) != nil || !offered[call.Name]
			return !unknown
		})
		if unknown {
			return true
		}
	}
	return false
}
