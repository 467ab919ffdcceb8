package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRegexTranslationMatchesStateMachines runs the Go translation of every
// known pattern (lookahead emulated, && intersections computed) against its
// hand-written state machine on random text: two independent
// implementations of the same regex must cut the same pieces.
func TestRegexTranslationMatchesStateMachines(t *testing.T) {
	for name, pat := range map[string]string{"cl100k": patCL100K, "qwen2": patQwen2, "o200k": patO200K, "kimi": patKimi} {
		t.Run(name, func(t *testing.T) {
			re, err := compileLook(pat)
			if err != nil {
				t.Fatal(err)
			}
			fast := knownSplitter(pat)
			r := rand.New(rand.NewPCG(11, uint64(len(pat))))
			for i := range 1500 {
				s := sanitizeUTF8(randomText(r, 1+i%80))
				want := splitIsolated(s, nil, re.find)
				var got []string
				for k := 0; k < len(s); {
					j := fast.next(s, k)
					got = append(got, s[k:j])
					k = j
				}
				if !slices.Equal(got, want) {
					t.Fatalf("%q:\nstate machine %q\nregex         %q", s, got, want)
				}
			}
		})
	}
}

func TestTranslateRegexErrors(t *testing.T) {
	for _, pat := range []string{`a(?=b)`, `(?<!x)y`, `a++`, `(?>ab)`, `[a-`, `\p{NoSuchThing}`, `\q`} {
		if _, err := compileLook(pat); err == nil {
			t.Errorf("compileLook(%q) succeeded, want an error", pat)
		}
	}
	if _, err := compileLook(`[\p{L}&&[^\p{Han}]]+|\s+(?!\S)|\s+`); err != nil {
		t.Errorf("intersection and lookahead idiom: %v", err)
	}
}

