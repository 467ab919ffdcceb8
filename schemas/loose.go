package schemas

import (
	"math"
	"strconv"
	"strings"
)

// The Loose conversions read a member value of any JSON type the way report
// and compress have always read record members (as gjson does): a string
// is unescaped, null is "" or 0, a number in a string counts as that
// number, and so on. An absent member ("") reads as null.

// LooseText is a member as text: a string's value, "" for null or absent, a
// number without a fraction or exponent as written and another in its
// shortest form, any other value's JSON text.
func LooseText(raw string) string {
	switch {
	case raw == "" || raw == "null":
		return ""
	case IsJSONNumber(raw):
		if strings.Trim(strings.TrimPrefix(raw, "-"), "0123456789") != "" {
			f, _ := strconv.ParseFloat(raw, 64)
			return strconv.FormatFloat(f, 'f', -1, 64)
		}
	}
	return JSONText(raw)
}

// LooseInt is a member as an integer: a number, truncated, or a string holding
// one; true is 1, anything else 0.
func LooseInt(raw string) int64 {
	switch {
	case raw == "true":
		return 1
	case IsJSONNumber(raw):
		f, _ := strconv.ParseFloat(raw, 64)
		if f >= -9007199254740991 && f <= 9007199254740991 {
			return int64(f)
		}
		if n, ok := parseInt(raw); ok {
			return n
		}
		return f2i(f)
	case raw != "" && raw[0] == '"':
		str, _ := JSONString(raw)
		n, ok := parseInt(str)
		if !ok {
			if f, err := strconv.ParseFloat(str, 64); err == nil {
				n = f2i(f)
			}
		}
		return n
	}
	return 0
}

// LooseBool is a member as a boolean: true, a non-zero number, or a string
// strconv.ParseBool reads as true in lower case.
func LooseBool(raw string) bool {
	switch {
	case raw == "true":
		return true
	case IsJSONNumber(raw):
		f, _ := strconv.ParseFloat(raw, 64)
		return f != 0
	case raw != "" && raw[0] == '"':
		str, _ := JSONString(raw)
		b, _ := strconv.ParseBool(strings.ToLower(str))
		return b
	}
	return false
}

// IsJSONNumber reports whether the JSON value raw is a number.
func IsJSONNumber(raw string) bool {
	return raw != "" && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9')
}

// parseInt reads an optional minus and digits; a value past the uint64
// range is the int64 bound of its sign.
func parseInt(s string) (int64, bool) {
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	if s == "" {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		next := n*10 + uint64(s[i]-'0')
		if next < n {
			if strings.Trim(s[i:], "0123456789") != "" {
				return 0, false
			}
			n = math.MaxUint64
			break
		}
		n = next
	}
	switch {
	case neg && n > 1<<63:
		return math.MinInt64, true
	case neg:
		return -int64(n), true
	case n > math.MaxInt64:
		return math.MaxInt64, true
	}
	return int64(n), true
}

// f2i is f as an int64, saturating at its bounds.
func f2i(f float64) int64 {
	switch {
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f < math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}
