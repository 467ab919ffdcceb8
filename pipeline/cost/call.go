package cost

import (
	"context"
	"fmt"
)

// Reservation is one model call's projected cost, reserved and journalled
// by Begin before the call is sent; End settles it with what the call
// really cost. The zero Reservation (a nil Budget's) settles nothing.
type Reservation struct {
	key  string
	call int
	id   int64 // the reservation's number in the run's journal, from 1
	usd  float64
}

// Projected is the projected cost r reserved.
func (r Reservation) Projected() float64 { return r.usd }

// Begin reserves usd, the projected cost of model call number call of the
// record key (what it may cost at most: see each stage's projection), and
// writes the reservation to the journal (Journal.Reserved) before it
// returns, so a caller that sends the call only after Begin returned
// leaves a journal that counts it even if the process is killed while the
// call is in flight: a later run counts a reservation never settled as
// spent, at its projected cost.
//
// A call whose reservation would take the spend past the cap is refused
// (an error wrapping ErrBudget; the budget counts as reached from now on:
// no record starts any more) when it does not fit even without the other
// calls in flight; when it fits only once they end (their reservations are
// projections, most cost less), Begin waits for reservations to end and
// tries again, or returns ctx's error once ctx is done. A journal that
// cannot be written refuses the call too (its error). Without a cap (a
// meter) it only journals.
//
// It blocks for one write(2) to the journal, and while it waits; it takes
// b's mutex.
func (b *Budget) Begin(ctx context.Context, key string, call int, usd float64) (Reservation, error) {
	if b == nil {
		return Reservation{}, nil
	}
	usd = max(usd, 0)
	b.mu.Lock()
	for b.max > 0 && !b.closed && b.spent+usd <= b.max && b.spent+b.held+usd > b.max {
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return Reservation{}, fmt.Errorf("model call %d: waiting for the calls in flight to fit its projected cost of $%.4f under the cap: %w", call, usd, ctx.Err())
		}
		b.mu.Lock()
	}
	defer b.mu.Unlock()
	spent := b.spent + b.held
	if b.max > 0 && (b.closed || spent+usd > b.max) {
		b.reach()
		return Reservation{}, fmt.Errorf("%w: spent $%.4f of $%.4f, the next call may cost $%.4f", ErrBudget, spent, b.max, usd)
	}
	b.seq++
	r := Reservation{key: key, call: call, id: b.seq, usd: usd}
	if b.journal != nil {
		if err := b.journal.Reserved(key, call, r.id, usd); err != nil {
			return Reservation{}, fmt.Errorf("model call %d not sent: %w", call, err)
		}
	}
	if usd > 0 {
		b.hold(key, usd)
	}
	return r, nil
}

// End settles r with usd, what its call really cost (0 for a call that
// failed: not billed): the reservation ends and usd is charged, journalled
// as the charge that settles r (even when usd is 0, so the journal shows
// the reservation closed). A zero r does nothing.
func (b *Budget) End(r Reservation, usd float64) {
	if b == nil || r.id == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.release(r.key, r.usd)
	b.spent += usd
	if b.journal != nil {
		b.journal.Charged(r.key, r.call, "", r.id, usd)
	}
	b.check()
}
