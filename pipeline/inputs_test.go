package pipeline

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestInputCheckByPos: the input check's positions are sorted by position
// and then ledger order whatever the ledger's order, nearly the input's (a
// few rows finished out of turn) or any, and the entries that share a
// position are marked.
func TestInputCheckByPos(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, shape := range []string{"sorted", "nearly", "far", "shuffled"} {
		ix := newLedgerIndex(0)
		const n = 20000
		pis := make([]int, n)
		for i := range pis {
			pis[i] = i
		}
		switch shape {
		case "nearly":
			for range 30 {
				i := rng.IntN(n - 8)
				pis[i], pis[i+7] = pis[i+7], pis[i]
			}
		case "far": // one row far from its place: past the moves allowed
			pis = append(append([]int(nil), pis[1:]...), 0)
			slices.Reverse(pis[:n/2])
		case "shuffled":
			rng.Shuffle(n, func(i, j int) { pis[i], pis[j] = pis[j], pis[i] })
		}
		for i, pi := range pis {
			ix.set(ledgerEntry{key: fmt.Sprintf("k%d", i), pi: int64(pi), n: 1, shard: uint32(i % 2)})
			if pi%1000 == 0 { // a second key at the same position
				ix.set(ledgerEntry{key: fmt.Sprintf("k%d-b", i), pi: int64(pi), n: 1})
			}
		}
		c := newInputCheck(InputCheck{Enabled: true}, ix)
		want := make([]posEntry, len(ix.entries))
		for i, e := range ix.entries {
			want[i] = posEntry{pi: e.pi, sample: e.sample, i: uint32(i)}
			if e.record() {
				want[i].i |= recordBit
			}
		}
		slices.SortFunc(want, cmpPos)
		if !slices.Equal(c.byPos, want) {
			t.Errorf("%s: positions not sorted by position and ledger order", shape)
		}
		for i, e := range ix.entries {
			if got := c.shared.has(uint32(i)); got != (e.pi%1000 == 0) {
				t.Errorf("%s: entry %d at %d marked shared %v", shape, i, e.pi, got)
			}
		}
	}
}
