package cost

import "fmt"

// Reserve adds usd, the most one model call of the record key is projected
// to cost, to the spend before the call is made, unless that would take
// the spend past the cap: then nothing is added, the budget counts as
// reached from now on (no record starts any more, Allow and Reserve
// refuse) and the error wraps ErrBudget. A caller whose calls are only paid
// for once answered (the Batch API: hours later) reserves first, so that no
// request the cap cannot pay for is ever sent, and replaces the
// reservation by the real cost with Adjust when the answer comes. Such a
// reservation is not journalled (the batch journal keeps the requests a
// run submitted, and Hold counts them again on resume); a direct call's
// is, by Begin.
//
// Reserving nothing (usd <= 0), without a cap or on a nil Budget always
// succeeds.
func (b *Budget) Reserve(key string, usd float64) error {
	if b == nil || usd <= 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	spent := b.spent + b.held
	if b.max > 0 && (b.closed || spent+usd > b.max) {
		b.reach()
		return fmt.Errorf("%w: spent $%.4f of $%.4f, the next call may cost $%.4f", ErrBudget, spent, b.max, usd)
	}
	b.hold(key, usd)
	return nil
}

// Hold reserves usd for the record key whatever the cap: a call already
// made whose cost is not known yet (a Batch API request a killed run
// submitted). Its Adjust replaces it by the real cost.
func (b *Budget) Hold(key string, usd float64) {
	if b == nil || usd <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hold(key, usd)
}

// hold adds a reservation; b.mu is held.
func (b *Budget) hold(key string, usd float64) {
	b.reserved[key] += usd
	b.held += usd
	b.check()
}

// release ends a reservation of usd of key; b.mu is held.
func (b *Budget) release(key string, usd float64) {
	if usd <= 0 {
		return
	}
	if v := b.reserved[key] - usd; v > 1e-15 {
		b.reserved[key] = v
	} else {
		delete(b.reserved, key)
	}
	b.held -= usd
	if len(b.reserved) == 0 || b.held < 0 {
		b.held = 0 // float residue only
	}
	b.notify()
}

// Adjust replaces reserved, a reservation of the record key (or 0 for
// none), by usd, what its call number call really cost (0 to release a
// reservation whose call cost nothing), in one step: no other reservation
// can slip in between. The cost is charged (journalled) as by Charge.
func (b *Budget) Adjust(key string, call int, reserved, usd float64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.release(key, reserved)
	b.charge(key, call, "", usd)
}

// AdjustOnce is Adjust for a call named id that is paid for once however
// often its answer is read (a Batch API request: a resumed run reads the
// reply a killed one already charged): usd is charged only if no run of
// the folder charged id before.
func (b *Budget) AdjustOnce(key string, call int, id string, reserved, usd float64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.release(key, reserved)
	if usd == 0 || b.ids[id] {
		return
	}
	b.ids[id] = true
	b.charge(key, call, id, usd)
}

// Charged reports whether the call named id was charged by this run or an
// earlier one of the folder.
func (b *Budget) Charged(id string) bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ids[id]
}
