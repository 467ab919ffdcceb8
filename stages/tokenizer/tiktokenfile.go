package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// TiktokenSpec completes a tiktoken-format BPE file, which holds only the
// ranks: the split pattern and the special tokens live in the code that
// ships with it. The zero value means "as the file's family has them" (see
// LoadTiktokenFile).
type TiktokenSpec struct {
	// Pattern is the split regex, or the name of a known one (see
	// PatternNames).
	Pattern string
	// Special maps special-token text to its id. They are matched in the
	// text before splitting, as tiktoken's encode(allowed_special="all")
	// and the Hugging Face wrappers of these files do.
	Special map[string]int
}

// Families of tiktoken-format files, recognised by their number of ranks.
var tiktokenFamilies = map[int]string{
	100256: "cl100k", // OpenAI cl100k_base
	199998: "o200k",  // OpenAI o200k_base
	128000: "llama3", // Llama 3, 3.1, 3.2, 3.3 tokenizer.model
	163584: "kimi",   // Kimi K2 tiktoken.model
}

// namedPatterns are the split patterns a TiktokenSpec may name. Llama 3
// uses cl100k's; Qwen2, Qwen2.5 and Qwen3 share one (cl100k's with single
// digits), also called qwen2.
var namedPatterns = map[string]string{
	"cl100k": patCL100K, "llama3": patCL100K, "o200k": patO200K, "kimi": patKimi, "qwen": patQwen2, "qwen2": patQwen2,
}

// PatternNames lists the names TiktokenSpec.Pattern accepts besides a regex.
func PatternNames() []string { return []string{"cl100k", "o200k", "llama3", "kimi", "qwen"} }

// ErrNoPattern is returned (wrapped) for a tiktoken-format file of no known
// family loaded without a split pattern.
var ErrNoPattern = errors.New("give the split pattern")

// familySpecial returns the special tokens a family defines in code, for
// the ids after its n ranks.
func familySpecial(family string, n int) map[string]int {
	switch family {
	case "cl100k":
		return map[string]int{"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
			"<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}
	case "o200k":
		return map[string]int{"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
	case "llama3":
		// Llama 3.1's list (3.0 named fewer of the reserved ids).
		names := []string{"<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
			"<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
			"<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"}
		for i := 3; len(names) < 256; i++ {
			names = append(names, "<|reserved_special_token_"+strconv.Itoa(i)+"|>")
		}
		m := make(map[string]int, len(names))
		for i, s := range names {
			m[s] = n + i
		}
		return m
	case "kimi":
		// Kimi names its specials in tokenizer_config.json; the ids it does
		// not name are reserved.
		m := make(map[string]int, 256)
		for i := n; i < n+256; i++ {
			m["<|reserved_token_"+strconv.Itoa(i)+"|>"] = i
		}
		return m
	}
	return nil
}

// LoadTiktokenFile loads a tiktoken-format BPE file (lines of "base64-token
// rank", as *.tiktoken files and the tiktoken.model / tokenizer.model of
// Kimi K2 and Llama 3). What spec leaves empty comes from the file's family,
// recognised by its number of ranks (cl100k, o200k, Llama 3, Kimi K2), and a
// tokenizer_config.json beside the file names special tokens by id
// ("added_tokens_decoder"), as the Hugging Face wrappers read it. A file of
// no known family needs spec.Pattern. It costs one read of the file and
// building the merge table (100–500 ms for a full vocabulary).
func LoadTiktokenFile(path string, spec TiktokenSpec) (Tokenizer, error) {
	ranks, err := readTiktokenRanks(path)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", path, err)
	}
	family := tiktokenFamilies[len(ranks)]
	pattern := spec.Pattern
	if p, ok := namedPatterns[pattern]; ok {
		pattern = p
	} else if isBareName(pattern) {
		return nil, fmt.Errorf("load tokenizer %s: split pattern %q is no known name (%s) and looks like none meant as a regex", path, pattern, strings.Join(PatternNames(), ", "))
	}
	if pattern == "" {
		if family == "" {
			return nil, fmt.Errorf("load tokenizer %s: %d ranks match no known family (cl100k %d, o200k %d, llama3 %d, kimi %d ranks): %w",
				path, len(ranks), 100256, 199998, 128000, 163584, ErrNoPattern)
		}
		pattern = namedPatterns[family]
	}
	special := spec.Special
	if special == nil {
		special = familySpecial(family, len(ranks))
		named, err := configSpecial(filepath.Join(filepath.Dir(path), "tokenizer_config.json"))
		if err != nil {
			return nil, fmt.Errorf("load tokenizer %s: %w", path, err)
		}
		if len(named) > 0 {
			if special == nil {
				special = map[string]int{}
			}
			for id, s := range named {
				for k, v := range special {
					if v == id {
						delete(special, k)
					}
				}
				special[s] = id
			}
		}
	}
	m, missing := tiktokenModel(ranks)
	if missing >= 0 {
		return nil, fmt.Errorf("load tokenizer %s: no one-byte token for byte %#x (not a byte-level BPE file)", path, missing)
	}
	if family == "" {
		family = nameFamily(path)
	}
	// The family is the file's, never guessed from the split pattern given.
	e := &encoder{name: displayName(path), model: m, family: family, fixedFamily: true}
	if e.split = knownSplitter(pattern); e.split == nil {
		re, err := compileLook(pattern)
		if err != nil {
			return nil, fmt.Errorf("load tokenizer %s: split pattern: %w", path, err)
		}
		e.pre = []preStep{&splitStep{behavior: "Isolated", re: re}}
	}
	if len(special) > 0 {
		toks := make([]hfAddedToken, 0, len(special))
		for s, id := range special {
			if s != "" {
				toks = append(toks, hfAddedToken{ID: id, Content: s, Special: true})
			}
		}
		sort.Slice(toks, func(i, j int) bool { return toks[i].ID < toks[j].ID })
		e.added = newAddedMatcher(toks)
	}
	return e, nil
}

// readTiktokenRanks reads the "base64 rank" lines of a tiktoken file.
func readTiktokenRanks(path string) (map[string]int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ranks := make(map[string]int, bytes.Count(data, []byte{'\n'})+1)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		tok, rank, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("line %d: want \"base64-token rank\"", n)
		}
		b, err := base64.StdEncoding.DecodeString(tok)
		if err != nil {
			return nil, fmt.Errorf("line %d: token: %w", n, err)
		}
		r, err := strconv.Atoi(strings.TrimSpace(rank))
		if err != nil || r < 0 || r > 1<<30 {
			return nil, fmt.Errorf("line %d: rank %q is not a small non-negative integer", n, rank)
		}
		if _, dup := ranks[string(b)]; dup {
			return nil, fmt.Errorf("line %d: token repeated", n)
		}
		ranks[string(b)] = r
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(ranks) == 0 {
		return nil, errors.New("no ranks: not a tiktoken-format file")
	}
	return ranks, nil
}

