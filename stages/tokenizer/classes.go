package tokenizer

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// Character classes used by the pre-tokenizers, as bits of one byte.
const (
	clL   = 1 << iota // \p{L}
	clN               // \p{N}
	clWS              // \s (Unicode White_Space)
	clU               // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	clW               // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
	clHan             // \p{Han}
	clNL              // \r or \n
)

// whiteSpace is the Unicode White_Space property, which is what \s means in
// the Rust regex engines that tiktoken and Hugging Face tokenizers use.
var whiteSpace = unicode.White_Space

// bmpClasses maps every rune of the Basic Multilingual Plane to its class
// bits. It is built on first use (about a millisecond) and shared.
var bmpClasses = sync.OnceValue(func() *[0x10000]uint8 {
	var t [0x10000]uint8
	set := func(tab *unicode.RangeTable, bit uint8) {
		for _, r := range tab.R16 {
			for c := int(r.Lo); c <= int(r.Hi); c += int(r.Stride) {
				t[c] |= bit
			}
		}
	}
	set(unicode.L, clL)
	set(unicode.N, clN)
	set(whiteSpace, clWS)
	for _, tab := range []*unicode.RangeTable{unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M} {
		set(tab, clU)
	}
	for _, tab := range []*unicode.RangeTable{unicode.Ll, unicode.Lm, unicode.Lo, unicode.M} {
		set(tab, clW)
	}
	set(unicode.Han, clHan)
	t['\r'] |= clNL
	t['\n'] |= clNL
	return &t
})

// classOf returns the class bits of r. Runes outside the BMP are looked up
// in the unicode tables (binary searches); they are rare in practice.
func classOf(tab *[0x10000]uint8, r rune) uint8 {
	if r < 0x10000 {
		return tab[r]
	}
	var c uint8
	if unicode.Is(unicode.L, r) {
		c |= clL
		if unicode.Is(unicode.Ll, r) {
			c |= clW
		} else if unicode.Is(unicode.Lm, r) || unicode.Is(unicode.Lo, r) {
			c |= clU | clW
		} else {
			c |= clU // Lu, Lt
		}
		if unicode.Is(unicode.Han, r) {
			c |= clHan
		}
	} else if unicode.Is(unicode.N, r) {
		c |= clN
	} else if unicode.Is(unicode.M, r) {
		c |= clU | clW
	}
	return c
}

// decodeAt returns the rune at s[i], its class and its width. Callers
// guarantee s is valid UTF-8, so a RuneError here is a real U+FFFD.
func decodeAt(tab *[0x10000]uint8, s string, i int) (rune, uint8, int) {
	b := s[i]
	if b < utf8.RuneSelf {
		return rune(b), tab[b], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	return r, classOf(tab, r), w
}

// sanitizeUTF8 returns s with every byte that does not start a valid UTF-8
// sequence replaced by U+FFFD, one replacement per byte (the rule of Go's
// range loop). Valid input is returned as is without copying.
func sanitizeUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	out := make([]byte, 0, len(s)+16)
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && w == 1 {
			out = append(out, "\uFFFD"...)
		} else {
			out = append(out, s[i:i+w]...)
		}
		i += w
	}
	return string(out)
}
