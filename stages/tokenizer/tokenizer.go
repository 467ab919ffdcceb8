package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Tokenizer encodes text into token ids. Implementations are safe for
// concurrent use by many goroutines; Encode and Count never block on each
// other (each goroutine gets its own scratch space and piece cache).
type Tokenizer interface {
	// Name is the name given to Load for built-in encodings, or the base
	// name of the tokenizer.json file.
	Name() string
	// Encode returns the token ids of s. Invalid UTF-8 bytes count as
	// U+FFFD each. Its cost is linear in len(s).
	Encode(s string) []int
	// Count returns len(Encode(s)) without building the id slice.
	Count(s string) int
}

// Load returns the tokenizer called nameOrPath: "cl100k_base" or
// "o200k_base" (tiktoken encodings, embedded, no network), the path of a
// tiktoken-format BPE file (*.tiktoken, tiktoken.model: see
// LoadTiktokenFile; LoadWith gives its split pattern), or the path of a
// Hugging Face tokenizer.json with a BPE model: byte-level (GPT-2, Llama 3,
// Qwen, Kimi, DeepSeek styles) or of the SentencePiece family (Llama 2,
// Gemma, Mistral: Metaspace or Prepend/Replace normalizers, byte_fallback).
// Callers load once
// and share the result: building the tables costs 100–500 ms and 20–100 MB.
//
// The built-in encodings treat special-token text such as <|endoftext|> as
// ordinary text (tiktoken's encode_ordinary); a tokenizer.json matches its
// added tokens first, as Hugging Face tokenizers does, and a tiktoken-format
// file its special tokens (tiktoken's allowed_special="all").
func Load(nameOrPath string) (Tokenizer, error) {
	return LoadWith(nameOrPath, TiktokenSpec{})
}

// LoadWith is Load with spec completing a tiktoken-format file (see
// LoadTiktokenFile). A spec with a pattern or special tokens is an error for
// anything else: built-in encodings and tokenizer.json files carry their own.
func LoadWith(nameOrPath string, spec TiktokenSpec) (Tokenizer, error) {
	custom := spec.Pattern != "" || spec.Special != nil
	switch nameOrPath {
	case "cl100k_base", "o200k_base":
		if custom {
			return nil, fmt.Errorf("load tokenizer %s: a split pattern or special tokens apply only to tiktoken-format files (*.tiktoken, tiktoken.model)", nameOrPath)
		}
		t, err := loadTiktoken(nameOrPath)
		if err != nil {
			return nil, fmt.Errorf("load tokenizer %s: %w", nameOrPath, err)
		}
		return t, nil
	}
	if _, err := os.Stat(nameOrPath); err != nil {
		if !strings.ContainsAny(nameOrPath, `/\`) && !strings.HasSuffix(nameOrPath, ".json") {
			return nil, fmt.Errorf("load tokenizer %q: not a built-in encoding (cl100k_base, o200k_base) and not a file: %w", nameOrPath, err)
		}
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	if isTiktokenFile(nameOrPath) {
		return LoadTiktokenFile(nameOrPath, spec)
	}
	if custom {
		return nil, fmt.Errorf("load tokenizer %s: a split pattern or special tokens apply only to tiktoken-format files (*.tiktoken, tiktoken.model); a tokenizer.json has its own", nameOrPath)
	}
	t, err := loadHF(nameOrPath)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", nameOrPath, err)
	}
	return t, nil
}

// encoder is the one Tokenizer implementation: optional added-token
// matching, optional normalization, pre-tokenization, byte-pair merging.
type encoder struct {
	name string
	// family is the tokenizer family when known (see Family); with
	// fixedFamily it is never guessed from the split.
	family      string
	fixedFamily bool
	model       *bpeModel
	// split is the fast pre-tokenizer; nil when pre is used.
	split splitter
	// pre is the general pre-tokenizer pipeline of a tokenizer.json.
	pre []preStep
	// normalize rewrites text segments before pre-tokenization (NFC…).
	normalize func(string) string
	// added matches added tokens in raw text (normalized: false) and in
	// normalized text (normalized: true); nil when there are none.
	added, addedNorm *addedMatcher
}

func (e *encoder) Name() string { return e.name }

func (e *encoder) Encode(s string) []int {
	sc := e.model.getScratch()
	out := make([]int, 0, len(s)/4+4)
	out, _ = e.run(sanitizeUTF8(s), out, sc, false)
	e.model.putScratch(sc)
	return out
}

func (e *encoder) Count(s string) int {
	sc := e.model.getScratch()
	buf, n := e.run(sanitizeUTF8(s), sc.buf[:0], sc, true)
	sc.buf = buf[:0]
	e.model.putScratch(sc)
	return n
}

// run encodes s. With countOnly the ids are dropped after each piece and
// only their number is kept; the returned slice is then scratch.
func (e *encoder) run(s string, out []int, sc *scratch, countOnly bool) ([]int, int) {
	total := 0
	if e.added == nil {
		out, total = e.runNormalized(s, true, out, sc, countOnly, total)
		return out, total + len(out)
	}
	e.added.split(s, func(text string, at, id int) {
		if id >= 0 {
			out = append(out, id)
		} else {
			out, total = e.runNormalized(text, at == 0, out, sc, countOnly, total)
		}
	})
	return out, total + len(out)
}

// runNormalized encodes a segment between added tokens; first says it
// starts the input.
func (e *encoder) runNormalized(s string, first bool, out []int, sc *scratch, countOnly bool, total int) ([]int, int) {
	if e.normalize != nil {
		s = e.normalize(s)
	}
	if e.addedNorm == nil {
		return e.runPieces(s, first, out, sc, countOnly, total)
	}
	e.addedNorm.split(s, func(text string, at, id int) {
		if id >= 0 {
			out = append(out, id)
		} else {
			out, total = e.runPieces(text, first && at == 0, out, sc, countOnly, total)
		}
	})
	return out, total
}

// runPieces pre-tokenizes s and merges every piece.
func (e *encoder) runPieces(s string, first bool, out []int, sc *scratch, countOnly bool, total int) ([]int, int) {
	m := e.model
	if e.split != nil {
		for i := 0; i < len(s); {
			j := e.split.next(s, i)
			out = m.encodePiece(s[i:j], out, sc)
			if countOnly && len(out) > 1024 {
				total += len(out)
				out = out[:0]
			}
			i = j
		}
		return out, total
	}
	for _, p := range runPre(e.pre, s, first) {
		out = m.encodePiece(p, out, sc)
		if countOnly && len(out) > 1024 {
			total += len(out)
			out = out[:0]
		}
	}
	return out, total
}

// displayName is the name a tokenizer loaded from path reports.
func displayName(path string) string { return filepath.Base(path) }
