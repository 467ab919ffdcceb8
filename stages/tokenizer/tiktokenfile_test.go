package tokenizer

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	loader "github.com/pkoukk/tiktoken-go-loader"
)

// writeTiktokenFile writes an embedded encoding's ranks out as a
// tiktoken-format file, the form Kimi K2 and Llama 3 ship.
func writeTiktokenFile(t testing.TB, encoding, path string) {
	t.Helper()
	writeTiktokenRanks(t, encoding, path, -1)
}

// writeTiktokenRanks writes the first n ranks (all when n < 0) and returns
// the file's SHA-256.
func writeTiktokenRanks(t testing.TB, encoding, path string, n int) string {
	t.Helper()
	ranks, err := loader.NewOfflineLoader().LoadTiktokenBpe(encoding + ".tiktoken")
	if err != nil {
		t.Fatal(err)
	}
	toks := make([]string, 0, len(ranks))
	for tok := range ranks {
		toks = append(toks, tok)
	}
	slices.SortFunc(toks, func(a, b string) int { return ranks[a] - ranks[b] })
	if n >= 0 {
		toks = toks[:n]
	}
	var b strings.Builder
	for _, tok := range toks {
		b.WriteString(base64.StdEncoding.EncodeToString([]byte(tok)))
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(ranks[tok]))
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return sha([]byte(b.String()))
}

// kimiSpecial matches KIMI_SPECIAL in scripts/tokenizer-golden.mjs.
var kimiSpecial = map[string]int{
	"[BOS]": 200000, "[EOS]": 200001, "<|im_end|>": 200002, "<|im_user|>": 200003,
	"<|im_assistant|>": 200004, "<|im_system|>": 200005, "<|im_middle|>": 200006, "<|im_start|>": 200007,
}

// TestGoldenTiktokenFiles: ids from tiktoken-format files equal npm
// tiktoken's for the same ranks, split pattern and special tokens.
func TestGoldenTiktokenFiles(t *testing.T) {
	_, inputs := corpus(t)
	dir := t.TempDir()

	// cl100k ranks as a user's file: the family (recognised by the rank
	// count) gives the pattern and the special tokens.
	cl := filepath.Join(dir, "cl", "cl100k_base.tiktoken")
	os.MkdirAll(filepath.Dir(cl), 0o755)
	writeTiktokenFile(t, "cl100k_base", cl)
	tok, err := Load(cl)
	if err != nil {
		t.Fatal(err)
	}
	if Family(tok) != "cl100k" {
		t.Errorf("family %q, want cl100k", Family(tok))
	}
	var g goldenFile
	readJSON(t, filepath.Join("testdata", "golden", "cl100k-file.json"), &g)
	checkCases(t, tok, g.Cases, inputs)

	// o200k ranks named tiktoken.model with the Kimi K2 pattern, special
	// tokens named by a tokenizer_config.json beside it.
	km := filepath.Join(dir, "kimi", "tiktoken.model")
	os.MkdirAll(filepath.Dir(km), 0o755)
	writeTiktokenFile(t, "o200k_base", km)
	added := map[string]map[string]any{}
	for s, id := range kimiSpecial {
		added[strconv.Itoa(id)] = map[string]any{"content": s, "special": true}
	}
	cfg, _ := json.Marshal(map[string]any{"added_tokens_decoder": added})
	if err := os.WriteFile(filepath.Join(filepath.Dir(km), "tokenizer_config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if !isTiktokenFile(km) {
		t.Fatal("tiktoken.model not recognised as a tiktoken-format file")
	}
	tok, err = LoadTiktokenFile(km, TiktokenSpec{Pattern: "kimi"})
	if err != nil {
		t.Fatal(err)
	}
	readJSON(t, filepath.Join("testdata", "golden", "kimi-pattern-file.json"), &g)
	checkCases(t, tok, g.Cases, inputs)
	if got := tok.Encode("<|im_user|>hi<|endoftext|>"); len(got) != 3 || got[0] != 200003 || got[2] != 199999 {
		t.Errorf("special tokens: %v", got)
	}
}

func TestTiktokenFileErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var small strings.Builder
	for b := range 256 {
		small.WriteString(base64.StdEncoding.EncodeToString([]byte{byte(b)}) + " " + strconv.Itoa(b) + "\n")
	}
	cases := []struct{ path, want string }{
		{write("bad.tiktoken", "not base64!! 1\n"), "line 1"},
		{write("rank.tiktoken", "YQ== x\n"), "rank"},
		{write("empty.tiktoken", "\n"), "no ranks"},
		{write("nobytes.tiktoken", "YQ== 0\n"), "match no known family"},
		{write("unknown.tiktoken", small.String()), "give the split pattern"},
	}
	for _, c := range cases {
		if _, err := Load(c.path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", filepath.Base(c.path), err, c.want)
		}
	}
	// With a pattern, a file of no known family loads and splits as told.
	tok, err := LoadTiktokenFile(filepath.Join(dir, "unknown.tiktoken"), TiktokenSpec{Pattern: `\S+|\s+`, Special: map[string]int{"<s>": 256}})
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("ab <s>"); !slices.Equal(got, []int{'a', 'b', ' ', 256}) {
		t.Errorf("ids %v", got)
	}
}

