package pipeline

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// InputCheck makes a resumed Run compare its input with the ledger, for
// sources whose records are addressed by position (prompt_index, sample)
// and whose key changes when the row's text does (generate: a row without an
// id is keyed by its position and a hash of its text). The zero value
// checks nothing.
type InputCheck struct {
	// Enabled turns the check on: a row whose key differs from the live
	// key the ledger holds at the same position has changed; it is reported
	// and, unless RedoChanged, not run (so it never adds a second live
	// record for one input row). Keys the input no longer yields are
	// reported when the source was read to its end.
	Enabled bool
	// RedoChanged runs changed rows; the key they replace is then marked
	// pruned (outdir.Pruned), leaving one live record per position.
	RedoChanged bool
	// Prune marks every key the input no longer yields as pruned, which
	// takes its record out of cat, stats and verify's live set.
	Prune bool
}

// inputCheck is the state of an InputCheck during one Run. It holds no map
// of every key: a resumed 1,000,000-row run would spend most of its start
// filling maps. What it needs per input record is one ledger lookup, which
// the done check shares (ledgerIndex.find's sequential hint), and a bit per
// ledger entry.
type inputCheck struct {
	opts InputCheck
	// n is the number of ledger entries at open: entries past it were
	// committed by this run, so their keys came from the input (seen).
	n int
	// byPos holds the position (prompt_index, sample) of each entry at open,
	// sorted by position and then by ledger order.
	byPos []posEntry
	// shared marks the entries whose position another entry also holds;
	// only those (and rows whose key the ledger lacks) need byPos.
	shared  bitset
	seen    bitset              // entries whose key the source yielded
	seenAt  map[[2]int64]string // position → key the source yielded, where that position holds another key
	changed int
}

// posEntry is one ledger entry's position at open, for inputCheck.byPos.
type posEntry struct {
	pi     int64
	sample int32
	i      uint32 // index in ledgerIndex.entries, with recordBit when it was a live record
}

// recordBit marks a posEntry whose entry was a live record at open.
const recordBit = 1 << 31

func (p posEntry) index() uint32 { return p.i &^ recordBit }

func cmpPos(a, b posEntry) int {
	return cmp.Or(cmp.Compare(a.pi, b.pi), cmp.Compare(a.sample, b.sample), cmp.Compare(a.index(), b.index()))
}

// bitset is a set of small integers.
type bitset []uint64

func newBitset(n int) bitset       { return make(bitset, (n+63)/64) }
func (b bitset) set(i uint32)      { b[i/64] |= 1 << (i % 64) }
func (b bitset) has(i uint32) bool { return b[i/64]&(1<<(i%64)) != 0 }

func newInputCheck(opts InputCheck, ix *ledgerIndex) *inputCheck {
	n := ix.len()
	c := &inputCheck{opts: opts, n: n, byPos: make([]posEntry, n), shared: newBitset(n), seen: newBitset(n), seenAt: map[[2]int64]string{}}
	// A finished run's ledger is nearly in input order (workers finish a
	// few rows out of turn): each entry is moved back to its place as it
	// is added, and only when that takes too many moves is the whole
	// sorted, which costs more for a million entries a few out of place.
	moves, budget := 0, n/8+1024
	for i, e := range ix.entries {
		p := posEntry{pi: e.pi, sample: e.sample, i: uint32(i)}
		if e.record() {
			p.i |= recordBit
		}
		j := i
		for ; j > 0 && moves <= budget && cmpPos(c.byPos[j-1], p) > 0; j-- {
			c.byPos[j] = c.byPos[j-1]
			moves++
		}
		c.byPos[j] = p
	}
	if moves > budget { // left partly sorted: sort the rest
		slices.SortFunc(c.byPos, cmpPos)
	}
	for k := 1; k < n; k++ {
		if a, b := c.byPos[k-1], c.byPos[k]; a.pi == b.pi && a.sample == b.sample {
			c.shared.set(a.index())
			c.shared.set(b.index())
		}
	}
	return c
}

