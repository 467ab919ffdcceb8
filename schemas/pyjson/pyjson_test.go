package pyjson

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hermes-pipe/hermes-pipe/schemas/pyjson/pyjsontest"
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
		if got := string(AppendFloat(nil, c.f)); got != c.want {
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
		if got := string(AppendString(nil, in)); got != want {
			t.Errorf("%q: got %s, want %s", in, got, want)
		}
	}
}

func TestPyLoads(t *testing.T) {
	v, err := LoadsString(` {"b": [1, -0, 2.50, "x\u00e9", null, true], "a": {"k": 1, "k": 2}, "b2": NaN} `)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Dumps(v), `{"b": [1, 0, 2.5, "xé", null, true], "a": {"k": 2}, "b2": NaN}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if b, ok := v.Get("b"); !ok || b.Kind() != List || len(b.List()) != 6 || b.List()[3].Str() != "xé" {
		t.Errorf("Get(b) = %v %v", b, ok)
	}
	if _, ok := v.Get("missing"); ok {
		t.Error("Get(missing) found something")
	}
	for _, bad := range []string{
		"", " ", "{", "[1,]", `{"a":1,}`, "01", "1.", "1e", "-", "+1", ".5", "nul", "[1 2]", `{"a" 1}`, `{a: 1}`,
		`"\x"`, `"\u12"`, `"\ud800\u12"`, "\"a\nb\"", "\"\x00\"", `"open`, "\ufeff{}", "1 2", "-NaN", "infinity",
		strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), strings.Repeat("1", MaxIntDigits+1),
	} {
		if _, err := LoadsString(bad); err == nil {
			t.Errorf("%.40q: parsed, want an error", bad)
		}
		if out, err := AppendJSON([]byte("keep"), bad); err == nil || string(out) != "keep" {
			t.Errorf("%.40q: transcoder gave %q, %v; want an error and dst untouched", bad, out, err)
		}
	}
	for _, good := range []string{strings.Repeat("1", MaxIntDigits), "-" + strings.Repeat("9", MaxIntDigits),
		strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)} {
		if _, err := LoadsString(good); err != nil {
			t.Errorf("%.40q: %v", good, err)
		}
	}
}

func TestPyValueBuilders(t *testing.T) {
	v := DictOf(
		Member{"s", StrOf("a\"b")}, Member{"i", IntOf(-3)}, Member{"f", FloatOf(2)},
		Member{"l", ListOf(BoolOf(false), Null())}, Member{"d", DictOf()},
	)
	if got, want := Dumps(v), `{"s": "a\"b", "i": -3, "f": 2.0, "l": [false, null], "d": {}}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestPyJSONMatchesPython compares both Go paths (streaming transcoder and
// tree) with Python's json.dumps(json.loads(text), ensure_ascii=False) on a
// corpus of hand-picked and generated documents, valid and invalid.
func TestPyJSONMatchesPython(t *testing.T) {
	py := pyjsontest.Python(t)
	corpus := pyjsontest.Corpus(4000)
	var in bytes.Buffer
	for _, doc := range corpus {
		in.WriteByte('x') // keeps empty documents on their own line
		in.WriteString(base64.StdEncoding.EncodeToString([]byte(doc)))
		in.WriteByte('\n')
	}
	cmd := exec.Command(py, "../testdata/hermes_ref.py", "dumps")
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
		goOut, goErr := AppendJSON(nil, doc)
		tree, treeErr := LoadsString(doc)
		if (goErr == nil) != (treeErr == nil) || (goErr == nil && Dumps(tree) != string(goOut)) {
			t.Errorf("%q: transcoder (%q, %v) and tree (%q, %v) disagree", doc, goOut, goErr, Dumps(tree), treeErr)
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

// FuzzPyJSON checks properties that need no Python: both Go paths agree,
// output is valid UTF-8, re-encoding is stable, and anything encoding/json
// accepts is accepted.
func FuzzPyJSON(f *testing.F) {
	for _, doc := range pyjsontest.Corpus(50) {
		f.Add(doc)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		out, err := AppendJSON(nil, doc)
		tree, treeErr := LoadsString(doc)
		if (err == nil) != (treeErr == nil) {
			t.Fatalf("transcoder err %v, tree err %v", err, treeErr)
		}
		if _, isJSON := JudgeResult(doc); isJSON != (err == nil) {
			t.Fatalf("tool-result judge says JSON=%v, transcoder err %v", isJSON, err)
		}
		if err != nil {
			if json.Valid([]byte(doc)) && utf8.ValidString(doc) && !strings.Contains(doc, `\u`) && len(doc) < 1000 {
				t.Fatalf("encoding/json accepts %q, we reject: %v", doc, err)
			}
			return
		}
		if Dumps(tree) != string(out) {
			t.Fatalf("tree %s, transcoder %s", Dumps(tree), out)
		}
		if !utf8.Valid(out) {
			t.Fatalf("invalid UTF-8 out: %q", out)
		}
		again, err := AppendJSON(nil, string(out))
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
		buf, _ = AppendJSON(buf[:0], doc)
	}
}

func BenchmarkPyLoads(b *testing.B) {
	doc := `{"output": "total 12\ndrwxr-xr-x 2 root root 4096 .\n", "exit_code": 0, "error": null, "files": ["a", "b", "c"]}`
	b.ReportAllocs()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		_, _ = LoadsString(doc)
	}
}

func BenchmarkPyLoadsNumbers(b *testing.B) {
	doc := `[0, -1, 42, 1234567890123, 3.25, -0.5e-3, 6.02E+23, 1e9, -0, 17, 2.5, 100000]`
	b.ReportAllocs()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		_, _ = LoadsString(doc)
	}
}
