package tokenizer

import "math/bits"

// pairTable is the pair table of the merge loop: an open-addressing hash
// table (linear probing, load factor at most 1/2) from a pair of ids,
// a<<32 | b, to rank<<32 | merged id. The merge loop looks a pair up for
// every merge and its two neighbours, most of them in a table of hundreds of
// thousands of pairs that does not fit in cache; one flat slot array costs
// about one cache miss per lookup where a Go map costs two or more.
type pairTable struct {
	slots []pairSlot
	shift uint
}

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
	t := &pairTable{slots: make([]pairSlot, size), shift: uint(64 - bits.TrailingZeros(uint(size)))}
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

// home is the first slot probed for key (Fibonacci hashing).
func (t *pairTable) home(key uint64) uint64 {
	return (key * 0x9E3779B97F4A7C15) >> t.shift
}

// get returns the value of key and whether it is present.
func (t *pairTable) get(key uint64) (uint64, bool) {
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
