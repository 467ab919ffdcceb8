package pyjson

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// This file reproduces, byte for byte, what Python's
// json.dumps(json.loads(text), ensure_ascii=False) writes, because Hermes
// embeds tool-call arguments, tool results and tool schemas in its ShareGPT
// turns that way and trainers expect exactly those bytes.
//
// Parsing follows Python's json.loads defaults:
//   - whitespace is only space, tab, LF and CR; a leading BOM is an error;
//   - NaN, Infinity and -Infinity are accepted;
//   - raw control characters (U+0000..U+001F) inside strings are errors;
//   - integers keep every digit (Python ints are unbounded), except that an
//     integer of more than 4300 digits is an error, as Python 3.11+ raises
//     ValueError for it; "-0" becomes "0";
//   - numbers with a fraction or exponent become float64 (correctly rounded,
//     as Python does; overflow becomes ±Infinity);
//   - a key repeated in one object keeps the position of its first
//     occurrence and the value of its last one (Python's dict(pairs));
//   - nesting deeper than MaxDepth is an error (Python raises
//     RecursionError near 1000 levels, depending on its stack).
//
// Two things Python cannot express are decided here:
//   - invalid UTF-8 in the input is replaced by U+FFFD, one per maximal
//     invalid subsequence, which is what bytes.decode("utf-8", "replace")
//     does; the output is therefore always valid UTF-8;
//   - a \uXXXX escape of a lone surrogate becomes U+FFFD (Python would keep
//     the surrogate and then fail to write it as UTF-8; Hermes' own message
//     sanitiser makes the same replacement).
//
// Encoding follows json.dumps(ensure_ascii=False): separators ", " and ": ",
// non-ASCII written as is (including U+2028/U+2029), '<', '>' and '&' not
// escaped, control characters as \n \r \t \b \f or \u00XX (lowercase hex),
// floats in repr form (1.0, 1e+16, 1e-05), NaN/Infinity/-Infinity bare.

// MaxDepth bounds container nesting while parsing.
const MaxDepth = 1000

// MaxIntDigits is Python's default int_max_str_digits.
const MaxIntDigits = 4300

// Kind is the Python type a parsed JSON value becomes.
type Kind uint8

// Kinds of Value, named after the Python type json.loads produces.
const (
	None  Kind = iota // null
	Bool              // true / false
	Int               // integer literal of any size
	Float             // number with a fraction or exponent, NaN, ±Infinity
	Str               // string
	List              // array
	Dict              // object, keys in first-occurrence order
)

// Value is one JSON value as Python's json.loads would hold it, with object
// key order preserved. The zero value is null. Values are immutable once
// built; copying a Value is cheap and shares its children.
type Value struct {
	kind Kind
	b    bool
	s    string // Str: the text; Int: canonical decimal digits
	f    float64
	list []Value
	dict []Member
}

// Member is one key/value pair of a JSON object.
type Member struct {
	Key   string
	Value Value
}

// Null returns the JSON null value.
func Null() Value { return Value{} }

// BoolOf returns a JSON boolean.
func BoolOf(b bool) Value { return Value{kind: Bool, b: b} }

// StrOf returns a JSON string. Invalid UTF-8 in s is replaced by U+FFFD
// when the value is encoded.
func StrOf(s string) Value { return Value{kind: Str, s: s} }

// IntOf returns a JSON integer.
func IntOf(i int64) Value { return Value{kind: Int, s: strconv.FormatInt(i, 10)} }

// FloatOf returns a JSON float, written in Python's repr form.
func FloatOf(f float64) Value { return Value{kind: Float, f: f} }

// ListOf returns a JSON array holding items (not copied).
func ListOf(items ...Value) Value { return Value{kind: List, list: items} }

// DictOf returns a JSON object with members in the given order (not copied;
// callers must not repeat a key).
func DictOf(members ...Member) Value { return Value{kind: Dict, dict: members} }

// Kind reports the Python type of v.
func (v Value) Kind() Kind { return v.kind }

// IsNone reports whether v is JSON null.
func (v Value) IsNone() bool { return v.kind == None }

// Bool returns the boolean of a Bool value and false otherwise.
func (v Value) Bool() bool { return v.kind == Bool && v.b }

