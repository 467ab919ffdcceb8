// Package pyjsontest holds what the tests of pyjson and of its users share:
// a corpus of JSON documents (hand-picked edge cases and generated ones,
// valid and not) and the python3 reference interpreter.
package pyjsontest

import (
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Python returns the python3 binary. Without one the test is skipped, except
// under CI (CI set), where the byte-for-byte reference checks are required
// and a missing python3 fails the test.
func Python(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 not installed; CI requires the byte-for-byte reference check (apt-get install python3)")
		}
		t.Skip("python3 not installed; the byte-for-byte reference check needs it")
	}
	return p
}

// Corpus returns hand-picked edge cases followed by n generated
// documents (fixed seed), some of them corrupted.
func Corpus(n int) []string {
	docs := []string{
		`{}`, `[]`, `""`, `0`, `-0`, `-0.0`, `1E400`, `-1e400`, `1e-400`, `NaN`, `Infinity`, `-Infinity`,
		`[NaN,Infinity,-Infinity]`, `1.0`, `1e16`, `1E-5`, `0.0001`, `123456789012345678901234567890`,
		`"\ud83d\ude00"`, `"\ud800"`, `"\udc00\ud800"`, `"\ud800\ud800\udc00"`, `"\uD83D\uDE00"`, `"\u0000\u001F\u007f\u2028"`,
		`"\/\b\f\n\r\t\"\\"`, "\"\x7f\"", "\"caf\xc3\xa9\"", "\"bad \xff\xfe byte\"", "\"\xe2\x82\"", "\"\xf0\x9f\x98\"",
		`{"a":1,"a":2}`, `{"a":{"b":1},"c":2,"a":[3]}`, `{"\u0061":1,"a":2}`, `{"x":1,"y":2,"x":3,"y":4,"z":5}`,
		" \t\n\r[1 , 2 ]\r\n", `[1,]`, `{"a":1,}`, `01`, `1.`, `.5`, `+1`, `1e`, `1e+`, `-`, `--1`, `tru`, `nul`,
		"\"\t\"", "\"\n\"", `"\x"`, `"\u12G4"`, `"\ud800\u12"`, "\ufeff{}", `{"a" 1}`, `{1:2}`, `[1 2]`, `"a" "b"`,
		strings.Repeat("1", maxIntDigits), strings.Repeat("1", maxIntDigits+1), "-" + strings.Repeat("2", maxIntDigits),
		`1.` + strings.Repeat("3", 5000), `[` + strings.Repeat(`{"k":[`, 40) + strings.Repeat(`]}`, 40) + `]`,
		`{"n":` + strings.Repeat("9", 400) + `.5e-300}`, `0.1e1`, `5e-324`, `2.4703282292062328e-324`, `1.7976931348623158e308`,
	}
	keys := make([]string, 0, 40)
	for i := range 40 {
		keys = append(keys, "k"+strconv.Itoa(i))
	}
	bigObj := "{"
	for i, k := range keys {
		if i > 0 {
			bigObj += ","
		}
		bigObj += `"` + k + `":` + strconv.Itoa(i)
	}
	docs = append(docs, bigObj+"}", bigObj+`,"k3":"dup"}`)

	r := rand.New(rand.NewPCG(1, 2))
	for range n {
		var b []byte
		b = genJSON(r, b, 0)
		switch r.IntN(6) {
		case 0: // corrupt one byte
			if len(b) > 0 {
				const junk = "{}[],:\"\\x\xff 0e."
				b[r.IntN(len(b))] = junk[r.IntN(len(junk))]
			}
		case 1: // truncate
			if len(b) > 1 {
				b = b[:r.IntN(len(b))]
			}
		}
		docs = append(docs, string(b))
	}
	return docs
}

func genWS(r *rand.Rand, b []byte) []byte {
	if r.IntN(4) == 0 {
		for range r.IntN(3) {
			b = append(b, " \t\n\r"[r.IntN(4)])
		}
	}
	return b
}

