package tokenizer

import (
	"math"
	"strings"
	"sync"
	"unicode/utf8"
)

// bpeModel turns one pre-tokenized piece into token ids.
//
// tiktoken ranks pairs by the rank of their concatenated bytes; Hugging Face
// BPE ranks them by the position of the pair in the merges list. Both merge
// the lowest ranked adjacent pair first, the leftmost one on ties, so one
// algorithm over one pair table serves both (tiktoken's table is derived from
// its ranks by pairMerges).
type bpeModel struct {
	// vocab maps a character-level model's token texts to ids (charLevel
	// only: byte-level models need no map once built).
	vocab map[string]int
	// byteID maps each byte to the id of its one-byte token, -1 if none.
	byteID [256]int32
	// merges maps a pair of ids a<<32 | b to rank<<32 | merged id.
	merges *pairTable
	// bytePairs is the pair table restricted to pairs of one-byte tokens,
	// indexed by the two bytes: the first lookups of every piece, from a
	// 512 KB table that stays in cache. nil when a byte has no token or the
	// model is character-level (then a piece's symbols are not its bytes).
	bytePairs *[1 << 16]uint64
	// pieces, when set, is the vocabulary looked up for the whole piece
	// before merging (tiktoken always; Hugging Face when ignore_merges is
	// set).
	pieces *vocabTable

	// charLevel is the SentencePiece-family form of Hugging Face BPE
	// (Llama 2, Gemma, Mistral): vocab holds text, a piece starts as its
	// characters, a character not in vocab becomes its byte tokens <0xNN>
	// (byte_fallback) or the unknown token.
	charLevel bool
	// fallback maps a byte to its <0xNN> token, -1 if none; nil without
	// byte_fallback.
	fallback *[256]int32
	// unkID is the unknown token's id, -1 if none; fuseUnk joins runs of
	// unknown characters into one.
	unkID   int32
	fuseUnk bool

	pool sync.Pool // *scratch
}

// symbol is one part of a piece during merging: bytes [start, end), id.
type symbol struct {
	start, end int32
	id         int32
}

const noRank = math.MaxInt32

// Limits of the per-goroutine piece cache.
const (
	cacheMaxEntries = 1 << 15
	cacheMaxPiece   = 64 // longer pieces are rarely repeated
	linearMaxBytes  = 64 // longer pieces merge with a heap
)

// scratch holds per-goroutine buffers and the cache of merged pieces.
type scratch struct {
	syms  []symbol
	rk    []int32
	nid   []int32
	heap  []heapEntry
	next  []int32
	prev  []int32
	buf   []int
	cache map[string][]int
	arena []int
}

func (m *bpeModel) getScratch() *scratch {
	if v := m.pool.Get(); v != nil {
		return v.(*scratch)
	}
	return &scratch{cache: make(map[string][]int, 1024)}
}

func (m *bpeModel) putScratch(sc *scratch) { m.pool.Put(sc) }

// pairRank returns the rank and merged id of the adjacent symbols a and b,
// or noRank.
func (m *bpeModel) pairRank(a, b *symbol) (int32, int32) {
	v, ok := m.merges.get(uint64(uint32(a.id))<<32 | uint64(uint32(b.id)))
	if !ok {
		return noRank, -1
	}
	return int32(v >> 32), int32(uint32(v))
}

// encodePiece appends the ids of piece to out.
func (m *bpeModel) encodePiece(piece string, out []int, sc *scratch) []int {
	if m.pieces != nil {
		if id, ok := m.pieces.get(piece); ok {
			return append(out, id)
		}
	}
	if len(piece) == 1 && !m.charLevel {
		if id := m.byteID[piece[0]]; id >= 0 {
			return append(out, int(id))
		}
		return out
	}
	cacheable := len(piece) <= cacheMaxPiece
	if cacheable {
		if ids, ok := sc.cache[piece]; ok {
			return append(out, ids...)
		}
	}
	start := len(out)
	out = m.merge(piece, out, sc)
	if cacheable {
		if len(sc.cache) >= cacheMaxEntries {
			clear(sc.cache)
			sc.arena = nil
		}
		a := len(sc.arena)
		sc.arena = append(sc.arena, out[start:]...)
		sc.cache[strings.Clone(piece)] = sc.arena[a:len(sc.arena):len(sc.arena)]
	}
	return out
}

