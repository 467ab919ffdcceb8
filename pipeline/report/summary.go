package report

import (
	"math"
	"strconv"
	"strings"
	"unsafe"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// Summary is what report and view know of one record without its
// conversation text.
type Summary struct {
	Key           string
	ID            string
	PromptIndex   int64
	Sample        int64
	Outcome       string // the mode's own outcome (compress: compression_metrics.outcome)
	RecordOutcome string // the record's "outcome" member
	Turns         int
	Tokens        int64 // usage.total_tokens
	DurationMS    int64
	CostUSD       float64
	Priced        bool // cost_usd is a number
	Toolsets      []string
	Tools         []string // tools called at least once
	ToolFailures  int
	Reasoning     bool // reasoning_stats.has_any_reasoning
	Model         string
	// compress
	CompressOutcome  string
	OriginalTokens   int64
	CompressedTokens int64
	Ratio            float64
}

// Summarize decodes the Summary of one record line in one walk over its
// members (schemas.EachMember); the first member of a name counts, and
// values of another JSON type are read as they always were (see intOf,
// textOf). man is the folder's run.json: the Summary's Outcome is the
// mode's own (Manifest.ModeOutcome, as pipeline.Stats counts it). A line
// that is not a JSON object gives a Summary with only Outcome (the caller
// falls back to the ledger's outcome when it is "").
func Summarize(line []byte, man *outdir.Manifest) Summary {
	var s Summary
	obj := strings.TrimSpace(unsafe.String(unsafe.SliceData(line), len(line)))
	if obj != "" && obj[0] == '{' {
		var seen uint32
		schemas.EachMember(obj, func(name, raw string) {
			if bit, ok := summaryMembers[name]; ok && seen&bit == 0 && s.member(name, raw) {
				seen |= bit
			}
		})
	}
	s.Outcome = string(man.ModeOutcome(line, schemas.Outcome(s.RecordOutcome)))
	return s
}

// summaryMembers are the members Summarize reads, each with its bit.
var summaryMembers = func() map[string]uint32 {
	m := map[string]uint32{}
	for i, name := range []string{schemas.MemberKey, schemas.MemberID, schemas.MemberPromptIndex, schemas.MemberSample,
		schemas.MemberOutcome, schemas.MemberConversations, schemas.MemberUsage, schemas.MemberDurationMS, schemas.MemberCostUSD,
		schemas.MemberToolsetsUsed, schemas.MemberToolStats, schemas.MemberReasoningStats, schemas.MemberModel, compressMetrics} {
		m[name] = 1 << i
	}
	return m
}()

// compressMetrics is the member holding a compressed row's metrics.
const compressMetrics = "compression_metrics"

// member reads the record member name of the raw JSON value raw into s.
// It returns false when a member read by a path below it (usage's
// total_tokens) does not have it: a later member of the same name may.
func (s *Summary) member(name, raw string) bool {
	switch name {
	case schemas.MemberKey:
		s.Key = textOf(raw)
	case schemas.MemberID:
		s.ID = textOf(raw)
	case schemas.MemberPromptIndex:
		s.PromptIndex = intOf(raw)
	case schemas.MemberSample:
		s.Sample = intOf(raw)
	case schemas.MemberOutcome:
		s.RecordOutcome = textOf(raw)
	case schemas.MemberConversations:
		if raw[0] != '[' {
			n := first(raw, "#")
			s.Turns = int(intOf(n))
			return n != ""
		}
		schemas.EachElement(raw, func(string) { s.Turns++ })
	case schemas.MemberUsage:
		n := first(raw, "total_tokens")
		s.Tokens = intOf(n)
		return n != ""
	case schemas.MemberDurationMS:
		s.DurationMS = intOf(raw)
	case schemas.MemberCostUSD:
		if isNumber(raw) {
			s.CostUSD, _ = strconv.ParseFloat(raw, 64)
			s.Priced = true
		}
	case schemas.MemberToolsetsUsed:
		switch {
		case raw == "null":
		case raw[0] == '[':
			schemas.EachElement(raw, func(v string) { s.Toolsets = append(s.Toolsets, textOf(v)) })
		default:
			s.Toolsets = append(s.Toolsets, textOf(raw))
		}
	case schemas.MemberToolStats:
		tool := func(name, v string) {
			if intOf(first(v, "count")) > 0 {
				s.Tools = append(s.Tools, name)
			}
			s.ToolFailures += int(intOf(first(v, "failure")))
		}
		switch raw[0] {
		case '{':
			schemas.EachMember(raw, tool)
		case '[':
			i := 0
			schemas.EachElement(raw, func(v string) { tool(strconv.Itoa(i), v); i++ })
		}
	case schemas.MemberReasoningStats:
		b := first(raw, "has_any_reasoning")
		s.Reasoning = boolOf(b)
		return b != ""
	case schemas.MemberModel:
		s.Model = textOf(raw)
	case compressMetrics:
		if raw[0] != '{' {
			return true
		}
		m := map[string]string{}
		schemas.EachMember(raw, func(k, v string) {
			if _, dup := m[k]; !dup {
				m[k] = v
			}
		})
		s.CompressOutcome = textOf(m["outcome"])
		s.OriginalTokens = intOf(m["original_tokens"])
		s.CompressedTokens = intOf(m["compressed_tokens"])
		s.Ratio = floatOf(m["compression_ratio"])
	}
	return true
}

// first returns the raw value of the first member name of the JSON object
// raw, or "" when raw is no object or has none.
func first(raw, name string) string {
	var v string
	if raw[0] == '{' {
		schemas.EachMember(raw, func(k, r string) {
			if v == "" && k == name {
				v = r
			}
		})
	}
	return v
}

// The conversions below read a value of any JSON type the way report has
// always read record members (gjson's): a string is unescaped, null is ""
// or 0, a number in a string counts as that number, and so on.

// textOf is a member as text: a string's value, "" for null or absent, a
// number without a fraction or exponent as written and another in its
// shortest form, any other value's JSON text.
func textOf(raw string) string {
	switch {
	case raw == "" || raw == "null":
		return ""
	case isNumber(raw):
		if strings.Trim(strings.TrimPrefix(raw, "-"), "0123456789") != "" {
			f, _ := strconv.ParseFloat(raw, 64)
			return strconv.FormatFloat(f, 'f', -1, 64)
		}
	}
	return schemas.JSONText(raw)
}

// intOf is a member as an integer: a number, truncated, or a string holding
// one; true is 1, anything else 0.
func intOf(raw string) int64 {
	switch {
	case raw == "true":
		return 1
	case isNumber(raw):
		f, _ := strconv.ParseFloat(raw, 64)
		if f >= -9007199254740991 && f <= 9007199254740991 {
			return int64(f)
		}
		if n, ok := parseInt(raw); ok {
			return n
		}
		return f2i(f)
	case raw != "" && raw[0] == '"':
		str, _ := schemas.JSONString(raw)
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

// floatOf is a member as a float: a number, or a string holding one; true is
// 1, anything else 0.
func floatOf(raw string) float64 {
	switch {
	case raw == "true":
		return 1
	case isNumber(raw):
		f, _ := strconv.ParseFloat(raw, 64)
		return f
	case raw != "" && raw[0] == '"':
		str, _ := schemas.JSONString(raw)
		f, _ := strconv.ParseFloat(str, 64)
		return f
	}
	return 0
}

// boolOf is a member as a boolean: true, a non-zero number, or a string
// strconv.ParseBool reads as true in lower case.
func boolOf(raw string) bool {
	switch {
	case raw == "true":
		return true
	case isNumber(raw):
		f, _ := strconv.ParseFloat(raw, 64)
		return f != 0
	case raw != "" && raw[0] == '"':
		str, _ := schemas.JSONString(raw)
		b, _ := strconv.ParseBool(strings.ToLower(str))
		return b
	}
	return false
}

func isNumber(raw string) bool {
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

func f2i(f float64) int64 {
	switch {
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f < math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}