func TestFamilies(t *testing.T) {
	for model, want := range map[string]string{
		"moonshotai/Kimi-K2-Instruct": "kimi", "Qwen/Qwen3-8B": "qwen", "meta-llama/Llama-3.1-8B-Instruct": "llama3",
		"gpt-4o-mini": "o200k", "openai/gpt-4-turbo": "cl100k", "gpt-5": "o200k", "deepseek-chat": "deepseek", "my-model": "",
	} {
		if got := ModelFamily(model); got != want {
			t.Errorf("ModelFamily(%q) = %q, want %q", model, got, want)
		}
	}
	for _, name := range []string{"cl100k_base", "o200k_base"} {
		tok, err := Load(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := Family(tok); got != strings.TrimSuffix(name, "_base") {
			t.Errorf("Family(%s) = %q", name, got)
		}
	}
	for file, want := range map[string]string{"qwen3-mini": "qwen", "llama3-mini": "llama3", "kimi-mini": "kimi"} {
		if got := Family(loadByGoldenName(t, file)); got != want {
			t.Errorf("Family(%s) = %q, want %q", file, got, want)
		}
	}
}

// cutSpecial matches CUT_SPECIAL in scripts/tokenizer-golden.mjs.
var cutSpecial = map[string]int{"<|endoftext|>": 30000, "<|im_start|>": 30001, "<|im_end|>": 30002}

// TestGoldenTiktokenCutFile: the first 30,000 ranks of cl100k_base as a
// .tiktoken file match no family by their count; loaded with the cl100k
// pattern (--tokenizer-pattern cl100k) and the special tokens of a
// tokenizer_config.json beside it, they give npm tiktoken's ids for the same
// file, pattern and special tokens.
func TestGoldenTiktokenCutFile(t *testing.T) {
	_, inputs := corpus(t)
	var g struct {
		goldenFile
		SHA256 string `json:"sha256"`
	}
	readJSON(t, filepath.Join("testdata", "golden", "cl100k-30k-file.json"), &g)
	path := filepath.Join(t.TempDir(), "cut.tiktoken")
	if sum := writeTiktokenRanks(t, "cl100k_base", path, 30000); sum != g.SHA256 {
		t.Fatalf("the cut file has SHA-256 %s, the golden was made from %s", sum, g.SHA256)
	}
	added := map[string]map[string]any{}
	for s, id := range cutSpecial {
		added[strconv.Itoa(id)] = map[string]any{"content": s, "special": true}
	}
	cfg, _ := json.Marshal(map[string]any{"added_tokens_decoder": added})
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "tokenizer_config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}

	_, err := Load(path)
	if !errors.Is(err, ErrNoPattern) || !strings.Contains(err.Error(), "30000 ranks") || !strings.Contains(err.Error(), path) {
		t.Fatalf("without a pattern: %v, want ErrNoPattern naming the file and the rank count", err)
	}
	tok, err := LoadWith(path, TiktokenSpec{Pattern: "cl100k"})
	if err != nil {
		t.Fatal(err)
	}
	if f := Family(tok); f != "" {
		t.Errorf("Family = %q: a cut file is of no known family, whatever its pattern", f)
	}
	checkCases(t, tok, g.Cases, inputs)
	if got := tok.Encode("<|im_start|>hi<|im_end|>"); len(got) != 3 || got[0] != 30001 || got[2] != 30002 {
		t.Errorf("special tokens of tokenizer_config.json: %v", got)
	}
	// The same pattern given as a regex, and by another name of it.
	for _, pat := range []string{patCL100K, "llama3"} {
		tok2, err := LoadWith(path, TiktokenSpec{Pattern: pat})
		if err != nil {
			t.Fatal(err)
		}
		in := inputs["random-4"]
		if !slices.Equal(tok2.Encode(in), tok.Encode(in)) {
			t.Errorf("pattern %.20q gives other ids than cl100k", pat)
		}
	}
}

func TestLoadWithPatternErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cut.tiktoken")
	writeTiktokenRanks(t, "cl100k_base", path, 1000)
	cases := []struct {
		name, pattern, want string
	}{
		{path, "cl100", "no known name (cl100k, o200k, llama3, kimi, qwen)"},
		{path, `(?<=a)b`, "split pattern"},
		{"cl100k_base", "cl100k", "only to tiktoken-format files"},
		{filepath.Join("testdata", "qwen3-mini.tokenizer.json"), "qwen", "only to tiktoken-format files"},
	}
	for _, c := range cases {
		_, err := LoadWith(c.name, TiktokenSpec{Pattern: c.pattern})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("LoadWith(%s, %q): %v, want an error naming it with %q", filepath.Base(c.name), c.pattern, err, c.want)
		}
	}
	for _, name := range PatternNames() {
		if _, err := LoadWith(path, TiktokenSpec{Pattern: name}); err != nil {
			t.Errorf("pattern %s: %v", name, err)
		}
	}
}

