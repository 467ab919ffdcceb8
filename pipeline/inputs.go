package pipeline

import (
	"cmp"
	"fmt"
	"slices"

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

// inputCheck is the state of an InputCheck during one Run.
type inputCheck struct {
	opts    InputCheck
	atPos   map[[2]int64]string // position → live key in the ledger at open
	seen    map[string]bool     // keys the source yielded
	seenAt  map[[2]int64]string // position → key the source yielded there
	changed int
}

func newInputCheck(opts InputCheck, ix *ledgerIndex) *inputCheck {
	c := &inputCheck{opts: opts, atPos: make(map[[2]int64]string, ix.len()), seen: make(map[string]bool, ix.len()), seenAt: make(map[[2]int64]string, ix.len())}
	for _, e := range ix.entries {
		if e.record() {
			c.atPos[[2]int64{e.pi, int64(e.sample)}] = e.key
		}
	}
	return c
}

// skipChanged records rec as seen and reports whether Run must skip it
// because its row changed and RedoChanged is off. Only Run's producer
// goroutine calls it.
func (c *inputCheck) skipChanged(o *Output, rec *schemas.Record) bool {
	pos := [2]int64{int64(rec.PromptIndex), int64(rec.Sample)}
	c.seen[rec.Key] = true
	c.seenAt[pos] = rec.Key
	old, ok := c.atPos[pos]
	if !ok || old == rec.Key {
		return false
	}
	o.mu.RLock()
	_, known := o.ix.find(rec.Key)
	o.mu.RUnlock()
	if known {
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
	for _, e := range o.ix.entries {
		if c.seen[e.key] || !e.record() {
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
