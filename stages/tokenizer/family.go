package tokenizer

import (
	"path/filepath"
	"strings"
)

// Family names the tokenizer family of t: cl100k, o200k, llama3, kimi, qwen,
// deepseek, or "" when it cannot tell. Built-in encodings know theirs; a
// tiktoken-format file is judged by its number of ranks, then by its file
// name; a tokenizer.json by its split pattern, then by its file name.
func Family(t Tokenizer) string {
	e, ok := t.(*encoder)
	if !ok {
		return ""
	}
	if e.family != "" || e.fixedFamily {
		return e.family
	}
	if sp, ok := e.split.(*clSplitter); ok {
		if sp.maxDigits == 1 {
			return "qwen"
		}
		return "llama3"
	}
	if sp, ok := e.split.(*o200kSplitter); ok && sp.han {
		return "kimi"
	}
	return nameFamily(e.name)
}

// ModelFamily names the tokenizer family a model name implies, or "" when
// it cannot tell.
func ModelFamily(model string) string {
	m := strings.ToLower(model)
	switch {
	case strings.Contains(m, "kimi") || strings.Contains(m, "moonshot"):
		return "kimi"
	case strings.Contains(m, "qwen") || strings.Contains(m, "qwq"):
		return "qwen"
	case strings.Contains(m, "deepseek"):
		return "deepseek"
	case strings.Contains(m, "llama-3") || strings.Contains(m, "llama3") || strings.Contains(m, "llama-v3") || strings.Contains(m, "hermes-3"):
		return "llama3"
	}
	base := m[strings.LastIndexByte(m, '/')+1:]
	switch {
	case strings.HasPrefix(base, "gpt-4o") || strings.HasPrefix(base, "gpt-4.1") || strings.HasPrefix(base, "gpt-4.5") ||
		strings.HasPrefix(base, "gpt-5") || strings.HasPrefix(base, "o1") || strings.HasPrefix(base, "o3") ||
		strings.HasPrefix(base, "o4") || strings.HasPrefix(base, "gpt-oss"):
		return "o200k"
	case strings.HasPrefix(base, "gpt-4") || strings.HasPrefix(base, "gpt-3.5"):
		return "cl100k"
	}
	return ""
}

// nameFamily guesses a family from a tokenizer file's name.
func nameFamily(name string) string {
	n := strings.ToLower(filepath.Base(name))
	for _, f := range []string{"kimi", "qwen", "deepseek", "llama3"} {
		if strings.Contains(n, f) {
			return f
		}
	}
	if strings.Contains(n, "llama-3") {
		return "llama3"
	}
	return ""
}