// Str returns the text of a Str value, the digits of a Int value, and ""
// otherwise.
func (v Value) Str() string {
	if v.kind == Str || v.kind == Int {
		return v.s
	}
	return ""
}

// Float returns the number of a Float or Int value (ints may lose
// precision) and 0 otherwise.
func (v Value) Float() float64 {
	switch v.kind {
	case Float:
		return v.f
	case Int:
		f, _ := strconv.ParseFloat(v.s, 64)
		return f
	}
	return 0
}

// List returns the items of a List value (shared, not copied).
func (v Value) List() []Value { return v.list }

// Members returns the members of a Dict value in order (shared, not copied).
func (v Value) Members() []Member { return v.dict }

// Get returns the value under key in a Dict value. It costs a linear scan.
func (v Value) Get(key string) (Value, bool) {
	for i := range v.dict {
		if v.dict[i].Key == key {
			return v.dict[i].Value, true
		}
	}
	return Value{}, false
}

// SyntaxError is returned by Loads for text Python's json.loads rejects
// (or, for the documented limits, would raise on).
type SyntaxError struct {
	Offset int // byte offset in the input
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid json at byte %d: %s", e.Offset, e.Msg)
}

// errPyDuplicate is an internal signal of the streaming transcoder.
var errPyDuplicate = errors.New("duplicate key")

// Loads parses JSON text the way Python's json.loads does (see the file
// comment for the exact rules). It allocates the value tree; strings without
// escapes share memory with one copy of data.
func Loads(data []byte) (Value, error) {
	return LoadsString(string(data))
}

// LoadsString is Loads for a string; unescaped strings in the result share
// memory with s.
func LoadsString(s string) (Value, error) {
	p := pyParser{s: s}
	p.skipWS()
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	p.skipWS()
	if p.i != len(p.s) {
		return Value{}, p.fail("extra data")
	}
	return v, nil
}

// Dumps encodes v as Python's json.dumps(v, ensure_ascii=False) would.
func Dumps(v Value) string { return string(Append(nil, v)) }