// at returns the entries the ledger held at pos when the run opened.
func (c *inputCheck) at(pos [2]int64) []posEntry {
	lo, _ := slices.BinarySearchFunc(c.byPos, posEntry{pi: pos[0], sample: int32(pos[1])}, cmpPos)
	hi := lo
	for hi < len(c.byPos) && c.byPos[hi].pi == pos[0] && int64(c.byPos[hi].sample) == pos[1] {
		hi++
	}
	return c.byPos[lo:hi]
}

// skipChanged records rec as seen and reports whether Run must skip it
// because its row changed and RedoChanged is off; at is where its key
// stands in the ledger (Output.locate). Only Run's producer goroutine calls
// it.
func (c *inputCheck) skipChanged(o *Output, rec *schemas.Record, at located) bool {
	pos := [2]int64{int64(rec.PromptIndex), int64(rec.Sample)}
	i, known, e := at.i, at.known, at.entry
	if known && int(i) < c.n {
		c.seen.set(i)
		if e.pi == pos[0] && int64(e.sample) == pos[1] && !c.shared.has(i) {
			return false // the only entry at its position: the common case
		}
	}
	// The key is new, or moved, or its position holds other keys: look at
	// every entry the position held at open.
	held := c.at(pos)
	if len(held) == 0 {
		return false
	}
	c.seenAt[pos] = strings.Clone(rec.Key) // a source may reuse a skipped record's key (DoneSkipper)
	var old string
	o.mu.RLock()
	for _, p := range held {
		if p.i&recordBit != 0 {
			old = o.ix.entries[p.index()].key // the latest record at pos, in ledger order
		}
	}
	o.mu.RUnlock()
	if old == "" || old == rec.Key || known {
		return false // both keys are in the ledger: finish reports the old one
	}
	c.changed++
	if c.opts.RedoChanged {
		o.opts.Logger.Warn("input row changed since its record was written; running it again (--redo-changed)", schemas.MemberPromptIndex, rec.PromptIndex, schemas.MemberSample, rec.Sample, "old_key", old, "new_key", rec.Key)
		return false
	}
	o.opts.Logger.Warn("input row changed since its record was written; keeping the old record (pass --redo-changed to run it again)", schemas.MemberPromptIndex, rec.PromptIndex, schemas.MemberSample, rec.Sample, "old_key", old, "new_key", rec.Key)
	return true
}

// finish reports the ledger keys the input no longer yields and marks the
// ones to prune with one ledger line: all of them with Prune, those whose
// position a seen key now holds with RedoChanged. Run calls it after the
// writer has stopped, only when the source was read to its end (eof).
func (c *inputCheck) finish(o *Output, eof bool, sum *Summary) error {
	sum.Changed = c.changed
	if !eof {
		return nil
	}
	line := &ledgerLine{}
	var gone []string
	for i, e := range o.ix.entries {
		if i >= c.n || c.seen.has(uint32(i)) || !e.record() {
			continue // yielded by the input, or no live record
		}
		gone = append(gone, e.key)
		now, replaced := c.seenAt[[2]int64{e.pi, int64(e.sample)}]
		if c.opts.Prune || c.opts.RedoChanged && replaced && now != e.key {
			line.Rows = append(line.Rows, ledgerRow{Key: e.key, Outcome: outdir.Pruned, PromptIndex: e.pi, Sample: int64(e.sample), Len: -1})
		}
	}
	sum.Gone = len(gone)
	if len(gone) > 0 && !c.opts.Prune {
		o.opts.Logger.Warn("keys in the output folder are no longer in the input; their records stay live (pass --prune to remove them)", "keys", len(gone), "first", gone[:min(len(gone), 5)])
	}
	if len(line.Rows) == 0 {
		return nil
	}
	slices.SortFunc(line.Rows, func(a, b ledgerRow) int {
		return cmp.Or(cmp.Compare(a.PromptIndex, b.PromptIndex), cmp.Compare(a.Sample, b.Sample))
	})
	if err := o.appendLedger(line); err != nil {
		return fmt.Errorf("prune keys no longer in the input: %w", err)
	}
	o.mu.Lock()
	o.ix.apply(line)
	o.committed += len(line.Rows)
	o.mu.Unlock()
	sum.Pruned = len(line.Rows)
	o.opts.Logger.Warn("removed keys no longer in the input from the live records", "keys", len(line.Rows))
	return nil
}
