package export

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// fieldKind is the type of a --where field.
type fieldKind int

const (
	kindString fieldKind = iota
	kindNumber
	kindBool
)

// whereField is one field --where can test.
type whereField struct {
	name string
	kind fieldKind
	// num returns the field's number (ok false: null, never matches);
	// str its text; b its truth.
	num func(f *facts) (float64, bool)
	str func(f *facts) string
	b   func(f *facts) bool
}

func numField(name string, get func(f *facts) int64) whereField {
	return whereField{name: name, kind: kindNumber, num: func(f *facts) (float64, bool) { return float64(get(f)), true }}
}

// whereFields are the fields --where knows, in the order the usage error
// lists them.
var whereFields = []whereField{
	{name: schemas.MemberOutcome, kind: kindString, str: func(f *facts) string { return f.outcome }},
	{name: schemas.MemberModel, kind: kindString, str: func(f *facts) string { return f.model }},
	numField("tokens", func(f *facts) int64 { return f.tokens }),
	numField("turns", func(f *facts) int64 { return f.turns }),
	numField("tool_calls", func(f *facts) int64 { return f.toolCalls }),
	numField("tool_failures", func(f *facts) int64 { return f.toolFailures }),
	numField("tools_used", func(f *facts) int64 { return f.toolsUsed }),
	{name: "cost", kind: kindNumber, num: func(f *facts) (float64, bool) { return f.cost, f.hasCost }},
	{name: "reward", kind: kindNumber, num: func(f *facts) (float64, bool) { return f.reward, f.hasReward }},
	numField(schemas.MemberAPICalls, func(f *facts) int64 { return f.apiCalls }),
	numField(schemas.MemberSample, func(f *facts) int64 { return f.sample }),
	numField(schemas.MemberPromptIndex, func(f *facts) int64 { return f.pi }),
	{name: "has_reasoning", kind: kindBool, b: func(f *facts) bool { return f.hasReasoning }},
}

// WhereFields returns the names of the fields --where knows.
func WhereFields() []string {
	names := make([]string, len(whereFields))
	for i, f := range whereFields {
		names[i] = f.name
	}
	return names
}

// operators, longest first so that "<=" is not read as "<".
var operators = []string{"!=", "<=", ">=", "=", "<", ">"}

// cond is one parsed --where.
type cond struct {
	text  string
	field *whereField
	op    string
	num   float64
	str   string
	b     bool
}

// parseWhere parses "FIELD OP VALUE" (spaces around OP allowed).
func parseWhere(expr string) (cond, error) {
	c := cond{text: expr}
	at, op := -1, ""
	for _, o := range operators {
		if i := strings.Index(expr, o); i >= 0 && (at < 0 || i < at || (i == at && len(o) > len(op))) {
			at, op = i, o
		}
	}
	fields := strings.Join(WhereFields(), ", ")
	if at < 0 {
		return c, usagef("--where %q: no operator; write FIELD OP VALUE with OP one of = != < <= > >= and FIELD one of %s", expr, fields)
	}
	name, value := strings.TrimSpace(expr[:at]), strings.TrimSpace(expr[at+len(op):])
	for i := range whereFields {
		if whereFields[i].name == name {
			c.field = &whereFields[i]
		}
	}
	if c.field == nil {
		return c, usagef("--where %q: unknown field %q; the fields are %s", expr, name, fields)
	}
	c.op = op
	switch c.field.kind {
	case kindString:
		if op != "=" && op != "!=" {
			return c, usagef("--where %q: %s is text: use = or !=", expr, name)
		}
		c.str = value
	case kindBool:
		if op != "=" && op != "!=" {
			return c, usagef("--where %q: %s is true or false: use = or !=", expr, name)
		}
		b, err := strconv.ParseBool(value)
		if err != nil {
			return c, usagef("--where %q: %s must be compared with true or false, got %q", expr, name, value)
		}
		c.b = b
	case kindNumber:
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return c, usagef("--where %q: %s is a number, got %q", expr, name, value)
		}
		c.num = n
	}
	return c, nil
}

// match reports whether f satisfies c; a null number matches nothing.
func (c *cond) match(f *facts) bool {
	switch c.field.kind {
	case kindString:
		return (c.field.str(f) == c.str) == (c.op == "=")
	case kindBool:
		return (c.field.b(f) == c.b) == (c.op == "=")
	}
	v, ok := c.field.num(f)
	if !ok {
		return false
	}
	switch c.op {
	case "=":
		return v == c.num
	case "!=":
		return v != c.num
	case "<":
		return v < c.num
	case "<=":
		return v <= c.num
	case ">":
		return v > c.num
	}
	return v >= c.num
}

// split is one --split bucket.
type split struct {
	name string
	frac float64
	upTo float64 // cumulative fraction: a prompt whose draw is below it (and not an earlier bucket's) lands here
}

// parseSplit parses "train=0.95,validation=0.05"; "" is train=1. The
// fractions must be positive and sum to 1.
func parseSplit(s string) ([]split, error) {
	if strings.TrimSpace(s) == "" {
		return []split{{name: "train", frac: 1, upTo: 1}}, nil
	}
	var out []split
	sum := 0.0
	for _, part := range strings.Split(s, ",") {
		name, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		name = strings.TrimSpace(name)
		if !ok || err != nil || f <= 0 || name == "" {
			return nil, usagef("--split %q: each part is NAME=FRACTION with a fraction above 0, as train=0.95,validation=0.05", s)
		}
		if !validSplitName(name) {
			return nil, usagef("--split %q: a split name is letters, digits and _ (it names files), got %q", s, name)
		}
		for _, o := range out {
			if o.name == name {
				return nil, usagef("--split %q: split %q given twice", s, name)
			}
		}
		sum += f
		out = append(out, split{name: name, frac: f, upTo: sum})
	}
	if sum < 0.999999 || sum > 1.000001 {
		return nil, usagef("--split %q: the fractions add up to %s, not 1", s, strconv.FormatFloat(sum, 'g', -1, 64))
	}
	out[len(out)-1].upTo = 1
	return out, nil
}

func validSplitName(n string) bool {
	for _, r := range n {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func (p *plan) splitText() string {
	parts := make([]string, len(p.splits))
	for i, s := range p.splits {
		parts[i] = fmt.Sprintf("%s=%s", s.name, strconv.FormatFloat(s.frac, 'g', -1, 64))
	}
	return strings.Join(parts, ",")
}