// Append appends the json.dumps(ensure_ascii=False) form of v to dst.
// It allocates only when dst must grow.
func Append(dst []byte, v Value) []byte {
	switch v.kind {
	case None:
		return append(dst, "null"...)
	case Bool:
		if v.b {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case Int:
		return append(dst, v.s...)
	case Float:
		return AppendFloat(dst, v.f)
	case Str:
		return AppendString(dst, v.s)
	case List:
		dst = append(dst, '[')
		for i := range v.list {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = Append(dst, v.list[i])
		}
		return append(dst, ']')
	default:
		dst = append(dst, '{')
		for i := range v.dict {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = AppendString(dst, v.dict[i].Key)
			dst = append(dst, ": "...)
			dst = Append(dst, v.dict[i].Value)
		}
		return append(dst, '}')
	}
}

// AppendJSON appends json.dumps(json.loads(src), ensure_ascii=False) to
// dst. On a parse error dst is returned unchanged with the error. It streams
// without building a tree (no allocations beyond growing dst) unless an
// object repeats a key, where it falls back to Loads.
func AppendJSON(dst []byte, src string) ([]byte, error) {
	t := getTranscoder(src, dst)
	defer putTranscoder(t)
	start := len(dst)
	t.skipWS()
	err := t.value(0)
	if err == nil {
		t.skipWS()
		if t.i != len(t.s) {
			err = t.fail("extra data")
		}
	}
	if err == errPyDuplicate {
		v, err := LoadsString(src)
		if err != nil {
			return dst[:start], err
		}
		return Append(t.out[:start], v), nil
	}
	if err != nil {
		return t.out[:start], err
	}
	return t.out, nil
}

// pyEscape maps an ASCII byte to the escape json.dumps writes for it: 0 for
// none, a letter for a two-character escape, 'u' for \u00XX.
var pyEscape = func() (t [128]byte) {
	for c := 0; c < 0x20; c++ {
		t[c] = 'u'
	}
	t['\b'], t['\f'], t['\n'], t['\r'], t['\t'] = 'b', 'f', 'n', 'r', 't'
	t['"'], t['\\'] = '"', '\\'
	return t
}()

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string the way json.dumps(s,
// ensure_ascii=False) writes it. Invalid UTF-8 becomes U+FFFD (one per
// maximal invalid subsequence). It allocates only when dst must grow.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			e := pyEscape[c]
			if e == 0 {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			if e == 'u' {
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			} else {
				dst = append(dst, '\\', e)
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\uFFFD"...)
			i += invalidUTF8Len(s[i:])
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendValidUTF8 appends s with invalid UTF-8 replaced as AppendString does
// (without quoting or escaping).
func AppendValidUTF8(dst []byte, s string) []byte {
	if utf8.ValidString(s) {
		return append(dst, s...)
	}
	start := 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\uFFFD"...)
			i += invalidUTF8Len(s[i:])
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...)
}

// invalidUTF8Len returns the length of the maximal invalid subsequence at the
// start of s (which must start with invalid UTF-8): a lead byte followed by
// the continuation bytes that could still have completed it. Python's
// "replace" error handler emits one U+FFFD per such subsequence.
func invalidUTF8Len(s string) int {
	c := s[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c == 0xED:
		need, hi = 2, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90
	case c == 0xF4:
		need, hi = 3, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(s); k++ {
		b := s[n]
		if b < lo || b > hi {
			break
		}
		lo, hi = 0x80, 0xBF
		n++
	}
	return n
}

// AppendFloat appends f in Python's float repr form as json.dumps writes
// it: shortest round-trip digits, fixed notation for exponents -4..15
// ("1.0", "0.0001"), otherwise "1e+16" / "1.5e-05"; NaN, Infinity, -Infinity.
func AppendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	case f == 0:
		if math.Signbit(f) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64) // -d.dddde±XX
	if e[0] == '-' {
		dst = append(dst, '-')
		e = e[1:]
	}
	var digits [24]byte
	nd := 0
	k := 0
	for ; e[k] != 'e'; k++ {
		if e[k] != '.' {
			digits[nd] = e[k]
			nd++
		}
	}
	exp, _ := strconv.Atoi(string(e[k+1:])) // small; no heap allocation
	decpt := exp + 1
	d := digits[:nd]
	if decpt > -4 && decpt <= 16 {
		switch {
		case decpt <= 0:
			dst = append(dst, '0', '.')
			for j := 0; j < -decpt; j++ {
				dst = append(dst, '0')
			}
			dst = append(dst, d...)
		case decpt >= nd:
			dst = append(dst, d...)
			for j := nd; j < decpt; j++ {
				dst = append(dst, '0')
			}
			dst = append(dst, '.', '0')
		default:
			dst = append(dst, d[:decpt]...)
			dst = append(dst, '.')
			dst = append(dst, d[decpt:]...)
		}
		return dst
	}
	dst = append(dst, d[0])
	if nd > 1 {
		dst = append(dst, '.')
		dst = append(dst, d[1:]...)
	}
	dst = append(dst, 'e')
	x := decpt - 1
	if x < 0 {
		dst = append(dst, '-')
		x = -x
	} else {
		dst = append(dst, '+')
	}
	if x < 10 {
		dst = append(dst, '0')
	}
	return strconv.AppendInt(dst, int64(x), 10)
}

// pyParser is the recursive-descent scanner shared by Loads and the
// streaming transcoder.
type pyParser struct {
	s       string
	i       int
	scratch []byte
}

func (p *pyParser) fail(msg string) error {
	return &SyntaxError{Offset: p.i, Msg: msg}
}

func (p *pyParser) skipWS() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *pyParser) hasPrefix(lit string) bool {
	return len(p.s)-p.i >= len(lit) && p.s[p.i:p.i+len(lit)] == lit
}

// enter consumes the '[' or '{' at p.i and the whitespace after it, and the
// closer too when the container is empty; it reports whether an item
// follows. Every array and object walker starts with it.
func (p *pyParser) enter(depth int, closer byte) (items bool, err error) {
	if depth > MaxDepth {
		return false, p.fail("nesting too deep")
	}
	p.i++
	p.skipWS()
	if p.i < len(p.s) && p.s[p.i] == closer {
		p.i++
		return false, nil
	}
	return true, nil
}

// next consumes what follows an item of an array or object: whitespace, then
// either ',' and the whitespace after it (more is true) or the closer.
func (p *pyParser) next(closer byte) (more bool, err error) {
	p.skipWS()
	if p.i < len(p.s) {
		switch p.s[p.i] {
		case ',':
			p.i++
			p.skipWS()
			return true, nil
		case closer:
			p.i++
			return false, nil
		}
	}
	return false, p.fail("expecting ',' delimiter")
}

func (p *pyParser) value(depth int) (Value, error) {
	if p.i >= len(p.s) {
		return Value{}, p.fail("expecting value")
	}
	switch c := p.s[p.i]; c {
	case '"':
		s, err := p.str()
		return Value{kind: Str, s: s}, err
	case '{':
		return p.object(depth + 1)
	case '[':
		return p.array(depth + 1)
	case 'n':
		if p.hasPrefix("null") {
			p.i += 4
			return Value{}, nil
		}
	case 't':
		if p.hasPrefix("true") {
			p.i += 4
			return Value{kind: Bool, b: true}, nil
		}
	case 'f':
		if p.hasPrefix("false") {
			p.i += 5
			return Value{kind: Bool}, nil
		}
	case 'N':
		if p.hasPrefix("NaN") {
			p.i += 3
			return Value{kind: Float, f: math.NaN()}, nil
		}
	case 'I':
		if p.hasPrefix("Infinity") {
			p.i += 8
			return Value{kind: Float, f: math.Inf(1)}, nil
		}
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return p.number()
		}
	}
	return Value{}, p.fail("expecting value")
}