// writeVariant writes the qwen3-mini fixture with edit applied and returns
// its path.
func writeVariant(t *testing.T, edit func(m map[string]any)) string {
	t.Helper()
	raw, err := os.ReadFile("testdata/qwen3-mini.tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "variant.tokenizer.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadErrorsNameFileAndField(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(m map[string]any)
		field string
	}{
		{"unigram", func(m map[string]any) { m["model"].(map[string]any)["type"] = "Unigram" }, "model.type"},
		{"wordpiece", func(m map[string]any) { m["model"].(map[string]any)["type"] = "WordPiece" }, "model.type"},
		{"dropout", func(m map[string]any) { m["model"].(map[string]any)["dropout"] = 0.1 }, "model.dropout"},
		{"metaspace-scheme", func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Metaspace", "prepend_scheme": "sometimes"}
		}, "pre_tokenizer.prepend_scheme"},
		{"metaspace-replacement", func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "__"}
		}, "pre_tokenizer.replacement"},
		{"unk-oov", func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Metaspace"}
			m["model"].(map[string]any)["unk_token"] = "<no such token>"
		}, "model.unk_token"},
		{"pre-tokenizer", func(m map[string]any) { m["pre_tokenizer"] = map[string]any{"type": "Whitespace"} }, "pre_tokenizer.type"},
		{"replace-content", func(m map[string]any) {
			m["normalizer"] = map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}}
		}, "normalizer.content"},
		{"replace-regex", func(m map[string]any) {
			m["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{
				map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": `(?<=a)b`}, "content": "x"}}}
		}, "normalizer.normalizers[0].pattern.Regex"},
		{"prepend", func(m map[string]any) { m["normalizer"] = map[string]any{"type": "Prepend"} }, "normalizer.prepend"},
		{"bad-regex", func(m map[string]any) {
			seq := m["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)
			seq[0].(map[string]any)["pattern"] = map[string]any{"Regex": `(?<=a)b`}
		}, "pre_tokenizer.pretokenizers[0].pattern.Regex"},
		{"bad-behavior", func(m map[string]any) {
			seq := m["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)
			seq[0].(map[string]any)["behavior"] = "Sideways"
		}, "pre_tokenizer.pretokenizers[0].behavior"},
		{"normalizer", func(m map[string]any) { m["normalizer"] = map[string]any{"type": "Precompiled"} }, "normalizer.type"},
		{"merge-oov", func(m map[string]any) {
			m["model"].(map[string]any)["merges"] = []any{[]any{"zzzq", "qqqz"}}
		}, "model.merges[0]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeVariant(t, c.edit)
			_, err := Load(path)
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			msg := err.Error()
			if !strings.Contains(msg, path) || !strings.Contains(msg, c.field) {
				t.Errorf("error %q should name the file and the field %s", msg, c.field)
			}
		})
	}
	if _, err := Load("p50k_base"); err == nil || !strings.Contains(err.Error(), "cl100k_base") {
		t.Errorf("unknown name: %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("missing file loaded")
	}
}

// TestGzipAndMergesAsStrings loads the same tokenizer from merges written as
// pairs, as "a b" strings, and gzip-compressed, and expects the same ids.
func TestGzipAndMergesAsStrings(t *testing.T) {
	_, inputs := corpus(t)
	base := loadByGoldenName(t, "qwen3-mini")
	strs := writeVariant(t, func(m map[string]any) {
		model := m["model"].(map[string]any)
		var out []any
		for _, p := range model["merges"].([]any) {
			pair := p.([]any)
			out = append(out, pair[0].(string)+" "+pair[1].(string))
		}
		model["merges"] = out
	})
	alt, err := Load(strs)
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range inputs {
		if !slices.Equal(base.Encode(in), alt.Encode(in)) {
			t.Fatalf("%s: merges as strings give other ids", name)
		}
	}
	raw, err := os.ReadFile("testdata/qwen3-mini.tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	gzPath := filepath.Join(t.TempDir(), "tokenizer.json.gz")
	if err := os.WriteFile(gzPath, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	zipped, err := Load(gzPath)
	if err != nil {
		t.Fatal(err)
	}
	if in := inputs["hermes-chat"]; !slices.Equal(base.Encode(in), zipped.Encode(in)) {
		t.Fatal("gzip-compressed tokenizer.json gives other ids")
	}
	if base.Name() != "qwen3-mini.tokenizer.json" {
		t.Errorf("Name() = %q", base.Name())
	}
}

func TestInvalidUTF8IsReplacementChar(t *testing.T) {
	for _, name := range []string{"cl100k_base", "o200k_base"} {
		tok := ours(t, name)
		for _, s := range []string{"a\xffb", "\xe2\x82A", "\xed\xa0\x80x", "ok \xc3"} {
			got := tok.Encode(s)
			ref := tok.Encode(sanitizeUTF8(s))
			if !slices.Equal(got, ref) {
				t.Errorf("%s %q: %v, want %v", name, s, got, ref)
			}
			if sanitizeUTF8(s) == s {
				t.Errorf("%q was not sanitized", s)
			}
		}
		if got, want := sanitizeUTF8("a\xe2\x82b"), "a\uFFFD\uFFFDb"; got != want {
			t.Errorf("sanitize: %q, want %q (one U+FFFD per byte)", got, want)
		}
	}
}

// FuzzSplitterMatchesRegex compares every hand-written pre-tokenizer with
// the regex translation of its pattern (lookahead emulated) on arbitrary
// strings; the seeds cover CJK, emoji, combining marks, digit runs,
// contractions, white-space runs and line breaks. Run it longer with
// go test -fuzz FuzzSplitterMatchesRegex ./stages/tokenizer/.
func FuzzSplitterMatchesRegex(f *testing.F) {
	pats := []string{patCL100K, patQwen2, patO200K, patKimi}
	type pair struct {
		fast splitter
		re   *lookRegex
	}
	var impls []pair
	for _, pat := range pats {
		re, err := compileLook(pat)
		if err != nil {
			f.Fatal(err)
		}
		impls = append(impls, pair{knownSplitter(pat), re})
	}
	for _, s := range []string{
		"Hello world's  \n\n  x 12345 don't 你好 😀",
		"I'LL we'Re they'VE it'S 's 'll'd'm't",
		"日本語のテキスト，中文。한국어 텍스트",
		"e\u0301 a\u0308\u0301 \u0301\u0301x Ωmega ǅungla ʰʰa",
		"1234567890 ١٢٣٤ ²³ ½ Ⅻ 𝟘𝟙𝟚",
		"👍🏽👨‍👩‍👧 🇫🇷 x😀y",
		"   \t\t  \n\r\n \u00a0\u3000x  \n  y\n\n\n   ",
		"foo/bar//baz /// x\r\n/\n",
		"CamelCaseWord HTTPServer iPhone ÉCOLE école",
		"\u2028\u0085\v\f a",
	} {
		f.Add(s)
	}
	r := rand.New(rand.NewPCG(13, 13))
	for range 20 {
		f.Add(randomText(r, 40))
	}
	f.Fuzz(func(t *testing.T, s string) {
		s = sanitizeUTF8(s)
		for k, im := range impls {
			want := splitIsolated(s, nil, im.re.find)
			var got []string
			for i := 0; i < len(s); {
				j := im.fast.next(s, i)
				if j <= i || j > len(s) {
					t.Fatalf("pattern %d: %q: next(%d) = %d", k, s, i, j)
				}
				got = append(got, s[i:j])
				i = j
			}
			if !slices.Equal(got, want) {
				t.Fatalf("pattern %d: %q:\nstate machine %q\nregex         %q", k, s, got, want)
			}
		}
	})
}
