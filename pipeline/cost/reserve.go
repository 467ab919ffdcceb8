package cost

import "fmt"

// Reserve adds usd, the most one model call of the record key is projected
// to cost, to the spend in flight before the call is made, unless that
// would take the spend past the cap: then nothing is added, the budget
// counts as reached from now on (no record starts any more, Allow and
// Reserve refuse) and the error wraps ErrBudget. A caller whose calls are
// only paid for once answered (the Batch API: hours later) reserves first,
// so that no request the cap cannot pay for is ever sent, and replaces the
// reservation by the real cost with Adjust when the answer comes.
//
// Reserving nothing (usd <= 0) or on a nil Budget always succeeds.
func (b *Budget) Reserve(key string, usd float64) error {
	if b == nil || usd <= 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	spent := b.committed + b.flying
	if b.closed || spent+usd > b.max {
		if !b.closed {
			b.closed = true
			close(b.reached)
		}
		return fmt.Errorf("%w: spent $%.4f of $%.4f, the next call may cost $%.4f", ErrBudget, spent, b.max, usd)
	}
	b.inflight[key] += usd
	b.flying += usd
	b.check()
	return nil
}

// Adjust replaces reserved, a reservation of the record key (or 0 for
// none), by usd, what the call really cost (0 to release a reservation
// whose call cost nothing), in one step: no other reservation can slip in
// between. The record's commit (Settle) then moves its spend to committed
// as usual.
func (b *Budget) Adjust(key string, reserved, usd float64) {
	if b == nil || reserved == usd {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	d := usd - reserved
	b.inflight[key] += d
	b.flying += d
	if b.flying < 0 {
		b.flying = 0 // float residue only
	}
	b.check()
}
