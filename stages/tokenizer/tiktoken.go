package tokenizer

import (
	"fmt"
	"strings"

	loader "github.com/pkoukk/tiktoken-go-loader"
)

// loadTiktoken builds cl100k_base or o200k_base from the rank files embedded
// in tiktoken-go-loader. Nothing is fetched over the network.
func loadTiktoken(name string) (*encoder, error) {
	ranks, err := loader.NewOfflineLoader().LoadTiktokenBpe(name + ".tiktoken")
	if err != nil {
		return nil, fmt.Errorf("read embedded ranks: %w", err)
	}
	m, missing := tiktokenModel(ranks)
	if missing >= 0 {
		return nil, fmt.Errorf("embedded ranks lack the one-byte token %#x", missing)
	}
	pat := patCL100K
	if name == "o200k_base" {
		pat = patO200K
	}
	return &encoder{name: name, family: strings.TrimSuffix(name, "_base"), model: m, split: knownSplitter(pat)}, nil
}

// tiktokenModel builds the merge model of tiktoken ranks: the whole-piece
// table, the pair table and the one-byte tokens; the ranks map itself is
// not kept. missing is a byte without a one-byte token (the ranks are then
// not byte-level BPE and m is nil), or -1.
func tiktokenModel(ranks map[string]int) (m *bpeModel, missing int) {
	m = &bpeModel{}
	for b := range 256 {
		id, ok := ranks[string([]byte{byte(b)})]
		if !ok {
			return nil, b
		}
		m.byteID[b] = int32(id)
	}
	m.merges = newPairTable(pairMerges(ranks))
	m.pieces = newVocabTable(ranks)
	m.setBytePairs()
	return m, -1
}

// pairMerges turns tiktoken's ranks into the pair table of the merge loop:
// for every token t and every split t = a+b with a and b tokens, the pair
// (a, b) merges with rank(t) into t. Merging always joins two tokens, so this
// is exactly tiktoken's "rank of the concatenated bytes", looked up by two
// integers instead of hashing a byte string.
func pairMerges(ranks map[string]int) map[uint64]uint64 {
	m := make(map[uint64]uint64, len(ranks)*3)
	for tok, r := range ranks {
		for k := 1; k < len(tok); k++ {
			a, okA := ranks[tok[:k]]
			if !okA {
				continue
			}
			b, okB := ranks[tok[k:]]
			if !okB {
				continue
			}
			m[uint64(uint32(a))<<32|uint64(uint32(b))] = uint64(r)<<32 | uint64(uint32(r))
		}
	}
	return m
}