// scanNumber consumes a number literal (or -Infinity) and reports its text,
// whether it is an integer, and the special float value for -Infinity. Its
// steps are small enough to be inlined, so the loop stays one function.
func (p *pyParser) scanNumber() (lit string, isInt, negInf bool, err error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
		if p.hasPrefix("Infinity") {
			p.i += 8
			return "", false, true, nil
		}
	}
	if !p.atDigit() {
		p.i = start
		return "", false, false, p.fail("expecting value")
	}
	if p.s[p.i] == '0' {
		p.i++
	} else {
		p.skipDigits()
	}
	isInt = true
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if !p.atDigit() {
			return "", false, false, p.fail("expecting digit after decimal point")
		}
		p.skipDigits()
		isInt = false
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if !p.atDigit() {
			return "", false, false, p.fail("expecting exponent digits")
		}
		p.skipDigits()
		isInt = false
	}
	lit = p.s[start:p.i]
	if isInt {
		if lit, err = p.intLiteral(start, lit); err != nil {
			return "", false, false, err
		}
	}
	return lit, isInt, false, nil
}

// atDigit reports whether an ASCII digit is at p.i.
func (p *pyParser) atDigit() bool {
	return p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9'
}

// skipDigits consumes ASCII digits from p.i on.
func (p *pyParser) skipDigits() {
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
}

// intLiteral checks the integer literal lit, which starts at offset start,
// against Python's digit limit (the error points at start) and spells -0
// as 0, as Python prints it.
func (p *pyParser) intLiteral(start int, lit string) (string, error) {
	nd := len(lit)
	if lit[0] == '-' {
		nd--
	}
	if nd > MaxIntDigits {
		p.i = start
		return "", p.fail("integer exceeds 4300 digits")
	}
	if lit == "-0" {
		lit = "0"
	}
	return lit, nil
}

func (p *pyParser) number() (Value, error) {
	lit, isInt, negInf, err := p.scanNumber()
	switch {
	case err != nil:
		return Value{}, err
	case negInf:
		return Value{kind: Float, f: math.Inf(-1)}, nil
	case isInt:
		return Value{kind: Int, s: lit}, nil
	}
	f, _ := strconv.ParseFloat(lit, 64) // range errors give ±Inf or 0, as Python
	return Value{kind: Float, f: f}, nil
}

// str parses a string starting at the opening quote. Without escapes or
// invalid UTF-8 the result is a substring of the input.
func (p *pyParser) str() (string, error) {
	s, _, err := p.strKey(false)
	return s, err
}

