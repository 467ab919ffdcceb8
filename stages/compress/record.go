package compress

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/schemas/pyjson"
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

// parseRow reads the conversations of one JSON object line (the first
// member of the name). Each turn must be an object with string "from" and
// "value"; other members of a turn are kept. The turns' raw text and
// unescaped values point into raw (no copy of the row): raw must not change
// while the result is used.
func parseRow(raw []byte) (parsed, error) {
	var p parsed
	conv, err := eachTurn(raw, func(t, from, value string) {
		f, _ := schemas.JSONString(from)
		v, _ := schemas.JSONString(value)
		p.turns = append(p.turns, turn{from: f, value: v, raw: t})
	})
	if err != nil {
		return p, err
	}
	p.spaced, p.sep = arrayStyle(conv, p.turns)
	return p, nil
}

// checkRow refuses what parseRow refuses, without building the turns: no
// value is unescaped and nothing of the row is copied, so the source can
// check a long row at no cost in memory.
func checkRow(raw []byte) error {
	_, err := eachTurn(raw, func(_, _, _ string) {})
	return err
}

// eachTurn calls fn with the raw text of each turn of the conversations of
// the JSON object line raw and of its first "from" and "value" members, and
// returns the conversations array's text; it stops at the first turn that
// is not an object with string "from" and "value".
func eachTurn(raw []byte, fn func(turn, from, value string)) (string, error) {
	conv, _, ok := schemas.FirstMember(view(raw), schemas.MemberConversations)
	if !ok || conv[0] != '[' {
		return "", errors.New("no conversations array")
	}
	var bad error
	i := 0
	schemas.EachElement(conv, func(v string) {
		switch {
		case bad != nil:
			return
		case v[0] != '{':
			bad = fmt.Errorf("conversations[%d] is not an object", i)
			return
		}
		from, _, _ := schemas.FirstMember(v, schemas.TurnFrom)
		value, _, _ := schemas.FirstMember(v, schemas.TurnValue)
		if from == "" || from[0] != '"' || value == "" || value[0] != '"' {
			bad = fmt.Errorf("conversations[%d] needs string \"from\" and \"value\"", i)
			return
		}
		fn(v, from, value)
		i++
	})
	return conv, bad
}

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
			orig := p.turns[t.orig].raw
			if v, at, ok := schemas.FirstMember(orig, schemas.TurnValue); ok {
				b = append(b, orig[:at]...)
				b = pyjson.AppendString(b, t.value)
				b = append(b, orig[at+len(v):]...)
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

// view is raw as a string without a copy. The caller keeps raw
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
