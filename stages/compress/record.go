package compress

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/hermes-pipe/hermes-pipe/schemas/pyjson"
	"github.com/tidwall/gjson"
)

// parsed is the part of an input line compress reads.
type parsed struct {
	turns []turn
	// spaced says the line was written with Python's separators (", " and
	// ": "), so new text follows that style.
	spaced bool
	// sep is the text between two elements of the conversations array.
	sep string
}

// parseRow reads the conversations of one JSON object line. Each turn must be
// an object with string "from" and "value"; other members of a turn are kept.
// The turns' raw text and unescaped values point into raw (no copy of the
// row): raw must not change while the result is used.
func parseRow(raw []byte) (parsed, error) {
	var p parsed
	conv := gjson.Get(view(raw), "conversations")
	if !conv.IsArray() {
		return p, errors.New("no conversations array")
	}
	var bad error
	i := 0
	conv.ForEach(func(_, v gjson.Result) bool {
		if !v.IsObject() {
			bad = fmt.Errorf("conversations[%d] is not an object", i)
			return false
		}
		from, value := v.Get("from"), v.Get("value")
		if from.Type != gjson.String || value.Type != gjson.String {
			bad = fmt.Errorf("conversations[%d] needs string \"from\" and \"value\"", i)
			return false
		}
		p.turns = append(p.turns, turn{from: from.String(), value: value.String(), raw: v.Raw})
		i++
		return true
	})
	if bad != nil {
		return p, bad
	}
	p.spaced, p.sep = arrayStyle(conv.Raw, p.turns)
	return p, nil
}

// checkRow refuses what parseRow refuses, without building the turns: no
// value is unescaped and nothing of the row is copied, so the source can
// check a long row at no cost in memory.
func checkRow(raw []byte) error {
	conv := gjson.Get(view(raw), "conversations")
	if !conv.IsArray() {
		return errors.New("no conversations array")
	}
	var bad error
	i := 0
	conv.ForEach(func(_, v gjson.Result) bool {
		if !v.IsObject() {
			bad = fmt.Errorf("conversations[%d] is not an object", i)
			return false
		}
		if !memberIsString(v.Raw, "from") || !memberIsString(v.Raw, "value") {
			bad = fmt.Errorf("conversations[%d] needs string \"from\" and \"value\"", i)
			return false
		}
		i++
		return true
	})
	return bad
}

// memberIsString reports whether the first member named key of the JSON
// object obj (valid JSON, as gjson reads it) holds a string. It scans the
// bytes once and unescapes only a key that has escapes.
func memberIsString(obj, key string) bool {
	depth := 0
	for i := 0; i < len(obj); i++ {
		switch obj[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case '"':
			end := i + 1
			for end < len(obj) && obj[end] != '"' {
				if obj[end] == '\\' {
					end++
				}
				end++
			}
			next := end + 1
			for next < len(obj) && isSpace(obj[next]) {
				next++
			}
			if depth == 1 && next < len(obj) && obj[next] == ':' {
				k := obj[i+1 : end]
				if strings.IndexByte(k, '\\') >= 0 {
					k = gjson.Parse(obj[i : end+1]).Str
				}
				if k == key {
					next++
					for next < len(obj) && isSpace(obj[next]) {
						next++
					}
					return next < len(obj) && obj[next] == '"'
				}
			}
			i = end
		}
	}
	return false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// arrayStyle finds the separator between the first two elements of the
// conversations array and whether members are written "key": value.
func arrayStyle(arr string, turns []turn) (spaced bool, sep string) {
	sep = ","
	if len(turns) > 0 {
		r := turns[0].raw
		if i := strings.Index(r, `"from"`); i >= 0 {
			rest := r[i+len(`"from"`):]
			spaced = strings.HasPrefix(rest, ": ")
		}
	}
	if len(turns) > 1 {
		first := strings.Index(arr, turns[0].raw)
		if first >= 0 {
			after := arr[first+len(turns[0].raw):]
			if j := strings.Index(after, turns[1].raw); j >= 0 {
				sep = after[:j]
			}
		}
	} else if spaced {
		sep = ", "
	}
	return spaced, sep
}

// encodeTurns writes the conversations array: untouched turns verbatim, new
// or edited turns encoded in the line's style.
func encodeTurns(p parsed, turns []turn) []byte {
	var b []byte
	b = append(b, '[')
	for i, t := range turns {
		if i > 0 {
			b = append(b, p.sep...)
		}
		switch {
		case t.raw != "" && t.orig >= 0 && t.value == p.turns[t.orig].value:
			b = append(b, t.raw...)
		case t.orig >= 0:
			// An edited input turn (the system notice): replace its value,
			// keep every other member where it was.
			orig := []byte(p.turns[t.orig].raw)
			v := gjson.GetBytes(orig, "value")
			if v.Index > 0 {
				nb := append([]byte(nil), orig[:v.Index]...)
				nb = pyjson.AppendString(nb, t.value)
				nb = append(nb, orig[v.Index+len(v.Raw):]...)
				b = append(b, nb...)
				break
			}
			fallthrough
		default:
			b = appendTurn(b, t.from, t.value, p.spaced)
		}
	}
	return append(b, ']')
}

func appendTurn(b []byte, from, value string, spaced bool) []byte {
	colon, comma := ":", ","
	if spaced {
		colon, comma = ": ", ", "
	}
	b = append(b, `{"from"`...)
	b = append(b, colon...)
	b = pyjson.AppendString(b, from)
	b = append(b, comma...)
	b = append(b, `"value"`...)
	b = append(b, colon...)
	b = pyjson.AppendString(b, value)
	return append(b, '}')
}

// setMember sets the top-level member key of the JSON object raw to the JSON
// value val, in place when it exists, else appended as the last member. All
// other bytes are kept.
func setMember(raw []byte, key string, val []byte, spaced bool) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	cur := gjson.Get(view(raw), gjson.Escape(key)) // only its position is used
	if cur.Exists() && cur.Index > 0 {
		out := make([]byte, 0, len(raw)-len(cur.Raw)+len(val))
		out = append(out, raw[:cur.Index]...)
		out = append(out, val...)
		return append(out, raw[cur.Index+len(cur.Raw):]...), nil
	}
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return nil, errors.New("set member: not a JSON object")
	}
	body := bytes.TrimSpace(raw[1 : len(raw)-1])
	out := make([]byte, 0, len(raw)+len(key)+len(val)+8)
	out = append(out, raw[:len(raw)-1]...)
	out = bytes.TrimRight(out, " \t\r\n")
	if len(body) > 0 {
		out = append(out, ',')
		if spaced {
			out = append(out, ' ')
		}
	}
	out = pyjson.AppendString(out, key)
	out = append(out, ':')
	if spaced {
		out = append(out, ' ')
	}
	out = append(out, val...)
	return append(out, '}'), nil
}

// view is raw as a string without a copy (gjson.GetBytes copies every
// result, a whole conversations array included). The caller keeps raw
// unchanged while the string or anything cut from it is in use.
func view(raw []byte) string { return unsafe.String(unsafe.SliceData(raw), len(raw)) }

// spaceJSON rewrites compact JSON with Python's separators ", " and ": ".
func spaceJSON(compact []byte) []byte {
	out := make([]byte, 0, len(compact)+len(compact)/8)
	inStr, esc := false, false
	for _, c := range compact {
		out = append(out, c)
		switch {
		case inStr && esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case !inStr && (c == ',' || c == ':'):
			out = append(out, ' ')
		}
	}
	return out
}