// strKey parses a string starting at the opening quote and returns its text
// and, when identity is set, the key Python would compare: the same text
// except that lone surrogates (which the text shows as U+FFFD) stay distinct,
// encoded as their three generalized-UTF-8 bytes.
func (p *pyParser) strKey(identity bool) (text, id string, err error) {
	p.i++ // opening quote
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			s := p.s[start:p.i]
			p.i++
			return s, s, nil
		case c == '\\':
			return p.strSlow(start, identity)
		case c < 0x20:
			return "", "", p.fail("invalid control character in string")
		case c < utf8.RuneSelf:
			p.i++
		default:
			r, size := utf8.DecodeRuneInString(p.s[p.i:])
			if r == utf8.RuneError && size == 1 {
				return p.strSlow(start, identity)
			}
			p.i += size
		}
	}
	return "", "", p.fail("unterminated string")
}

// strSlow continues a string that needs decoding, from body offset start.
func (p *pyParser) strSlow(start int, identity bool) (text, id string, err error) {
	p.scratch = append(p.scratch[:0], p.s[start:p.i]...)
	var lone bool
	p.scratch, lone, err = p.decodeRest(p.scratch, identity)
	if err != nil {
		return "", "", err
	}
	id = string(p.scratch)
	if !lone {
		return id, id, nil
	}
	// Show each kept surrogate (ED A0..BF 80..BF) as U+FFFD.
	b := make([]byte, 0, len(p.scratch))
	for i := 0; i < len(p.scratch); {
		if c := p.scratch[i]; c == 0xED && i+2 < len(p.scratch) && p.scratch[i+1] >= 0xA0 {
			b = append(b, "\uFFFD"...)
			i += 3
			continue
		}
		b = append(b, p.scratch[i])
		i++
	}
	return string(b), id, nil
}

// decodeRest decodes the string body from p.i up to and including the
// closing quote, appending the text to dst. Lone surrogates become U+FFFD,
// or, with keepLone, their generalized-UTF-8 bytes (reported by lone).
func (p *pyParser) decodeRest(dst []byte, keepLone bool) (_ []byte, lone bool, _ error) {
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return dst, lone, nil
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return dst, lone, err
			}
			if r >= 0xD800 && r <= 0xDFFF {
				if keepLone {
					dst = append(dst, 0xED, byte(0x80|(r>>6)&0x3F), byte(0x80|r&0x3F))
					lone = true
					continue
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
		case c < 0x20:
			return dst, lone, p.fail("invalid control character in string")
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			p.i++
		default:
			r, size := utf8.DecodeRuneInString(p.s[p.i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, "\uFFFD"...)
				p.i += invalidUTF8Len(p.s[p.i:])
				continue
			}
			dst = append(dst, p.s[p.i:p.i+size]...)
			p.i += size
		}
	}
	return dst, lone, p.fail("unterminated string")
}

// escape decodes one backslash escape at p.i, joining surrogate pairs as
// Python does; a lone surrogate is returned as its code (D800..DFFF).
func (p *pyParser) escape() (rune, error) {
	if p.i+1 >= len(p.s) {
		return 0, p.fail("unterminated string")
	}
	c := p.s[p.i+1]
	p.i += 2
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r, ok := hex4(p.s, p.i)
		if !ok {
			p.i -= 2
			return 0, p.fail("invalid \\uXXXX escape")
		}
		p.i += 4
		if r >= 0xD800 && r <= 0xDBFF && p.hasPrefix(`\u`) {
			r2, ok := hex4(p.s, p.i+2)
			if !ok {
				return 0, p.fail("invalid \\uXXXX escape")
			}
			if r2 >= 0xDC00 && r2 <= 0xDFFF {
				p.i += 6
				return 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00), nil
			}
		}
		return r, nil
	}
	p.i -= 2
	return 0, p.fail("invalid \\escape")
}

