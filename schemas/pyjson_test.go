package schemas

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAppendPyFloat(t *testing.T) {
	cases := []struct {
		f    float64
		want string
	}{
		{0, "0.0"}, {math.Copysign(0, -1), "-0.0"}, {1, "1.0"}, {-2.5, "-2.5"}, {0.1, "0.1"},
		{1e16, "1e+16"}, {9999999999999998, "9999999999999998.0"}, {1e15, "1000000000000000.0"},
		{1e-4, "0.0001"}, {1e-5, "1e-05"}, {1.5e-7, "1.5e-07"}, {1e22, "1e+22"}, {1e100, "1e+100"},
		{123456789012345678, "1.2345678901234568e+17"}, {5e-324, "5e-324"}, {math.MaxFloat64, "1.7976931348623157e+308"},
		{0.000123, "0.000123"}, {123.456, "123.456"}, {math.NaN(), "NaN"}, {math.Inf(1), "Infinity"}, {math.Inf(-1), "-Infinity"},
	}
	for _, c := range cases {
		if got := string(AppendPyFloat(nil, c.f)); got != c.want {
			t.Errorf("%v: got %s, want %s", c.f, got, c.want)
		}
	}
}

func TestAppendPyString(t *testing.T) {
	cases := map[string]string{
		"":                  `""`,
		"plain <>&/":        `"plain <>&/"`,
		"q\"b\\":            `"q\"b\\"`,
		"\n\r\t\b\f":        `"\n\r\t\b\f"`,
		"\x00\x01\x1f\x7f":  `"\u0000\u0001\u001f` + "\x7f\"",
		"日本 🎉 \u2028\u2029": "\"日本 🎉 \u2028\u2029\"",
		"bad\xffend":        "\"bad\uFFFDend\"",
		"\xe2\x82":          "\"\uFFFD\"",       // one maximal subpart
		"\xe0\x80":          "\"\uFFFD\uFFFD\"", // E0 needs A0..BF
		"\xed\xa0\x80":      "\"\uFFFD\uFFFD\uFFFD\"",
		"\xf0\x9f\x98!":     "\"\uFFFD!\"",
	}
	for in, want := range cases {
		if got := string(AppendPyString(nil, in)); got != want {
			t.Errorf("%q: got %s, want %s", in, got, want)
		}
	}
}

func TestPyLoads(t *testing.T) {
	v, err := PyLoadsString(` {"b": [1, -0, 2.50, "x\u00e9", null, true], "a": {"k": 1, "k": 2}, "b2": NaN} `)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := PyDumps(v), `{"b": [1, 0, 2.5, "xé", null, true], "a": {"k": 2}, "b2": NaN}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if b, ok := v.Get("b"); !ok || b.Kind() != PyList || len(b.List()) != 6 || b.List()[3].Str() != "xé" {
		t.Errorf("Get(b) = %v %v", b, ok)
	}
	if _, ok := v.Get("missing"); ok {
		t.Error("Get(missing) found something")
	}
	for _, bad := range []string{
		"", " ", "{", "[1,]", `{"a":1,}`, "01", "1.", "1e", "-", "+1", ".5", "nul", "[1 2]", `{"a" 1}`, `{a: 1}`,
		`"\x"`, `"\u12"`, `"\ud800\u12"`, "\"a\nb\"", "\"\x00\"", `"open`, "\ufeff{}", "1 2", "-NaN", "infinity",
		strings.Repeat("[", pyMaxDepth+1) + strings.Repeat("]", pyMaxDepth+1), strings.Repeat("1", pyMaxIntDigits+1),
	} {
		if _, err := PyLoadsString(bad); err == nil {
			t.Errorf("%.40q: parsed, want an error", bad)
		}
		if out, err := AppendPyJSONOf([]byte("keep"), bad); err == nil || string(out) != "keep" {
			t.Errorf("%.40q: transcoder gave %q, %v; want an error and dst untouched", bad, out, err)
		}
	}
	for _, good := range []string{strings.Repeat("1", pyMaxIntDigits), "-" + strings.Repeat("9", pyMaxIntDigits),
		strings.Repeat("[", pyMaxDepth) + strings.Repeat("]", pyMaxDepth)} {
		if _, err := PyLoadsString(good); err != nil {
			t.Errorf("%.40q: %v", good, err)
		}
	}
}

