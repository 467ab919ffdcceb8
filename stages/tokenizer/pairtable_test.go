package tokenizer

import (
	"math/rand/v2"
	"testing"
)

// TestPairTableMatchesMap checks both layouts of pairTable against the map
// they are built from, on present keys and on absent ones.
func TestPairTableMatchesMap(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	packedMap := map[uint64]uint64{}
	wideMap := map[uint64]uint64{}
	for range 5000 {
		a, b, id := r.Uint64N(1<<packedBits), r.Uint64N(1<<packedBits), r.Uint64N(1<<packedBits)
		packedMap[a<<32|b] = id<<32 | id
		wideMap[a<<32|b] = r.Uint64N(1<<31)<<32 | id
	}
	for name, m := range map[string]map[uint64]uint64{"packed": packedMap, "wide": wideMap} {
		tab := newPairTable(m)
		if (tab.packed != nil) != (name == "packed") {
			t.Fatalf("%s: packed = %v", name, tab.packed != nil)
		}
		check := func(k uint64) {
			want, wantOK := m[k]
			got, ok := tab.get(k)
			if ok != wantOK || got != want {
				t.Fatalf("%s: get(%#x) = %#x, %v; want %#x, %v", name, k, got, ok, want, wantOK)
			}
		}
		for k := range m {
			check(k)
			check(k ^ 1)
			check(k + 1<<32)
		}
		check(1<<packedBits<<32 | 1)
		check(1<<packedBits | 1<<32)
		for range 5000 {
			check(r.Uint64N(1<<packedBits)<<32 | r.Uint64N(1<<packedBits))
		}
	}
}
