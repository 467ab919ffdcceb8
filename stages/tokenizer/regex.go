package tokenizer

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Translation of the Rust/Oniguruma regexes found in tokenizer.json files to
// Go's RE2 syntax. Differences handled:
//
//   - \s means Unicode White_Space (Go: ASCII only), \d means \p{Nd};
//   - character classes may contain class intersections (&&) and nested
//     classes: every bracket class is computed as a set of rune ranges and
//     written out explicitly;
//   - Go has no lookaround. The idiom \s+(?!\S) as a top-level alternative is
//     emulated: it is matched as a captured \s+ and, when a non-space follows,
//     gives back its last character (what backtracking would do); when that
//     leaves nothing, the alternatives after it are tried at the same place.
//     Any other lookaround is an error.

// lookRegex is a translated pattern with the lookahead emulation.
type lookRegex struct {
	re    *regexp.Regexp
	group int            // capture group of the \s+(?!\S) alternative, or -1
	rest  *regexp.Regexp // anchored alternatives after it, or nil
}

// find returns the first match at or after i, or -1, -1.
func (l *lookRegex) find(s string, i int) (int, int) {
	for i < len(s) {
		loc := l.re.FindStringSubmatchIndex(s[i:])
		if loc == nil {
			return -1, -1
		}
		a, b := i+loc[0], i+loc[1]
		if l.group < 0 || loc[2*l.group] < 0 || b == len(s) {
			return a, b
		}
		_, w := utf8.DecodeLastRuneInString(s[a:b])
		if b-w > a {
			return a, b - w
		}
		if l.rest != nil {
			if m := l.rest.FindStringIndex(s[a:]); m != nil && m[1] > 0 {
				return a, a + m[1]
			}
		}
		_, w = utf8.DecodeRuneInString(s[a:])
		i = a + w
	}
	return -1, -1
}

// compileLook translates and compiles a tokenizer.json Split regex.
func compileLook(pattern string) (*lookRegex, error) {
	alts, err := topLevelAlternatives(pattern)
	if err != nil {
		return nil, err
	}
	l := &lookRegex{group: -1}
	var out []string
	lookAt := -1
	for k, alt := range alts {
		if alt == `\s+(?!\S)` {
			if lookAt >= 0 {
				return nil, fmt.Errorf("pattern %q: \\s+(?!\\S) appears twice", pattern)
			}
			lookAt = k
			out = append(out, "("+wsGo+"+)")
			continue
		}
		g, err := translateRegex(alt)
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %w", pattern, err)
		}
		out = append(out, "(?:"+g+")")
	}
	full := strings.Join(out, "|")
	if l.re, err = regexp.Compile(full); err != nil {
		return nil, fmt.Errorf("pattern %q: translated to Go: %w", pattern, err)
	}
	if lookAt >= 0 {
		// The only capture groups are ours: translateRegex turns (…) into (?:…).
		l.group = 1
		if lookAt+1 < len(alts) {
			restSrc := "^(?:" + strings.Join(out[lookAt+1:], "|") + ")"
			if l.rest, err = regexp.Compile(restSrc); err != nil {
				return nil, fmt.Errorf("pattern %q: translated to Go: %w", pattern, err)
			}
		}
	}
	return l, nil
}

// topLevelAlternatives splits a pattern at the | that are outside groups
// and classes.
func topLevelAlternatives(p string) ([]string, error) {
	var alts []string
	depth, class, last := 0, 0, 0
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '\\':
			i++
		case class > 0 && c == '[':
			class++
		case class > 0 && c == ']':
			class--
		case class > 0:
		case c == '[':
			class = 1
			if i+1 < len(p) && p[i+1] == '^' {
				i++
			}
			if i+1 < len(p) && p[i+1] == ']' {
				i++ // a leading ] is literal
			}
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == '|' && depth == 0:
			alts = append(alts, p[last:i])
			last = i + 1
		}
	}
	if depth != 0 || class != 0 {
		return nil, fmt.Errorf("pattern %q: unbalanced brackets", p)
	}
	return append(alts, p[last:]), nil
}

// wsRanges is Unicode White_Space.
var wsRanges = runeSet{{0x09, 0x0D}, {0x20, 0x20}, {0x85, 0x85}, {0xA0, 0xA0}, {0x1680, 0x1680},
	{0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}}

var wsGo = wsRanges.goClass(false)

