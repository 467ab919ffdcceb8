package tokenizer

import "math/bits"

// vocabTable maps token bytes to ids for the whole-piece lookup that
// tiktoken does before merging. Nearly every piece of ordinary text is one
// token, so this lookup runs once per piece; a Go map of strings costs a
// probe of its group and a second cache miss on the key's bytes. Here a
// token of up to 16 bytes is held in its slot (two words), so a lookup
// touches one slot in the common case. Longer tokens keep their first 8
// bytes in the slot and the rest in an arena.
type vocabTable struct {
	slots []vocabSlot
	shift uint
	arena string
}

// vocabSlot is one token: for n <= 16, w0 and w1 are its bytes
// (little-endian, zero padded); for n > 16, w0 is its first 8 bytes and w1
// its offset in the arena. n == 0 marks a free slot.
type vocabSlot struct {
	w0, w1 uint64
	n      uint32
	id     int32
}

// newVocabTable builds the table of vocab (empty tokens are left out: the
// pre-tokenizers never produce an empty piece).
func newVocabTable(vocab map[string]int) *vocabTable {
	size := 16
	for size < 2*len(vocab) {
		size *= 2
	}
	t := &vocabTable{slots: make([]vocabSlot, size), shift: uint(64 - bits.TrailingZeros(uint(size)))}
	var arena []byte
	mask := uint64(size - 1)
	for tok, id := range vocab {
		if tok == "" {
			continue
		}
		w0, w1, h := t.words(tok)
		if len(tok) > 16 {
			w1 = uint64(len(arena))
			arena = append(arena, tok...)
		}
		i := h
		for t.slots[i].n != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = vocabSlot{w0: w0, w1: w1, n: uint32(len(tok)), id: int32(id)}
	}
	t.arena = string(arena)
	return t
}

// words returns the slot words of s (for a long s: its first and last 8
// bytes) and its home slot.
func (t *vocabTable) words(s string) (w0, w1, home uint64) {
	n := len(s)
	if n <= 16 {
		w0, w1 = word(s, 0), word(s, 8)
	} else {
		w0, w1 = load8(s, 0), load8(s, n-8)
	}
	h := (w0 ^ bits.RotateLeft64(w1, 31) ^ uint64(n)) * 0x9E3779B97F4A7C15
	return w0, w1, h >> t.shift
}

// get returns the id of token s.
func (t *vocabTable) get(s string) (int, bool) {
	n := len(s)
	if n == 0 {
		return 0, false
	}
	w0, w1, i := t.words(s)
	mask := uint64(len(t.slots) - 1)
	for ; ; i = (i + 1) & mask {
		sl := &t.slots[i]
		if sl.n == 0 {
			return 0, false
		}
		if sl.n != uint32(n) || sl.w0 != w0 {
			continue
		}
		if n <= 16 {
			if sl.w1 == w1 {
				return int(sl.id), true
			}
		} else if t.arena[sl.w1:sl.w1+uint64(n)] == s {
			return int(sl.id), true
		}
	}
}

// load8 reads s[i:i+8] little-endian (i+8 <= len(s)).
func load8(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// word reads up to 8 bytes of s from i little-endian, zero padded.
func word(s string, i int) uint64 {
	if i+8 <= len(s) {
		return load8(s, i)
	}
	var w uint64
	for k := len(s) - 1; k >= i; k-- {
		w = w<<8 | uint64(s[k])
	}
	return w
}
