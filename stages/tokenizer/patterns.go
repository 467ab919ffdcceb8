package tokenizer

import "strings"

// Pre-tokenizer regexes that have a hand-written state machine. A
// tokenizer.json whose Split pattern equals one of them byte for byte uses the
// state machine; any other pattern goes through the regex translation.
const (
	// patCL100K is tiktoken's cl100k_base pattern; Llama 3 uses it verbatim.
	patCL100K = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patQwen2 is the Qwen2, Qwen2.5 and Qwen3 pattern: single digits.
	patQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// patO200K is tiktoken's o200k_base pattern.
var patO200K = strings.Join([]string{
	`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
	`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
	`\p{N}{1,3}`,
	` ?[^\s\p{L}\p{N}]+[\r\n/]*`,
	`\s*[\r\n]+`,
	`\s+(?!\S)`,
	`\s+`,
}, "|")

// patKimi is the Kimi K2 pattern: Han runs first, and the letter classes
// intersected with "not Han" (a Rust/Oniguruma class intersection).
var patKimi = strings.Join([]string{
	`[\p{Han}]+`,
	`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
	`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
	`\p{N}{1,3}`,
	` ?[^\s\p{L}\p{N}]+[\r\n]*`,
	`\s*[\r\n]+`,
	`\s+(?!\S)`,
	`\s+`,
}, "|")

// knownSplitter returns the state machine for a known pattern, or nil.
func knownSplitter(pattern string) splitter {
	tab := bmpClasses()
	switch pattern {
	case patCL100K:
		return &clSplitter{tab: tab, maxDigits: 3}
	case patQwen2:
		return &clSplitter{tab: tab, maxDigits: 1}
	case patO200K:
		return &o200kSplitter{tab: tab}
	case patKimi:
		return &o200kSplitter{tab: tab, han: true}
	}
	return nil
}