// firstRank is pairRank for symbols i and i+1 of piece before any merge,
// when they are still its bytes i and i+1.
func (m *bpeModel) firstRank(syms []symbol, i int, piece string) (int32, int32) {
	if m.bytePairs == nil {
		return m.pairRank(&syms[i], &syms[i+1])
	}
	v := m.bytePairs[int(piece[i])<<8|int(piece[i+1])]
	if v == emptyPair {
		return noRank, -1
	}
	return int32(v >> 32), int32(uint32(v))
}

// setBytePairs fills bytePairs from merges when every byte has a token.
func (m *bpeModel) setBytePairs() {
	if m.charLevel {
		return
	}
	for _, id := range m.byteID {
		if id < 0 {
			return
		}
	}
	t := new([1 << 16]uint64)
	for a := range 256 {
		for b := range 256 {
			v, ok := m.merges.get(uint64(uint32(m.byteID[a]))<<32 | uint64(uint32(m.byteID[b])))
			if !ok {
				v = emptyPair
			}
			t[a<<8|b] = v
		}
	}
	m.bytePairs = t
}

// merge runs byte-pair merging over piece and appends the resulting ids.
func (m *bpeModel) merge(piece string, out []int, sc *scratch) []int {
	var syms []symbol
	if m.charLevel {
		syms = m.charSymbols(piece, sc.syms[:0])
	} else {
		syms = sc.syms[:0]
		for i := 0; i < len(piece); i++ {
			id := m.byteID[piece[i]]
			if id < 0 {
				continue // no token for this byte and no unknown token: dropped, as Hugging Face does
			}
			syms = append(syms, symbol{start: int32(i), end: int32(i + 1), id: id})
		}
	}
	sc.syms = syms
	if len(piece) <= linearMaxBytes {
		syms = m.mergeLinear(syms, piece, sc)
	} else {
		syms = m.mergeHeap(syms, piece, sc)
	}
	for i := range syms {
		out = append(out, int(syms[i].id))
	}
	return out
}

// charSymbols splits piece into its first symbols as Hugging Face's BPE
// does for a model that is not byte-level: each character is its vocab
// token, else its <0xNN> byte tokens when all of them exist, else the
// unknown token (one per run of unknown characters with fuse_unk), else
// nothing. Positions are symbol numbers: only their order matters to the
// merge loops.
func (m *bpeModel) charSymbols(piece string, syms []symbol) []symbol {
	add := func(id int32) {
		n := int32(len(syms))
		syms = append(syms, symbol{start: n, end: n + 1, id: id})
	}
	pendingUnk := false
	for i := 0; i < len(piece); {
		_, w := utf8.DecodeRuneInString(piece[i:])
		ch := piece[i : i+w]
		i += w
		if id, ok := m.vocab[ch]; ok {
			if pendingUnk {
				add(m.unkID)
				pendingUnk = false
			}
			add(int32(id))
			continue
		}
		if m.fallback != nil && m.allFallback(ch) {
			// As Hugging Face does, a pending unknown token is not
			// flushed first: it lands after these bytes.
			for k := 0; k < len(ch); k++ {
				add(m.fallback[ch[k]])
			}
			continue
		}
		if m.unkID < 0 {
			continue
		}
		if pendingUnk && !m.fuseUnk {
			add(m.unkID)
		}
		pendingUnk = true
	}
	if pendingUnk {
		add(m.unkID)
	}
	return syms
}

func (m *bpeModel) allFallback(ch string) bool {
	for k := 0; k < len(ch); k++ {
		if m.fallback[ch[k]] < 0 {
			return false
		}
	}
	return true
}