func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for k := i; k < i+4; k++ {
		c := s[k]
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func (p *pyParser) array(depth int) (Value, error) {
	v := Value{kind: List}
	more, err := p.enter(depth, ']')
	for more && err == nil {
		var item Value
		if item, err = p.value(depth); err == nil {
			v.list = append(v.list, item)
			more, err = p.next(']')
		}
	}
	if err != nil {
		return Value{}, err
	}
	return v, nil
}

func (p *pyParser) object(depth int) (Value, error) {
	v := Value{kind: Dict}
	if more, err := p.enter(depth, '}'); !more {
		return v, err
	}
	// index maps each key's identity to its position. It is built once the
	// object grows large or a key's identity differs from its text (a lone
	// surrogate); until then every identity equals its key, so a linear scan
	// of the keys does.
	var index map[string]int
	for {
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return Value{}, p.fail("expecting property name enclosed in double quotes")
		}
		key, id, err := p.strKey(true)
		if err != nil {
			return Value{}, err
		}
		p.skipWS()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return Value{}, p.fail("expecting ':' delimiter")
		}
		p.i++
		p.skipWS()
		val, err := p.value(depth)
		if err != nil {
			return Value{}, err
		}
		if index == nil && (id != key || len(v.dict) > 16) {
			index = make(map[string]int, 2*len(v.dict)+1)
			for k := range v.dict {
				index[v.dict[k].Key] = k
			}
		}
		// Python's dict(pairs): a repeated key keeps its first position and
		// takes the last value.
		at, seen := -1, false
		if index != nil {
			at, seen = index[id]
		} else {
			for k := range v.dict {
				if v.dict[k].Key == id {
					at, seen = k, true
					break
				}
			}
		}
		if seen {
			v.dict[at].Value = val
		} else {
			v.dict = append(v.dict, Member{Key: key, Value: val})
			if index != nil {
				index[id] = len(v.dict) - 1
			}
		}
		if more, err := p.next('}'); !more {
			if err != nil {
				return Value{}, err
			}
			return v, nil
		}
	}
}

// transcoders recycles transcoder scratch space (key stack, decode buffer)
// so that steady-state transcoding does not allocate.
var transcoders = sync.Pool{New: func() any { return new(transcoder) }}

func getTranscoder(src string, out []byte) *transcoder {
	t := transcoders.Get().(*transcoder)
	t.s, t.i, t.out, t.keys, t.skip = src, 0, out, t.keys[:0], false
	return t
}

func putTranscoder(t *transcoder) {
	if t.skip && cap(t.out) <= 64<<10 {
		t.own = t.out[:0]
	}
	clear(t.keys[:cap(t.keys)])
	t.s, t.out, t.keys = "", nil, t.keys[:0]
	if cap(t.scratch) > 64<<10 {
		t.scratch = nil
	}
	transcoders.Put(t)
}

// skipStr validates the string at t.i without decoding it.
func (p *pyParser) skipStr() error {
	p.i++
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return nil
		case c == '\\':
			if _, err := p.escape(); err != nil {
				return err
			}
		case c < 0x20:
			return p.fail("invalid control character in string")
		case c < utf8.RuneSelf:
			p.i++
		default:
			r, size := utf8.DecodeRuneInString(p.s[p.i:])
			if r == utf8.RuneError && size == 1 {
				size = invalidUTF8Len(p.s[p.i:])
			}
			p.i += size
		}
	}
	return p.fail("unterminated string")
}

// transcoder re-encodes JSON text in json.dumps form while validating it,
// without building a tree. It reports errPyDuplicate when an object repeats
// a key, since Python's last-value-wins rule needs the whole object.
type transcoder struct {
	pyParser
	out  []byte
	keys []string // keys of the objects currently open, innermost last
	// skip validates without producing output: strings are not copied,
	// repeated keys are not looked for, and out is emptied before each
	// value so it never grows.
	skip bool
	own  []byte // out's buffer in skip mode, kept across uses
}