// translateRegex rewrites one alternative (no top-level |) into Go syntax.
func translateRegex(p string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(p); {
		c := p[i]
		switch {
		case c == '\\':
			set, lit, n, err := parseEscape(p, i)
			if err != nil {
				return "", err
			}
			if set != nil {
				b.WriteString(set.goClass(false))
			} else {
				b.WriteString(regexp.QuoteMeta(string(lit)))
			}
			i += n
		case c == '[':
			set, n, err := parseClass(p, i)
			if err != nil {
				return "", err
			}
			b.WriteString(set.goClass(false))
			i += n
		case c == '(':
			rest := p[i:]
			switch {
			case strings.HasPrefix(rest, "(?=") || strings.HasPrefix(rest, "(?!") ||
				strings.HasPrefix(rest, "(?<=") || strings.HasPrefix(rest, "(?<!"):
				return "", fmt.Errorf("lookaround at %q is not supported (only \\s+(?!\\S) as an alternative)", rest)
			case strings.HasPrefix(rest, "(?>"):
				return "", fmt.Errorf("atomic group at %q is not supported", rest)
			case strings.HasPrefix(rest, "(?"):
				b.WriteByte('(')
				i++
			default:
				b.WriteString("(?:")
				i++
			}
		default:
			if (c == '+' || c == '*' || c == '?' || c == '}') && i+1 < len(p) && p[i+1] == '+' {
				return "", fmt.Errorf("possessive quantifier at %q is not supported", p[i:])
			}
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), nil
}

// runeSet is a sorted list of disjoint, non-adjacent inclusive ranges.
type runeSet [][2]rune

func (s runeSet) normalize() runeSet {
	slices.SortFunc(s, func(a, b [2]rune) int { return int(a[0] - b[0]) })
	var out runeSet
	for _, r := range s {
		if n := len(out); n > 0 && r[0] <= out[n-1][1]+1 {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

func (s runeSet) negate() runeSet {
	var out runeSet
	next := rune(0)
	for _, r := range s {
		if r[0] > next {
			out = append(out, [2]rune{next, r[0] - 1})
		}
		next = r[1] + 1
	}
	if next <= unicode.MaxRune {
		out = append(out, [2]rune{next, unicode.MaxRune})
	}
	return out
}

func (s runeSet) intersect(t runeSet) runeSet {
	var out runeSet
	i, j := 0, 0
	for i < len(s) && j < len(t) {
		lo, hi := max(s[i][0], t[j][0]), min(s[i][1], t[j][1])
		if lo <= hi {
			out = append(out, [2]rune{lo, hi})
		}
		if s[i][1] < t[j][1] {
			i++
		} else {
			j++
		}
	}
	return out
}

func (s runeSet) goClass(neg bool) string {
	if len(s) == 0 {
		return `[^\x00-\x{10FFFF}]`
	}
	var b strings.Builder
	b.WriteByte('[')
	if neg {
		b.WriteByte('^')
	}
	for _, r := range s {
		fmt.Fprintf(&b, `\x{%X}`, r[0])
		if r[1] != r[0] {
			fmt.Fprintf(&b, `-\x{%X}`, r[1])
		}
	}
	b.WriteByte(']')
	return b.String()
}

func tableSet(t *unicode.RangeTable) runeSet {
	var s runeSet
	for _, r := range t.R16 {
		if r.Stride == 1 {
			s = append(s, [2]rune{rune(r.Lo), rune(r.Hi)})
			continue
		}
		for c := rune(r.Lo); c <= rune(r.Hi); c += rune(r.Stride) {
			s = append(s, [2]rune{c, c})
		}
	}
	for _, r := range t.R32 {
		if r.Stride == 1 {
			s = append(s, [2]rune{rune(r.Lo), rune(r.Hi)})
			continue
		}
		for c := rune(r.Lo); c <= rune(r.Hi); c += rune(r.Stride) {
			s = append(s, [2]rune{c, c})
		}
	}
	return s.normalize()
}

// propertySet resolves a \p{Name}: general categories, scripts and a few
// long names.
func propertySet(name string) (runeSet, error) {
	long := map[string]string{"Letter": "L", "Number": "N", "Mark": "M", "Punctuation": "P",
		"Symbol": "S", "Separator": "Z", "Other": "C", "Uppercase_Letter": "Lu", "Lowercase_Letter": "Ll",
		"Decimal_Number": "Nd"}
	if n, ok := long[name]; ok {
		name = n
	}
	if name == "White_Space" || name == "Whitespace" {
		return wsRanges, nil
	}
	if t, ok := unicode.Categories[name]; ok {
		return tableSet(t), nil
	}
	if t, ok := unicode.Scripts[name]; ok {
		return tableSet(t), nil
	}
	if t, ok := unicode.Properties[name]; ok {
		return tableSet(t), nil
	}
	return nil, fmt.Errorf("unknown property \\p{%s}", name)
}

// parseEscape reads the escape at p[i] ('\\'). It returns either a set (for
// class escapes) or a literal rune, and the number of bytes read.
func parseEscape(p string, i int) (runeSet, rune, int, error) {
	if i+1 >= len(p) {
		return nil, 0, 0, fmt.Errorf("pattern ends with a backslash")
	}
	c := p[i+1]
	switch c {
	case 's', 'S', 'd', 'D', 'w', 'W':
		return perlClass(c), 0, 2, nil
	case 'p', 'P':
		s, n, err := propertyEscape(p, i)
		if err != nil {
			return nil, 0, 0, err
		}
		return s, 0, n, nil
	case 'n':
		return nil, '\n', 2, nil
	case 'r':
		return nil, '\r', 2, nil
	case 't':
		return nil, '\t', 2, nil
	case 'f':
		return nil, '\f', 2, nil
	case 'v':
		return nil, '\v', 2, nil
	case 'x', 'u':
		r, n, err := hexEscape(p, i)
		if err != nil {
			return nil, 0, 0, err
		}
		return nil, r, n, nil
	}
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
		return nil, 0, 0, fmt.Errorf("escape \\%c is not supported", c)
	}
	r, w := utf8.DecodeRuneInString(p[i+1:])
	return nil, r, 1 + w, nil
}

// perlClass returns the set of the class escape \c: \s, \d, \w (Unicode
// white space, decimal digits, word characters) or their negations \S, \D,
// \W.
func perlClass(c byte) runeSet {
	var s runeSet
	switch c {
	case 's', 'S':
		s = wsRanges
	case 'd', 'D':
		s = tableSet(unicode.Nd)
	case 'w', 'W':
		s = runeSet{{'_', '_'}}
		for _, t := range []*unicode.RangeTable{unicode.L, unicode.M, unicode.Nd, unicode.Pc} {
			s = append(s, tableSet(t)...)
		}
		s = s.normalize()
	}
	if c == 'S' || c == 'D' || c == 'W' {
		s = s.negate()
	}
	return s
}

// propertyEscape reads the property escape at p[i] (\pL, \p{Name},
// \P{Name}, \p{^Name}) and returns its set and length.
func propertyEscape(p string, i int) (runeSet, int, error) {
	var name string
	n := 3
	if i+2 < len(p) && p[i+2] == '{' {
		end := strings.IndexByte(p[i+2:], '}')
		if end < 0 {
			return nil, 0, fmt.Errorf("unterminated \\p{ at %q", p[i:])
		}
		name = p[i+3 : i+2+end]
		n = end + 3
	} else if i+2 < len(p) {
		name = p[i+2 : i+3]
	}
	neg := p[i+1] == 'P'
	if strings.HasPrefix(name, "^") {
		name, neg = name[1:], !neg
	}
	s, err := propertySet(name)
	if err != nil {
		return nil, 0, err
	}
	if neg {
		s = s.negate()
	}
	return s, n, nil
}

// hexEscape reads the code point escape at p[i] (\xHH, \uHHHH, \x{H…},
// \u{H…}) and returns the rune and the escape's length.
func hexEscape(p string, i int) (rune, int, error) {
	c := p[i+1]
	var hex string
	n := 2
	switch {
	case i+2 < len(p) && p[i+2] == '{':
		end := strings.IndexByte(p[i+2:], '}')
		if end < 0 {
			return 0, 0, fmt.Errorf("unterminated \\%c{ at %q", c, p[i:])
		}
		hex, n = p[i+3:i+2+end], end+3
	case c == 'x' && i+4 <= len(p):
		hex, n = p[i+2:i+4], 4
	case c == 'u' && i+6 <= len(p):
		hex, n = p[i+2:i+6], 6
	}
	v, err := strconv.ParseUint(hex, 16, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("bad hex escape at %q", p[i:])
	}
	return rune(v), n, nil
}

// parseClass reads the bracket class at p[i] ('[') with nesting and &&
// intersections, and returns its set and length.
func parseClass(p string, i int) (runeSet, int, error) {
	j := i + 1
	neg := false
	if j < len(p) && p[j] == '^' {
		neg = true
		j++
	}
	var acc runeSet
	var inter runeSet
	haveInter := false
	first := true
	for {
		if j >= len(p) {
			return nil, 0, fmt.Errorf("unterminated class at %q", p[i:])
		}
		c := p[j]
		if c == ']' && !first {
			j++
			break
		}
		first = false
		switch {
		case c == '[':
			s, n, err := parseClass(p, j)
			if err != nil {
				return nil, 0, err
			}
			acc = append(acc, s...)
			j += n
			continue
		case c == '&' && j+1 < len(p) && p[j+1] == '&':
			cur := acc.normalize()
			if haveInter {
				inter = inter.intersect(cur)
			} else {
				inter, haveInter = cur, true
			}
			acc = nil
			j += 2
			continue
		}
		var lo rune
		if c == '\\' {
			s, lit, n, err := parseEscape(p, j)
			if err != nil {
				return nil, 0, err
			}
			j += n
			if s != nil {
				acc = append(acc, s...)
				continue
			}
			lo = lit
		} else {
			r, w := utf8.DecodeRuneInString(p[j:])
			lo = r
			j += w
		}
		hi := lo
		if j+1 < len(p) && p[j] == '-' && p[j+1] != ']' {
			j++
			if p[j] == '\\' {
				_, lit, n, err := parseEscape(p, j)
				if err != nil {
					return nil, 0, err
				}
				hi = lit
				j += n
			} else {
				r, w := utf8.DecodeRuneInString(p[j:])
				hi = r
				j += w
			}
			if hi < lo {
				return nil, 0, fmt.Errorf("bad range in class at %q", p[i:])
			}
		}
		acc = append(acc, [2]rune{lo, hi})
	}
	set := acc.normalize()
	if haveInter {
		set = inter.intersect(set)
	}
	if neg {
		set = set.negate()
	}
	return set, j - i, nil
}