func TestPyValueBuilders(t *testing.T) {
	v := PyDictOf(
		PyMember{"s", PyStrOf("a\"b")}, PyMember{"i", PyIntOf(-3)}, PyMember{"f", PyFloatOf(2)},
		PyMember{"l", PyListOf(PyBoolOf(false), PyNull())}, PyMember{"d", PyDictOf()},
	)
	if got, want := PyDumps(v), `{"s": "a\"b", "i": -3, "f": 2.0, "l": [false, null], "d": {}}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestPyJSONMatchesPython compares both Go paths (streaming transcoder and
// tree) with Python's json.dumps(json.loads(text), ensure_ascii=False) on a
// corpus of hand-picked and generated documents, valid and invalid.
func TestPyJSONMatchesPython(t *testing.T) {
	py := python(t)
	corpus := pyJSONCorpus(4000)
	var in bytes.Buffer
	for _, doc := range corpus {
		in.WriteByte('x') // keeps empty documents on their own line
		in.WriteString(base64.StdEncoding.EncodeToString([]byte(doc)))
		in.WriteByte('\n')
	}
	cmd := exec.Command(py, "testdata/hermes_ref.py", "dumps")
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hermes_ref.py dumps: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(corpus) {
		t.Fatalf("python answered %d lines for %d documents", len(lines), len(corpus))
	}
	failures, valid := 0, 0
	for i, doc := range corpus {
		goOut, goErr := AppendPyJSONOf(nil, doc)
		tree, treeErr := PyLoadsString(doc)
		if (goErr == nil) != (treeErr == nil) || (goErr == nil && PyDumps(tree) != string(goOut)) {
			t.Errorf("%q: transcoder (%q, %v) and tree (%q, %v) disagree", doc, goOut, goErr, PyDumps(tree), treeErr)
		}
		var want string
		pyErr := lines[i] == "ERR"
		if !pyErr {
			b, err := base64.StdEncoding.DecodeString(lines[i])
			if err != nil {
				t.Fatal(err)
			}
			want = string(b)
			valid++
		}
		switch {
		case pyErr && goErr == nil:
			t.Errorf("%q: Python rejects, Go gives %s", doc, goOut)
		case !pyErr && goErr != nil:
			t.Errorf("%q: Python gives %s, Go rejects: %v", doc, want, goErr)
		case !pyErr && string(goOut) != want:
			t.Errorf("%q:\n    go %s\npython %s", doc, goOut, want)
		default:
			continue
		}
		if failures++; failures > 20 {
			t.Fatal("too many differences")
		}
	}
	if valid < len(corpus)/3 || valid == len(corpus) {
		t.Errorf("corpus is unbalanced: %d of %d valid", valid, len(corpus))
	}
}

// pyJSONCorpus returns hand-picked edge cases followed by n generated
// documents (fixed seed), some of them corrupted.
func pyJSONCorpus(n int) []string {
	docs := []string{
		`{}`, `[]`, `""`, `0`, `-0`, `-0.0`, `1E400`, `-1e400`, `1e-400`, `NaN`, `Infinity`, `-Infinity`,
		`[NaN,Infinity,-Infinity]`, `1.0`, `1e16`, `1E-5`, `0.0001`, `123456789012345678901234567890`,
		`"\ud83d\ude00"`, `"\ud800"`, `"\udc00\ud800"`, `"\ud800\ud800\udc00"`, `"\uD83D\uDE00"`, `"\u0000\u001F\u007f\u2028"`,
		`"\/\b\f\n\r\t\"\\"`, "\"\x7f\"", "\"caf\xc3\xa9\"", "\"bad \xff\xfe byte\"", "\"\xe2\x82\"", "\"\xf0\x9f\x98\"",
		`{"a":1,"a":2}`, `{"a":{"b":1},"c":2,"a":[3]}`, `{"\u0061":1,"a":2}`, `{"x":1,"y":2,"x":3,"y":4,"z":5}`,
		" \t\n\r[1 , 2 ]\r\n", `[1,]`, `{"a":1,}`, `01`, `1.`, `.5`, `+1`, `1e`, `1e+`, `-`, `--1`, `tru`, `nul`,
		"\"\t\"", "\"\n\"", `"\x"`, `"\u12G4"`, `"\ud800\u12"`, "\ufeff{}", `{"a" 1}`, `{1:2}`, `[1 2]`, `"a" "b"`,
		strings.Repeat("1", pyMaxIntDigits), strings.Repeat("1", pyMaxIntDigits+1), "-" + strings.Repeat("2", pyMaxIntDigits),
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

// FuzzPyJSON checks properties that need no Python: both Go paths agree,
// output is valid UTF-8, re-encoding is stable, and anything encoding/json
// accepts is accepted.
func FuzzPyJSON(f *testing.F) {
	for _, doc := range pyJSONCorpus(50) {
		f.Add(doc)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		out, err := AppendPyJSONOf(nil, doc)
		tree, treeErr := PyLoadsString(doc)
		if (err == nil) != (treeErr == nil) {
			t.Fatalf("transcoder err %v, tree err %v", err, treeErr)
		}
		if _, isJSON := judgeJSONResult(doc); isJSON != (err == nil) {
			t.Fatalf("tool-result judge says JSON=%v, transcoder err %v", isJSON, err)
		}
		if err != nil {
			if json.Valid([]byte(doc)) && utf8.ValidString(doc) && !strings.Contains(doc, `\u`) && len(doc) < 1000 {
				t.Fatalf("encoding/json accepts %q, we reject: %v", doc, err)
			}
			return
		}
		if PyDumps(tree) != string(out) {
			t.Fatalf("tree %s, transcoder %s", PyDumps(tree), out)
		}
		if !utf8.Valid(out) {
			t.Fatalf("invalid UTF-8 out: %q", out)
		}
		again, err := AppendPyJSONOf(nil, string(out))
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("re-encoding %s gave %s, %v", out, again, err)
		}
	})
}

func BenchmarkAppendPyJSONOf(b *testing.B) {
	doc := `{"command": "cat /etc/os-release && ls -la /usr/local/bin | head -50", "timeout": 120, "env": {"LANG": "C.UTF-8", "PATH": "/usr/bin"}, "ratio": 0.75}`
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		buf, _ = AppendPyJSONOf(buf[:0], doc)
	}
}

func BenchmarkPyLoads(b *testing.B) {
	doc := `{"output": "total 12\ndrwxr-xr-x 2 root root 4096 .\n", "exit_code": 0, "error": null, "files": ["a", "b", "c"]}`
	b.ReportAllocs()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		_, _ = PyLoadsString(doc)
	}
}
