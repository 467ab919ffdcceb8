// Package tokenizer counts and encodes tokens exactly as the reference
// tokenizers do, offline: OpenAI's cl100k_base and o200k_base (the same ids as
// the official tiktoken), tiktoken-format BPE files (*.tiktoken, Kimi K2's
// tiktoken.model, Llama 3's tokenizer.model; the same ids as tiktoken with
// their split pattern and special tokens) and Hugging Face byte-level BPE
// tokenizer.json files (Qwen2/2.5/3, Llama 3, Kimi and GPT-2 style; the same
// ids as Hugging Face tokenizers).
//
// The compress stage and the `tokens` command call Load once and then Count or
// Encode from many goroutines. The hot path is hand-written: a pre-tokenizer
// state machine equivalent to each known split regex, and a byte-pair merge
// with a per-goroutine cache over flat tables sized for the CPU cache (token
// bytes held in their slot, packed pair slots, a Bloom filter of the pairs
// and a dense table of byte pairs). Patterns that are not known are translated to Go
// regular expressions (lookahead and class intersections emulated).
//
// Invalid UTF-8 is decided once for every tokenizer: each byte that does not
// start a valid UTF-8 sequence counts as U+FFFD, exactly like a Go range loop
// or []rune conversion. The references only ever see valid text, so the golden
// corpus feeds them the text after that replacement.
//
// The package must not import anything else from this repository: it is a
// leaf used by stages and commands.
package tokenizer