// mergeLinear is tiktoken's algorithm: scan for the lowest rank, merge,
// update the two neighbouring ranks. O(n²) but fast for short pieces.
func (m *bpeModel) mergeLinear(syms []symbol, piece string, sc *scratch) []symbol {
	n := len(syms)
	if cap(sc.rk) < n {
		sc.rk = make([]int32, n, 2*n)
		sc.nid = make([]int32, n, 2*n)
	}
	rk, nid := sc.rk[:n], sc.nid[:n]
	for i := 0; i+1 < n; i++ {
		rk[i], nid[i] = m.firstRank(syms, i, piece)
	}
	for n > 1 {
		best, bi := int32(noRank), -1
		for i := 0; i+1 < n; i++ {
			if rk[i] < best {
				best, bi = rk[i], i
			}
		}
		if bi < 0 {
			break
		}
		syms[bi].end = syms[bi+1].end
		syms[bi].id = nid[bi]
		copy(syms[bi+1:n], syms[bi+2:n])
		copy(rk[bi+1:n], rk[bi+2:n])
		copy(nid[bi+1:n], nid[bi+2:n])
		n--
		if bi+1 < n {
			rk[bi], nid[bi] = m.pairRank(&syms[bi], &syms[bi+1])
		} else {
			rk[bi] = noRank
		}
		if bi > 0 {
			rk[bi-1], nid[bi-1] = m.pairRank(&syms[bi-1], &syms[bi])
		}
	}
	return syms[:n]
}

// heapEntry is a candidate merge of symbol left = uint32(key) with the
// symbol after it. key = rank<<32 | left: symbol indices grow with byte
// positions, so ordering by key is "lowest rank, then leftmost".
type heapEntry struct {
	key      uint64
	rightEnd int32 // end byte of the right symbol when the entry was made
	id       int32
}

// mergeHeap gives the same result as mergeLinear in O(n log n) for long
// pieces (for example a long run of CJK letters): a min-heap of candidate
// merges with stale entries skipped on pop, over a linked list of symbols.
func (m *bpeModel) mergeHeap(syms []symbol, piece string, sc *scratch) []symbol {
	n := len(syms)
	if cap(sc.next) < n {
		sc.next = make([]int32, n, 2*n)
		sc.prev = make([]int32, n, 2*n)
	}
	next, prev := sc.next[:n], sc.prev[:n]
	for i := range n {
		next[i] = int32(i + 1)
		prev[i] = int32(i - 1)
	}
	h := sc.heap[:0]
	for i := 0; i+1 < n; i++ {
		rank, id := m.firstRank(syms, i, piece)
		h = pushMerge(h, syms, int32(i), int32(i+1), rank, id)
	}
	const dead = -1
	for len(h) > 0 {
		e := h[0]
		h = heapPop(h)
		l := int32(uint32(e.key))
		r := next[l]
		if syms[l].start == dead || int(r) >= n || syms[r].end != e.rightEnd {
			continue // stale: l was merged away, or its right neighbour changed
		}
		syms[l].end = syms[r].end
		syms[l].id = e.id
		syms[r].start = dead
		next[l] = next[r]
		if int(next[r]) < n {
			prev[next[r]] = l
		}
		if prev[l] >= 0 {
			rank, id := m.pairRank(&syms[prev[l]], &syms[l])
			h = pushMerge(h, syms, prev[l], l, rank, id)
		}
		if int(next[l]) < n {
			rank, id := m.pairRank(&syms[l], &syms[next[l]])
			h = pushMerge(h, syms, l, next[l], rank, id)
		}
	}
	sc.heap = h
	k := 0
	for i := range n {
		if syms[i].start != dead {
			syms[k] = syms[i]
			k++
		}
	}
	return syms[:k]
}

// pushMerge pushes the merge of symbols l and r (rank and merged id) unless
// rank is noRank.
func pushMerge(h []heapEntry, syms []symbol, l, r, rank, id int32) []heapEntry {
	if rank == noRank {
		return h
	}
	e := heapEntry{key: uint64(rank)<<32 | uint64(l), rightEnd: syms[r].end, id: id}
	c := len(h)
	h = append(h, e)
	for c > 0 {
		p := (c - 1) / 2
		if h[p].key <= e.key {
			break
		}
		h[c] = h[p]
		c = p
	}
	h[c] = e
	return h
}

func heapPop(h []heapEntry) []heapEntry {
	last := len(h) - 1
	e := h[last]
	h = h[:last]
	if last == 0 {
		return h
	}
	p := 0
	for {
		c := 2*p + 1
		if c >= last {
			break
		}
		if c+1 < last && h[c+1].key < h[c].key {
			c++
		}
		if e.key <= h[c].key {
			break
		}
		h[p] = h[c]
		p = c
	}
	h[p] = e
	return h
}