// configSpecial reads added_tokens_decoder ({"id": {"content": ...}}) from a
// tokenizer_config.json; a missing file gives none. Every entry counts,
// special or not, as the Hugging Face wrappers of tiktoken files match them
// all; an entry without content, an id that is no non-negative integer and
// one content under two ids are errors naming the entry.
func configSpecial(path string) (map[int]string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var cfg struct {
		Added map[string]struct {
			Content *string `json:"content"`
		} `json:"added_tokens_decoder"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return nil, fmt.Errorf("%s: line %d: %w", path, lineAt(data, syn.Offset), err)
		case errors.As(err, &typ):
			return nil, fmt.Errorf("%s: line %d: field %s: %w", path, lineAt(data, typ.Offset), typ.Field, err)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make(map[int]string, len(cfg.Added))
	byContent := make(map[string]int, len(cfg.Added))
	keys := make([]string, 0, len(cfg.Added))
	for k := range cfg.Added {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		id, err := strconv.Atoi(k)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("%s: added_tokens_decoder key %q is not a token id", path, k)
		}
		c := cfg.Added[k].Content
		if c == nil || *c == "" {
			return nil, fmt.Errorf("%s: added_tokens_decoder.%s.content: missing or empty", path, k)
		}
		if prev, dup := byContent[*c]; dup {
			return nil, fmt.Errorf("%s: added_tokens_decoder: %q is the content of ids %d and %d", path, *c, min(prev, id), max(prev, id))
		}
		byContent[*c] = id
		out[id] = *c
	}
	return out, nil
}

// lineAt is the 1-based line of byte offset off in data.
func lineAt(data []byte, off int64) int {
	off = min(max(off, 0), int64(len(data)))
	return bytes.Count(data[:off], []byte{'\n'}) + 1
}

// isTiktokenFile reports whether path names a tiktoken-format file by its
// name: *.tiktoken, or a *.model file whose first line is "base64 rank"
// (tiktoken.model, Llama 3's tokenizer.model; a SentencePiece .model is
// binary).
func isTiktokenFile(path string) bool {
	if strings.HasSuffix(path, ".tiktoken") {
		return true
	}
	if !strings.HasSuffix(path, ".model") {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	tok, rank, ok := strings.Cut(strings.TrimSpace(line), " ")
	if !ok {
		return false
	}
	_, errB := base64.StdEncoding.DecodeString(tok)
	_, errR := strconv.Atoi(rank)
	return errB == nil && errR == nil
}

// isBareName reports whether p is a plain word such as "cl100" or
// "qwen3": a misspelt pattern name rather than a split regex.
func isBareName(p string) bool {
	if p == "" {
		return false
	}
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}
