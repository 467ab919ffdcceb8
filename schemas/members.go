package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/hermes-pipe/hermes-pipe/schemas/pyjson"
)

// The one fast reader of record lines: stats, the Parquet shard writer,
// report's Summary and compress walk a line's members with EachMember (or
// decode some of them with DecodeFields) instead of decoding the whole
// record, conversation included.

// EachMember calls fn with the name and raw value of each member of the JSON
// object s, in order; a name given twice is given twice. The raw values
// share s's memory and are never empty. s should be valid JSON: on other
// text the walk gives odd members or stops early, but never reads outside s.
func EachMember(s string, fn func(name, raw string)) {
	i := jsonSpace(s, 1)
	for i < len(s) && s[i] == '"' {
		end := jsonSkip(s, i)
		name, _ := JSONString(s[i:end])
		i = jsonSpace(s, end)
		i = jsonSpace(s, i+1) // ':'
		if i >= len(s) {
			return
		}
		end = jsonSkip(s, i)
		if end == i {
			return
		}
		fn(name, s[i:end])
		i = jsonSpace(s, end)
		if i < len(s) && s[i] == ',' {
			i = jsonSpace(s, i+1)
		}
	}
}

// FirstMember returns the raw value of the first member name of the JSON
// object s and its offset in s; ok is false when s is no object (its first
// byte not '{') or has no such member. Under the terms of EachMember, it
// stops at the member found.
func FirstMember(s, name string) (raw string, at int, ok bool) {
	if s == "" || s[0] != '{' {
		return "", 0, false
	}
	i := jsonSpace(s, 1)
	for i < len(s) && s[i] == '"' {
		end := jsonSkip(s, i)
		key := s[i:end]
		match := len(key) >= 2 && key[1:len(key)-1] == name
		if !match && strings.IndexByte(key, '\\') >= 0 {
			k, _ := JSONString(key)
			match = k == name
		}
		i = jsonSpace(s, end)
		i = jsonSpace(s, i+1) // ':'
		if i >= len(s) {
			return "", 0, false
		}
		end = jsonSkip(s, i)
		if end == i {
			return "", 0, false
		}
		if match {
			return s[i:end], i, true
		}
		i = jsonSpace(s, end)
		if i < len(s) && s[i] == ',' {
			i = jsonSpace(s, i+1)
		}
	}
	return "", 0, false
}

// EachElement calls fn with each raw element of the JSON array s, under the
// same terms as EachMember.
func EachElement(s string, fn func(raw string)) {
	i := jsonSpace(s, 1)
	for i < len(s) && s[i] != ']' {
		end := jsonSkip(s, i)
		if end == i {
			return
		}
		fn(s[i:end])
		i = jsonSpace(s, end)
		if i < len(s) && s[i] == ',' {
			i = jsonSpace(s, i+1)
		}
	}
}

// MemberAt returns the raw JSON of the member of the JSON object line at the
// dotted path ("compression_metrics.outcome"; the last of a name given twice),
// or "" when line is not a JSON object or has no such member.
func MemberAt(line []byte, path string) string {
	s := strings.TrimSpace(unsafe.String(unsafe.SliceData(line), len(line)))
	for {
		if s == "" || s[0] != '{' || !json.Valid(unsafe.Slice(unsafe.StringData(s), len(s))) {
			return ""
		}
		name, rest, nested := strings.Cut(path, ".")
		var raw string
		EachMember(s, func(n, r string) {
			if n == name {
				raw = r
			}
		})
		if !nested {
			return strings.Clone(raw)
		}
		s, path = strings.TrimSpace(raw), rest
	}
}

// StringAt returns the string at the dotted member path of the JSON object
// line (see MemberAt), or "" when the line has no such string member.
func StringAt(line []byte, path string) string {
	v, _ := JSONString(MemberAt(line, path))
	return v
}

func jsonSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// jsonSkip returns the end of the JSON value starting at s[i].
func jsonSkip(s string, i int) int {
	if i >= len(s) {
		return len(s)
	}
	switch s[i] {
	case '"':
		return jsonStringEnd(s, i)
	case '{', '[':
		depth := 0
		for i < len(s) {
			switch s[i] {
			case '"':
				i = jsonStringEnd(s, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(s)
	}
	for i < len(s) {
		switch s[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// jsonStringEnd returns the index after the closing quote of the string
// starting at s[i]: the first quote not escaped by an odd run of
// backslashes.
func jsonStringEnd(s string, i int) int {
	i++
	for {
		j := strings.IndexByte(s[i:], '"')
		if j < 0 {
			return len(s)
		}
		i += j
		k := i
		for k > 0 && s[k-1] == '\\' {
			k--
		}
		i++
		if (i-1-k)%2 == 0 {
			return i
		}
	}
}

// JSONString decodes the JSON string raw as encoding/json does (an invalid
// or unpaired surrogate escape becomes U+FFFD); ok is false when raw is not
// a JSON string. Without escapes it returns a substring of raw.
func JSONString(raw string) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	s := raw[1 : len(raw)-1]
	if strings.IndexByte(s, '\\') < 0 {
		return s, true
	}
	b, ok := appendUnescaped(make([]byte, 0, len(s)), s)
	if !ok {
		return "", false
	}
	return unsafe.String(unsafe.SliceData(b), len(b)), true
}

// AppendJSONString appends the value of the JSON string raw, decoded as
// JSONString decodes it, to dst; ok is false (and dst unchanged) when raw is
// not a JSON string. Callers that decode many strings reuse dst instead of
// allocating one per string.
func AppendJSONString(dst []byte, raw string) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return dst, false
	}
	b, ok := appendUnescaped(dst, raw[1:len(raw)-1])
	if !ok {
		return dst, false
	}
	return b, true
}

// appendUnescaped appends s, the inside of a JSON string, with its escapes
// decoded, to b; ok is false for a malformed escape.
func appendUnescaped(b []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			j := strings.IndexByte(s[i:], '\\')
			if j < 0 {
				j = len(s) - i
			}
			b = append(b, s[i:i+j]...)
			i += j
			continue
		}
		if i+1 >= len(s) {
			return b, false
		}
		switch s[i+1] {
		case '"', '\\', '/':
			b = append(b, s[i+1])
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r := hex4(s, i+2)
			if r < 0 {
				return b, false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				if r2 := hex4u(s, i); r2 >= 0 {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						i += 6
						b = utf8.AppendRune(b, d)
						continue
					}
				}
				r = utf8.RuneError
			}
			b = utf8.AppendRune(b, r)
			continue
		default:
			return b, false
		}
		i += 2
	}
	return b, true
}

// hex4u returns the rune of a \uXXXX escape at s[i], or -1.
func hex4u(s string, i int) rune {
	if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
		return hex4(s, i+2)
	}
	return -1
}

// hex4 parses four hex digits at s[i], or returns -1.
func hex4(s string, i int) rune {
	if i+4 > len(s) {
		return -1
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// JSONInt returns the JSON number raw as an int64 when it is integral and in
// range (1e3 and 2.0 count), else false.
func JSONInt(raw string) (int64, bool) {
	if v, err := strconv.ParseInt(raw, 10, 64); err == nil {
		return v, true
	}
	if raw == "" || !(raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		return 0, false
	}
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

// JSONText returns a JSON string's value, or the JSON text of any other
// value.
func JSONText(raw string) string {
	if s, ok := JSONString(raw); ok {
		return s
	}
	return raw
}

// SetMember sets the top-level member key of the JSON object raw to the JSON
// value val, in place when it exists, else appended as the last member. All
// other bytes are kept; spaced writes an appended member with Python's
// separators (", " and ": "). Writers that edit a record line without
// decoding it (compress, the grades overlay of cat) share it.
func SetMember(raw []byte, key string, val []byte, spaced bool) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if cur, at, ok := FirstMember(unsafe.String(unsafe.SliceData(raw), len(raw)), key); ok {
		out := make([]byte, 0, len(raw)-len(cur)+len(val))
		out = append(out, raw[:at]...)
		out = append(out, val...)
		return append(out, raw[at+len(cur):]...), nil
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
