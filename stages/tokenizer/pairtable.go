package tokenizer

import "math/bits"

// pairTable is the pair table of the merge loop: an open-addressing hash
// table (linear probing, load factor at most 1/2) from a pair of ids,
// a<<32 | b, to rank<<32 | merged id. The merge loop looks a pair up for
// every merge and its two neighbours, most of them in a table of hundreds of
// thousands of pairs that does not fit in cache; one flat slot array costs
// about one cache miss per lookup where a Go map costs two or more.
//
// When every pair merges into a token whose id is its rank and all ids are
// below 2^21 (tiktoken encodings), the table is packed: one word per slot,
// a<<42 | b<<21 | id, half the memory and so more of it in cache.
//
// Most lookups of the merge loop are of pairs that do not merge (about three
// in four on the bench corpus); a one-hash Bloom filter of 2^22 bits (512 KB,
// it stays in cache) answers most of them without touching the table.
type pairTable struct {
	slots  []pairSlot
	packed []uint64
	shift  uint
	filter *[1 << (filterBits - 6)]uint64
}

// filterBits is log2 of the number of bits of the filter.
const filterBits = 22

// filterBit is the bit of key in the filter.
func filterBit(key uint64) uint64 { return (key * 0xD6E8FEB86659FD93) >> (64 - filterBits) }

// packedBits is the width of an id in a packed slot.
const packedBits = 21

type pairSlot struct {
	key, val uint64
}

// emptyPair marks a free slot: ids are non-negative int32, so no key of a
// real pair has all bits set.
const emptyPair = ^uint64(0)

// newPairTable copies m (pair key to rank<<32 | id) into a pairTable.
func newPairTable(m map[uint64]uint64) *pairTable {
	size := 16
	for size < 2*len(m) {
		size *= 2
	}
	t := &pairTable{shift: uint(64 - bits.TrailingZeros(uint(size))), filter: new([1 << (filterBits - 6)]uint64)}
	for k := range m {
		b := filterBit(k)
		t.filter[b>>6] |= 1 << (b & 63)
	}
	if packable(m) {
		t.packed = make([]uint64, size)
		for i := range t.packed {
			t.packed[i] = emptyPair
		}
		mask := uint64(size - 1)
		for k, v := range m {
			pk := k>>32<<packedBits | k&(1<<packedBits-1)
			i := t.home(pk)
			for t.packed[i] != emptyPair {
				i = (i + 1) & mask
			}
			t.packed[i] = pk<<packedBits | v&(1<<packedBits-1)
		}
		return t
	}
	t.slots = make([]pairSlot, size)
	for i := range t.slots {
		t.slots[i].key = emptyPair
	}
	mask := uint64(size - 1)
	for k, v := range m {
		i := t.home(k)
		for t.slots[i].key != emptyPair {
			i = (i + 1) & mask
		}
		t.slots[i] = pairSlot{key: k, val: v}
	}
	return t
}

// packable reports whether every value of m is rank<<32 | id with rank ==
// id and all ids below 2^packedBits.
func packable(m map[uint64]uint64) bool {
	const limit = 1 << packedBits
	for k, v := range m {
		if k>>32 >= limit || uint32(k) >= limit || v>>32 != v&(1<<32-1) || v>>32 >= limit {
			return false
		}
	}
	return true
}

// home is the first slot probed for key (Fibonacci hashing).
func (t *pairTable) home(key uint64) uint64 {
	return (key * 0x9E3779B97F4A7C15) >> t.shift
}

// get returns the value of key and whether it is present.
func (t *pairTable) get(key uint64) (uint64, bool) {
	if b := filterBit(key); t.filter[b>>6]&(1<<(b&63)) == 0 {
		return 0, false
	}
	if t.packed != nil {
		return t.getPacked(key)
	}
	mask := uint64(len(t.slots) - 1)
	for i := t.home(key); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.key == key {
			return s.val, true
		}
		if s.key == emptyPair {
			return 0, false
		}
	}
}

// getPacked is get for a packed table.
func (t *pairTable) getPacked(key uint64) (uint64, bool) {
	const limit = 1 << packedBits
	a, b := key>>32, key&(1<<32-1)
	if a >= limit || b >= limit {
		return 0, false
	}
	pk := a<<packedBits | b
	mask := uint64(len(t.packed) - 1)
	for i := t.home(pk); ; i = (i + 1) & mask {
		s := t.packed[i]
		if s>>packedBits == pk {
			id := s & (limit - 1)
			return id<<32 | id, true
		}
		if s == emptyPair {
			return 0, false
		}
	}
}