func genJSON(r *rand.Rand, b []byte, depth int) []byte {
	b = genWS(r, b)
	k := r.IntN(10)
	if depth > 4 && k >= 8 {
		k = r.IntN(8)
	}
	switch k {
	case 0:
		b = append(b, [...]string{"true", "false", "null", "NaN", "Infinity", "-Infinity"}[r.IntN(6)]...)
	case 1, 2:
		b = genNumber(r, b)
	case 3, 4, 5, 6, 7:
		b = genString(r, b)
	case 8:
		b = append(b, '[')
		for i := range r.IntN(5) {
			if i > 0 {
				b = append(b, ',')
			}
			b = genJSON(r, b, depth+1)
		}
		b = genWS(r, b)
		b = append(b, ']')
	default:
		b = append(b, '{')
		for i := range r.IntN(5) {
			if i > 0 {
				b = append(b, ',')
			}
			b = genWS(r, b)
			if r.IntN(3) == 0 {
				b = append(b, [...]string{`"a"`, `"b"`, `"\u0061"`, `"error"`}[r.IntN(4)]...)
			} else {
				b = genString(r, b)
			}
			b = genWS(r, b)
			b = append(b, ':')
			b = genJSON(r, b, depth+1)
		}
		b = genWS(r, b)
		b = append(b, '}')
	}
	return genWS(r, b)
}

func genNumber(r *rand.Rand, b []byte) []byte {
	switch r.IntN(7) {
	case 0:
		return strconv.AppendInt(b, r.Int64N(2000)-1000, 10)
	case 1: // big integer
		if r.IntN(2) == 0 {
			b = append(b, '-')
		}
		b = append(b, byte('1'+r.IntN(9)))
		for range r.IntN(40) {
			b = append(b, byte('0'+r.IntN(10)))
		}
		return b
	case 2:
		return strconv.AppendFloat(b, math.Float64frombits(r.Uint64()), "eEfg"[r.IntN(4)], -1, 64)
	case 3:
		return strconv.AppendFloat(b, r.NormFloat64()*math.Pow(10, float64(r.IntN(40)-20)), 'g', -1, 64)
	case 4: // hand-built literal with many digits and an exponent
		if r.IntN(2) == 0 {
			b = append(b, '-')
		}
		b = append(b, byte('0'+r.IntN(10)))
		if b[len(b)-1] != '0' || r.IntN(2) == 0 {
			b = append(b, '.')
			for range 1 + r.IntN(25) {
				b = append(b, byte('0'+r.IntN(10)))
			}
		}
		b = append(b, "eE"[r.IntN(2)])
		if r.IntN(2) == 0 {
			b = append(b, "+-"[r.IntN(2)])
		}
		return strconv.AppendInt(b, int64(r.IntN(700)), 10)
	case 5:
		return append(b, [...]string{"0", "-0", "0.0", "-0.0", "1.0", "1e16", "1e15", "0.0001", "0.00001", "100.0e-2"}[r.IntN(10)]...)
	default:
		return strconv.AppendFloat(b, float64(r.IntN(1_000_000))/float64(1+r.IntN(1000)), 'f', r.IntN(8), 64)
	}
}

var genRunes = []string{
	"a", "Z", " ", "/", "<", ">", "&", "'", "日", "本", "é", "🎉", "😀", "\u2028", "\u2029", "\u00a0", "\u3000",
	"\x7f", "\xff", "\xe2\x82", "\xed\xa0\x80", "\\n", "\\r", "\\t", "\\b", "\\f", "\\/", "\\\\", "\\\"",
	"\\u0000", "\\u001f", "\\u0041", "\\u00e9", "\\u2028", "\\ud83d\\ude00", "\\ud800", "\\udc00", "\\uD83D", "\\uFFFF",
}

func genString(r *rand.Rand, b []byte) []byte {
	b = append(b, '"')
	for range r.IntN(12) {
		b = append(b, genRunes[r.IntN(len(genRunes))]...)
	}
	return append(b, '"')
}

// maxIntDigits is Python's int_max_str_digits (pyjson.MaxIntDigits; this
// package cannot import pyjson, whose own tests use it).
const maxIntDigits = 4300