func (t *transcoder) value(depth int) error {
	if t.skip {
		t.out = t.out[:0]
	}
	if t.i >= len(t.s) {
		return t.fail("expecting value")
	}
	switch c := t.s[t.i]; c {
	case '"':
		return t.str()
	case '{':
		return t.object(depth + 1)
	case '[':
		return t.array(depth + 1)
	case 'n':
		if t.hasPrefix("null") {
			t.i += 4
			t.out = append(t.out, "null"...)
			return nil
		}
	case 't':
		if t.hasPrefix("true") {
			t.i += 4
			t.out = append(t.out, "true"...)
			return nil
		}
	case 'f':
		if t.hasPrefix("false") {
			t.i += 5
			t.out = append(t.out, "false"...)
			return nil
		}
	case 'N':
		if t.hasPrefix("NaN") {
			t.i += 3
			t.out = append(t.out, "NaN"...)
			return nil
		}
	case 'I':
		if t.hasPrefix("Infinity") {
			t.i += 8
			t.out = append(t.out, "Infinity"...)
			return nil
		}
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			lit, isInt, negInf, err := t.scanNumber()
			switch {
			case err != nil:
				return err
			case negInf:
				t.out = append(t.out, "-Infinity"...)
			case isInt:
				t.out = append(t.out, lit...)
			default:
				f, _ := strconv.ParseFloat(lit, 64)
				t.out = AppendFloat(t.out, f)
			}
			return nil
		}
	}
	return t.fail("expecting value")
}

// str decodes the string at t.i and writes its json.dumps form in one pass.
func (t *transcoder) str() error {
	if t.skip {
		return t.skipStr()
	}
	t.i++
	t.out = append(t.out, '"')
	start := t.i
	for t.i < len(t.s) {
		c := t.s[t.i]
		switch {
		case c == '"':
			t.out = append(t.out, t.s[start:t.i]...)
			t.out = append(t.out, '"')
			t.i++
			return nil
		case c == '\\':
			t.out = append(t.out, t.s[start:t.i]...)
			r, err := t.escape()
			if err != nil {
				return err
			}
			if r < utf8.RuneSelf {
				switch e := pyEscape[r]; e {
				case 0:
					t.out = append(t.out, byte(r))
				case 'u':
					t.out = append(t.out, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xf])
				default:
					t.out = append(t.out, '\\', e)
				}
			} else {
				t.out = utf8.AppendRune(t.out, r)
			}
			start = t.i
		case c < 0x20:
			return t.fail("invalid control character in string")
		case c < utf8.RuneSelf:
			t.i++
		default:
			r, size := utf8.DecodeRuneInString(t.s[t.i:])
			if r == utf8.RuneError && size == 1 {
				t.out = append(t.out, t.s[start:t.i]...)
				t.out = append(t.out, "\uFFFD"...)
				t.i += invalidUTF8Len(t.s[t.i:])
				start = t.i
				continue
			}
			t.i += size
		}
	}
	return t.fail("unterminated string")
}

// enter is pyParser.enter that also writes the opening byte, and the closer
// of an empty container.
func (t *transcoder) enter(depth int, closer byte) (items bool, err error) {
	opener := t.s[t.i]
	if items, err = t.pyParser.enter(depth, closer); err != nil {
		return false, err
	}
	t.out = append(t.out, opener)
	if !items {
		t.out = append(t.out, closer)
	}
	return items, nil
}

// next is pyParser.next that also writes ", " or the closer.
func (t *transcoder) next(closer byte) (more bool, err error) {
	more, err = t.pyParser.next(closer)
	switch {
	case more:
		t.out = append(t.out, ", "...)
	case err == nil:
		t.out = append(t.out, closer)
	}
	return more, err
}

func (t *transcoder) array(depth int) error {
	more, err := t.enter(depth, ']')
	for more && err == nil {
		if err = t.value(depth); err == nil {
			more, err = t.next(']')
		}
	}
	return err
}

func (t *transcoder) object(depth int) error {
	if more, err := t.enter(depth, '}'); !more {
		return err
	}
	base := len(t.keys)
	defer func() { t.keys = t.keys[:base] }()
	var seen map[string]struct{} // built once an object grows large
	for {
		if t.i >= len(t.s) || t.s[t.i] != '"' {
			return t.fail("expecting property name enclosed in double quotes")
		}
		rawStart := t.i
		if err := t.str(); err != nil {
			return err
		}
		if !t.skip {
			if err := t.checkKey(rawStart, base, &seen); err != nil {
				return err
			}
		}
		t.skipWS()
		if t.i >= len(t.s) || t.s[t.i] != ':' {
			return t.fail("expecting ':' delimiter")
		}
		t.i++
		t.skipWS()
		t.out = append(t.out, ": "...)
		if err := t.value(depth); err != nil {
			return err
		}
		if more, err := t.next('}'); !more {
			return err
		}
	}
}