// TestTiktokenConfigSpecial: a hand-written tokenizer_config.json beside a
// tiktoken-format file of no known family names its special tokens; each
// counts as one token wherever it stands (tiktoken's allowed_special="all"),
// special or not, and a file that misnames them is refused naming the entry.
func TestTiktokenConfigSpecial(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cut.tiktoken")
	writeTiktokenRanks(t, "cl100k_base", path, 1000)
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(cfgPath, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plain, err := LoadWith(path, TiktokenSpec{Pattern: "cl100k"})
	if err != nil {
		t.Fatal(err)
	}
	write(`{
  "add_bos_token": false,
  "added_tokens_decoder": {
    "1000": {"content": "<|im_start|>", "lstrip": false, "normalized": false, "rstrip": false, "single_word": false, "special": true},
    "1001": {"content": "<|im_end|>", "lstrip": false, "normalized": false, "rstrip": false, "single_word": false, "special": true},
    "1002": {"content": "<think>", "lstrip": false, "normalized": false, "rstrip": false, "single_word": false, "special": false}
  },
  "bos_token": null,
  "eos_token": "<|im_end|>",
  "model_max_length": 32768
}`)
	tok, err := LoadWith(path, TiktokenSpec{Pattern: "cl100k"})
	if err != nil {
		t.Fatal(err)
	}
	text := "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>ok</think><|im_end|>"
	ids := tok.Encode(text)
	want := []int{1000}
	want = append(want, plain.Encode("user\nhi")...)
	want = append(want, 1001)
	want = append(want, plain.Encode("\n")...)
	want = append(want, 1000)
	want = append(want, plain.Encode("assistant\n")...)
	want = append(want, 1002)
	want = append(want, plain.Encode("ok</think>")...)
	want = append(want, 1001)
	if !slices.Equal(ids, want) {
		t.Errorf("ids %v, want %v", ids, want)
	}
	if n, m := tok.Count(text), plain.Count(text); n != len(want) || m <= n+10 {
		t.Errorf("Count %d (want %d); without the config %d", n, len(want), m)
	}
	// Given special tokens replace the config's.
	given, err := LoadWith(path, TiktokenSpec{Pattern: "cl100k", Special: map[string]int{"<|im_end|>": 1500}})
	if err != nil {
		t.Fatal(err)
	}
	if got := given.Encode("<|im_start|><|im_end|>"); slices.Contains(got, 1000) || got[len(got)-1] != 1500 {
		t.Errorf("with Special given: %v", got)
	}

	for _, c := range []struct{ cfg, want string }{
		{"{\n  \"added_tokens_decoder\": {\n    \"1000\": {\"content\": \"<a>\",}\n  }\n}", "line 3"},
		{"{\"added_tokens_decoder\": {\n\"1000\": {\"content\": 7}}}", "line 2: field added_tokens_decoder.content"},
		{`{"added_tokens_decoder": {"x": {"content": "<a>"}}}`, `key "x" is not a token id`},
		{`{"added_tokens_decoder": {"-3": {"content": "<a>"}}}`, `key "-3" is not a token id`},
		{`{"added_tokens_decoder": {"1000": {"special": true}}}`, "added_tokens_decoder.1000.content: missing or empty"},
		{`{"added_tokens_decoder": {"1000": {"content": "<a>"}, "1003": {"content": "<a>"}}}`, `"<a>" is the content of ids 1000 and 1003`},
	} {
		write(c.cfg)
		_, err := LoadWith(path, TiktokenSpec{Pattern: "cl100k"})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), cfgPath) {
			t.Errorf("config %s: %v, want an error naming %s with %q", c.cfg, err, cfgPath, c.want)
		}
	}
}
