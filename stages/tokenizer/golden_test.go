package tokenizer

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The golden files are written by scripts/tokenizer-golden.mjs from the
// reference implementations (npm tiktoken, Hugging Face tokenizers).

type goldenCase struct {
	Name string  `json:"name"`
	Text *string `json:"text"`
	Hex  *string `json:"hex"`
	IDs  []int   `json:"ids"`
}

type goldenFile struct {
	Tokenizer string       `json:"tokenizer"`
	Cases     []goldenCase `json:"cases"`
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// corpus returns the golden inputs by name, as the Go side sees them (hex
// cases as raw, possibly invalid, bytes).
func corpus(t testing.TB) ([]string, map[string]string) {
	var c goldenFile
	readJSON(t, "testdata/corpus.json", &c)
	var names []string
	m := map[string]string{}
	for _, gc := range c.Cases {
		switch {
		case gc.Text != nil:
			m[gc.Name] = *gc.Text
		case gc.Hex != nil:
			b, err := hex.DecodeString(*gc.Hex)
			if err != nil {
				t.Fatal(err)
			}
			m[gc.Name] = string(b)
		}
		names = append(names, gc.Name)
	}
	if len(names) < 30 {
		t.Fatalf("corpus has only %d cases", len(names))
	}
	return names, m
}

var goldenTokenizers = []string{
	"cl100k_base", "o200k_base",
	"qwen3-mini", "llama3-mini", "kimi-mini", "o200k-mini", "deepseek-style-mini", "gpt2-style-mini",
}

func loadByGoldenName(t testing.TB, name string) Tokenizer {
	t.Helper()
	path := name
	if !strings.HasSuffix(name, "_base") {
		path = filepath.Join("testdata", name+".tokenizer.json")
	}
	tok, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestGolden(t *testing.T) {
	_, inputs := corpus(t)
	for _, name := range goldenTokenizers {
		t.Run(name, func(t *testing.T) {
			tok := loadByGoldenName(t, name)
			var g goldenFile
			readJSON(t, filepath.Join("testdata", "golden", name+".json"), &g)
			if len(g.Cases) != len(inputs) {
				t.Fatalf("golden has %d cases, corpus %d: regenerate with scripts/tokenizer-golden.mjs", len(g.Cases), len(inputs))
			}
			checkCases(t, tok, g.Cases, inputs)
		})
	}
}

func checkCases(t *testing.T, tok Tokenizer, cases []goldenCase, inputs map[string]string) {
	t.Helper()
	for _, gc := range cases {
		in, ok := inputs[gc.Name]
		if !ok {
			t.Fatalf("case %s not in corpus", gc.Name)
		}
		got := tok.Encode(in)
		if !slices.Equal(got, gc.IDs) {
			t.Errorf("%s: ids differ from the reference\n got %v\nwant %v", gc.Name, got, gc.IDs)
			continue
		}
		if n := tok.Count(in); n != len(gc.IDs) {
			t.Errorf("%s: Count = %d, want %d", gc.Name, n, len(gc.IDs))
		}
	}
}

// TestGoldenFullVocab checks the full Qwen3 and Llama 3 tokenizer.json files
// (too large to commit). scripts/tokenizer-golden.mjs --full runs it with
// TOKENIZER_FULL_GOLDEN set to the folder holding their golden ids.
func TestGoldenFullVocab(t *testing.T) {
	dir := os.Getenv("TOKENIZER_FULL_GOLDEN")
	if dir == "" {
		t.Skip("TOKENIZER_FULL_GOLDEN not set (run scripts/tokenizer-golden.mjs --full)")
	}
	_, inputs := corpus(t)
	for _, name := range []string{"qwen3", "llama3"} {
		t.Run(name, func(t *testing.T) {
			var g goldenFile
			readJSON(t, filepath.Join(dir, name+".json"), &g)
			tok, err := Load(g.Tokenizer)
			if err != nil {
				t.Fatal(err)
			}
			checkCases(t, tok, g.Cases, inputs)
		})
	}
}
