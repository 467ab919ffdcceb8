package cost

import (
	"errors"
	"fmt"
	"sync"
)

// ErrBudget is the cause of a run stopped by its spending cap (--max-cost).
// A stage that sees it (context.Cause of its context, or Budget.Allow)
// ends its record with a retryable outcome, so the spend is committed and a
// later --resume with a higher cap runs the record again.
var ErrBudget = errors.New("run budget reached")

// Journal receives every reservation (Begin) and charge of a Budget as it
// is made: the output folder's spend journal (pipeline), so what a run
// spent, and what it had sent and not been answered yet, survives the run
// being killed before its rows are committed. Budget calls it with its
// mutex held, in the order of the reservations and charges.
type Journal interface {
	// Reserved records reservation number res (from 1, in the run) of
	// usd, the projected cost of call number call of the record key,
	// before the call is sent. It must reach the operating system (a
	// write(2), not a user-space buffer) before it returns: the call goes
	// out right after. An error refuses the call.
	Reserved(key string, call int, res int64, usd float64) error
	// Charged records that call number call of the record key cost usd;
	// id, when not "", names the call across runs (a Batch API request,
	// paid once however often its reply is read); res, when not 0, is the
	// reservation the charge settles (Begin, End).
	Charged(key string, call int, id string, res int64, usd float64)
	// Capped records that the run reached its cap of max US dollars (a
	// call refused, or the spend at the cap): a later run of the folder
	// with a cap of at most max starts at the cap (Budget.StoppedAt) and
	// makes no call.
	Capped(max float64)
}

// Budget is a run's spending cap and its meter. The runtime (pipeline.Run)
// owns one per run: it starts from what the folder's runs had already
// spent (the spend journal, pipeline.Output.Spent, which counts a killed
// run's reservations never settled), stages reserve each direct model
// call's projected cost before it goes out (Begin, journalled) and settle
// it with the real cost as it returns (End; the runtime hands the Budget
// to each stage that spends, pipeline.BudgetUser), and every reservation
// and charge is written to the Journal given to Keep. Spent is what the
// run started from, plus every charge, plus the reservations of calls not
// answered yet (Begin, Reserve, Hold). A record's commit (Settle) ends its reservations; its
// charges stay spent: the journal, not the record, is what was paid.
// A nil *Budget is no cap and no meter: every method is a cheap no-op.
//
// Its methods are safe for concurrent use; each takes one mutex.
type Budget struct {
	max float64 // 0: no cap (NewMeter), the spend is only metered

	mu       sync.Mutex
	spent    float64            // at the start plus every charge since
	reserved map[string]float64 // reservations per record key, not answered yet
	held     float64            // sum of reserved
	ids      map[string]bool    // call ids charged, by this run or an earlier one
	seq      int64              // the last reservation number Begin gave
	changed  chan struct{}      // closed and replaced when a reservation ends or the cap is reached (Begin waits on it)
	journal  Journal            // nil: charges are not journalled
	reached  chan struct{}      // closed once Spent reaches max
	closed   bool
}

// NewBudget returns a cap of max US dollars for a run whose folder has
// already spent spent. A max of 0 or less returns nil (no cap).
func NewBudget(max, spent float64) *Budget {
	if max <= 0 {
		return nil
	}
	b := newBudget(max, spent)
	b.check()
	return b
}

// NewMeter returns a Budget without a cap: it only meters (and, with Keep,
// journals) what the run spends, so a later run of the folder with a cap
// counts it.
func NewMeter(spent float64) *Budget { return newBudget(0, spent) }

func newBudget(max, spent float64) *Budget {
	return &Budget{max: max, spent: spent, reserved: map[string]float64{}, ids: map[string]bool{}, reached: make(chan struct{}),
		changed: make(chan struct{})}
}

// Keep makes b write every charge to j from now on; ids are the call ids
// earlier runs charged (AdjustOnce charges each id once).
func (b *Budget) Keep(j Journal, ids map[string]bool) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.journal = j
	for id := range ids {
		b.ids[id] = true
	}
}

// check closes reached once the spend reaches the cap. b.mu is held or b is
// not shared yet.
func (b *Budget) check() {
	if b.max > 0 && b.spent+b.held >= b.max {
		b.reach()
	}
}

// reach closes reached, once, and journals that the cap was reached. b.mu
// is held or b is not shared yet.
func (b *Budget) reach() {
	if b.closed {
		return
	}
	b.closed = true
	close(b.reached)
	b.notify()
	if b.journal != nil {
		b.journal.Capped(b.max)
	}
}

// notify wakes the calls waiting in Begin; b.mu is held.
func (b *Budget) notify() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// StoppedAt makes b reached at once when its cap is at most capped, a cap
// an earlier run of the folder reached (outdir.Spend.Capped): that run
// stopped because the next call did not fit under it, so a --resume with
// the same cap makes no call, even when what was really spent ends a
// little below the cap (reservations are projections). Called before b is
// shared.
func (b *Budget) StoppedAt(capped float64) {
	if b == nil || b.max <= 0 || b.max > capped || b.closed {
		return
	}
	b.closed = true
	close(b.reached)
}

// Max is the cap in US dollars (0 for no cap).
func (b *Budget) Max() float64 {
	if b == nil {
		return 0
	}
	return b.max
}

// Spent is what the folder's runs have spent: what the run started from,
// every call charged since, and the reservations of calls not answered
// yet.
func (b *Budget) Spent() float64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent + b.held
}

// Reached reports whether the spend has reached the cap.
func (b *Budget) Reached() bool {
	if b == nil {
		return false
	}
	select {
	case <-b.reached:
		return true
	default:
		return false
	}
}

// Done returns a channel closed when the spend reaches the cap; nil (never
// ready) for a nil Budget.
func (b *Budget) Done() <-chan struct{} {
	if b == nil {
		return nil
	}
	return b.reached
}

// Allow returns an error wrapping ErrBudget once the cap is reached. A stage
// without a price (nothing to reserve) calls it before each model call;
// a priced call goes through Begin, which also refuses a call whose
// projected cost does not fit under the cap.
func (b *Budget) Allow() error {
	if b.Reached() {
		return fmt.Errorf("%w: spent $%.4f of $%.4f", ErrBudget, b.Spent(), b.max)
	}
	return nil
}

// Charge adds usd, what model call number call of the record key cost, to
// the spend and writes it to the journal.
func (b *Budget) Charge(key string, call int, usd float64) {
	if b == nil || usd == 0 {
		return
	}
	b.mu.Lock()
	b.charge(key, call, "", usd)
	b.mu.Unlock()
}

// charge adds usd to the spend and journals it; b.mu is held.
func (b *Budget) charge(key string, call int, id string, usd float64) {
	if usd == 0 {
		return
	}
	b.spent += usd
	if b.journal != nil {
		b.journal.Charged(key, call, id, 0, usd)
	}
	b.check()
}

// Settle records one commit of the keys: their reservations end (a record
// is committed once its calls are answered). Their charges stay spent.
func (b *Budget) Settle(keys []string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	for _, k := range keys {
		if v, ok := b.reserved[k]; ok {
			b.held -= v
			delete(b.reserved, k)
			b.notify()
		}
	}
	if len(b.reserved) == 0 {
		b.held = 0 // no float residue once nothing is reserved
	}
	b.mu.Unlock()
}
