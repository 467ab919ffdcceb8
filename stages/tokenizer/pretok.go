package tokenizer

// Hand-written pre-tokenizers. Each one returns, for a position i in a valid
// UTF-8 string, the end of the piece that the corresponding regex (leftmost
// first, greedy, with backtracking) matches at i. They never allocate.
//
// The regexes they are equivalent to are listed in patterns.go.

// splitter finds the end of the pre-tokenizer piece starting at i (i < len(s)).
type splitter interface {
	next(s string, i int) int
}

// clSplitter implements the cl100k_base family:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// with D = maxDigits (3 for cl100k_base and Llama 3, 1 for Qwen2).
type clSplitter struct {
	tab       *[0x10000]uint8
	maxDigits int
}

func (p *clSplitter) next(s string, i int) int {
	tab := p.tab
	n := len(s)
	c, cls, w := decodeAt(tab, s, i)
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if c == '\'' {
		if k := contraction(s, i+1); k > 0 {
			return i + 1 + k
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if cls&clL != 0 {
		return scanClass(tab, s, i+w, clL)
	}
	if cls&(clN|clNL) == 0 && i+w < n {
		if _, c2, w2 := decodeAt(tab, s, i+w); c2&clL != 0 {
			return scanClass(tab, s, i+w+w2, clL)
		}
	}
	// \p{N}{1,D}
	if cls&clN != 0 {
		return scanDigits(tab, s, i+w, p.maxDigits-1)
	}
	if j := punctRun(tab, s, i, c, cls, false); j > 0 {
		return j
	}
	return whitespaceRun(tab, s, i, w)
}

// o200kSplitter implements the o200k_base pattern and, with han set, the
// Kimi K2 pattern:
//
//	[\p{Han}]+   (Kimi only)
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	\p{N}{1,3}
//	 ?[^\s\p{L}\p{N}]+[\r\n/]*   (Kimi: [\r\n]*)
//	\s*[\r\n]+
//	\s+(?!\S)
//	\s+
//
// For Kimi the upper and lower classes exclude \p{Han} (&&[^\p{Han}]).
type o200kSplitter struct {
	tab *[0x10000]uint8
	han bool
}

func (p *o200kSplitter) next(s string, i int) int {
	tab := p.tab
	n := len(s)
	c, cls, w := decodeAt(tab, s, i)
	var up, lo uint8 = clU, clW
	if p.han {
		if cls&clHan != 0 {
			return scanClass(tab, s, i+w, clHan)
		}
		up, lo = clU|clHan, clW|clHan
	}
	prefix := cls&(clL|clN|clNL) == 0 && i+w < n
	if prefix {
		if j := p.upperLower(s, i+w, up, lo); j > 0 {
			return j
		}
	}
	if j := p.upperLower(s, i, up, lo); j > 0 {
		return j
	}
	if prefix {
		if j := p.upperThenLower(s, i+w, up, lo); j > 0 {
			return j
		}
	}
	if j := p.upperThenLower(s, i, up, lo); j > 0 {
		return j
	}
	if cls&clN != 0 {
		return scanDigits(tab, s, i+w, 2)
	}
	if j := punctRun(tab, s, i, c, cls, !p.han); j > 0 {
		return j
	}
	return whitespaceRun(tab, s, i, w)
}

// inClass reports whether class bits c belong to the class described by
// want: for want == clU|clHan it means "upper and not Han" (Kimi's
// intersection), otherwise "any bit of want".
func inClass(c, want uint8) bool {
	if want&clHan != 0 {
		return c&want&^clHan != 0 && c&clHan == 0
	}
	return c&want != 0
}

// upperLower matches [UP]*[LO]+C? at p and returns its end, or 0.
func (p *o200kSplitter) upperLower(s string, pos int, up, lo uint8) int {
	tab := p.tab
	n := len(s)
	u := pos
	lastLoEnd := 0
	for u < n {
		_, c, w := decodeAt(tab, s, u)
		if !inClass(c, up) {
			break
		}
		u += w
		if inClass(c, lo) {
			lastLoEnd = u
		}
	}
	if u < n {
		if _, c, w := decodeAt(tab, s, u); inClass(c, lo) {
			e := u + w
			for e < n {
				_, c2, w2 := decodeAt(tab, s, e)
				if !inClass(c2, lo) {
					break
				}
				e += w2
			}
			return e + contraction1(s, e)
		}
	}
	if lastLoEnd > 0 {
		// Backtrack the greedy upper run to its last char that is also lower.
		return lastLoEnd + contraction1(s, lastLoEnd)
	}
	return 0
}

// upperThenLower matches [UP]+[LO]*C? at p and returns its end, or 0.
func (p *o200kSplitter) upperThenLower(s string, pos int, up, lo uint8) int {
	tab := p.tab
	n := len(s)
	u := pos
	for u < n {
		_, c, w := decodeAt(tab, s, u)
		if !inClass(c, up) {
			break
		}
		u += w
	}
	if u == pos {
		return 0
	}
	for u < n {
		_, c, w := decodeAt(tab, s, u)
		if !inClass(c, lo) {
			break
		}
		u += w
	}
	return u + contraction1(s, u)
}

// contraction1 returns the length of (?i:'s|'t|'re|'ve|'m|'ll|'d) at s[i:],
// or 0.
func contraction1(s string, i int) int {
	if i < len(s) && s[i] == '\'' {
		if k := contraction(s, i+1); k > 0 {
			return 1 + k
		}
	}
	return 0
}

// contraction returns the length of the letters of a contraction
// (?i:s|t|re|ve|m|ll|d) at s[i:], or 0. Case folding is Unicode's simple
// folding as in the Rust regex crate: s also matches U+017F (long s).
func contraction(s string, i int) int {
	if i >= len(s) {
		return 0
	}
	lower := func(b byte) byte { return b | 0x20 }
	switch lower(s[i]) {
	case 's', 't', 'm', 'd':
		if s[i] < 0x80 {
			return 1
		}
	case 'r', 'v':
		if i+1 < len(s) && lower(s[i+1]) == 'e' {
			return 2
		}
	case 'l':
		if i+1 < len(s) && lower(s[i+1]) == 'l' {
			return 2
		}
	}
	if s[i] == 0xC5 && i+1 < len(s) && s[i+1] == 0xBF { // U+017F
		return 2
	}
	return 0
}

// scanClass returns the end of the run of runes with any bit of cls
// starting at i.
func scanClass(tab *[0x10000]uint8, s string, i int, cls uint8) int {
	n := len(s)
	for i < n {
		b := s[i]
		if b < 0x80 {
			if tab[b]&cls == 0 {
				return i
			}
			i++
			continue
		}
		_, c, w := decodeAt(tab, s, i)
		if c&cls == 0 {
			return i
		}
		i += w
	}
	return i
}

// scanDigits consumes up to max more \p{N} runes from i.
func scanDigits(tab *[0x10000]uint8, s string, i, max int) int {
	for k := 0; k < max && i < len(s); k++ {
		_, c, w := decodeAt(tab, s, i)
		if c&clN == 0 {
			break
		}
		i += w
	}
	return i
}

// punctRun matches " ?[^\s\p{L}\p{N}]+[\r\n]*" (with slash: "[\r\n/]*") at
// i and returns its end, or 0 when it does not match.
func punctRun(tab *[0x10000]uint8, s string, i int, c rune, cls uint8, slash bool) int {
	const other = clL | clN | clWS
	n := len(s)
	j := i
	if c == ' ' {
		if i+1 >= n {
			return 0
		}
		if _, c2, _ := decodeAt(tab, s, i+1); c2&other != 0 {
			return 0
		}
		j = i + 1
	} else if cls&other != 0 {
		return 0
	}
	for j < n {
		_, c2, w := decodeAt(tab, s, j)
		if c2&other != 0 {
			break
		}
		j += w
	}
	for j < n && (s[j] == '\r' || s[j] == '\n' || (slash && s[j] == '/')) {
		j++
	}
	return j
}

// whitespaceRun handles the three whitespace alternatives
// \s*[\r\n]+|\s+(?!\S)|\s+ at i, where s[i] (width w) is white space.
func whitespaceRun(tab *[0x10000]uint8, s string, i, w int) int {
	n := len(s)
	lastNL := -1
	last := i
	j := i
	for j < n {
		b := s[j]
		if b < 0x80 {
			if tab[b]&clWS == 0 {
				break
			}
			if b == '\r' || b == '\n' {
				lastNL = j
			}
			last = j
			j++
			continue
		}
		_, c, cw := decodeAt(tab, s, j)
		if c&clWS == 0 {
			break
		}
		last = j
		j += cw
	}
	if lastNL >= 0 {
		return lastNL + 1
	}
	if j == n || last == i {
		if j == i { // not white space at all: cannot happen for the known patterns
			return i + w
		}
		return j
	}
	return last
}