// checkKey records the key whose quoted text starts at rawStart in the
// object whose keys start at keys[base], reporting errPyDuplicate when
// Python would see it twice.
func (t *transcoder) checkKey(rawStart, base int, seenp *map[string]struct{}) error {
	seen := *seenp
	key := t.s[rawStart+1 : t.i-1]
	if strings.IndexByte(key, '\\') >= 0 || !utf8.ValidString(key) {
		// Compare what Python compares: the decoded key, with lone
		// surrogates kept distinct from U+FFFD.
		sub := pyParser{s: t.s, i: rawStart}
		_, key, _ = sub.strKey(true) // already validated
	}
	if seen != nil {
		if _, dup := seen[key]; dup {
			return errPyDuplicate
		}
		seen[key] = struct{}{}
	} else {
		for _, k := range t.keys[base:] {
			if k == key {
				return errPyDuplicate
			}
		}
		t.keys = append(t.keys, key)
		if len(t.keys)-base > 32 {
			seen = make(map[string]struct{}, 64)
			for _, k := range t.keys[base:] {
				seen[k] = struct{}{}
			}
		}
	}
	*seenp = seen
	return nil
}

// members walks the object at t.i in skip mode, calling visit with each
// decoded key (as Python compares keys) and t.i at the start of its value;
// visit must consume the value.
func (t *transcoder) members(depth int, visit func(key string) error) error {
	if more, err := t.pyParser.enter(depth, '}'); !more {
		return err
	}
	for {
		if t.i >= len(t.s) || t.s[t.i] != '"' {
			return t.fail("expecting property name enclosed in double quotes")
		}
		_, key, err := t.strKey(true)
		if err != nil {
			return err
		}
		t.skipWS()
		if t.i >= len(t.s) || t.s[t.i] != ':' {
			return t.fail("expecting ':' delimiter")
		}
		t.i++
		t.skipWS()
		if t.i >= len(t.s) {
			return t.fail("expecting value")
		}
		if err := visit(key); err != nil {
			return err
		}
		if more, err := t.pyParser.next('}'); !more {
			return err
		}
	}
}

// JudgeResult returns (succeeded, true) when content is JSON, applying
// Hermes batch_runner's failure rules (a non-null "error", "success": false,
// or a non-null "error" inside "content"); (true, false) for plain text. It
// validates the whole text like json.loads but keeps nothing: only the
// members "error", "success" and "content" (and "error" inside "content")
// are looked at, last occurrence winning as in a Python dict.
func JudgeResult(content string) (bool, bool) {
	i := 0
	for i < len(content) && (content[i] == ' ' || content[i] == '\t' || content[i] == '\n' || content[i] == '\r') {
		i++
	}
	if i == len(content) || !strings.ContainsRune(`{"[-0123456789ntfNI`, rune(content[i])) {
		return true, false // blank or plain text: not JSON
	}
	t := getTranscoder(content, nil)
	defer putTranscoder(t)
	t.i, t.skip, t.out = i, true, t.own[:0]
	failed := false
	var err error
	if content[i] == '{' {
		failed, err = t.judgeObject()
	} else {
		err = t.value(0)
	}
	if err != nil {
		return true, false
	}
	t.skipWS()
	if t.i != len(content) {
		return true, false
	}
	return !failed, true
}

// judgeObject applies batch_runner's failure rules to the object at t.i.
func (t *transcoder) judgeObject() (failed bool, err error) {
	var errorSet, successFalse, innerError bool
	err = t.members(1, func(key string) error {
		switch key {
		case "error":
			errorSet = t.s[t.i] != 'n' // only null starts with 'n'
		case "success":
			successFalse = t.s[t.i] == 'f' // only false starts with 'f'
		case "content":
			innerError = false
			if t.s[t.i] == '{' {
				return t.members(2, func(key string) error {
					if key == "error" {
						innerError = t.s[t.i] != 'n'
					}
					return t.value(2)
				})
			}
		}
		return t.value(1)
	})
	return errorSet || successFalse || innerError, err
}
