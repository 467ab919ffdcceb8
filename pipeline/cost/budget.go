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

// Budget is a run's spending cap and its meter. The runtime (pipeline.Run)
// owns one per run: it starts from what the output folder's ledger says was
// already spent, stages charge each model call as it returns (Charge; the
// runtime hands the Budget to each stage that spends, pipeline.BudgetUser), and each commit moves a record's spend
// from in flight to committed (Settle). Spent is committed plus in flight.
// A nil *Budget is no cap: every method is a cheap no-op.
//
// Its methods are safe for concurrent use; each takes one mutex.
type Budget struct {
	max float64

	mu        sync.Mutex
	committed float64            // what the ledger holds: at open, plus commits since
	inflight  map[string]float64 // charged per record key, not yet committed
	flying    float64            // sum of inflight
	reached   chan struct{}      // closed once Spent reaches max
	closed    bool
}

// NewBudget returns a cap of max US dollars for a run that has already
// committed spent. A max of 0 or less returns nil (no cap).
func NewBudget(max, spent float64) *Budget {
	if max <= 0 {
		return nil
	}
	b := &Budget{max: max, committed: spent, inflight: map[string]float64{}, reached: make(chan struct{})}
	b.check()
	return b
}

// check closes reached once the spend reaches the cap. b.mu is held or b is
// not shared yet.
func (b *Budget) check() {
	if !b.closed && b.committed+b.flying >= b.max {
		b.closed = true
		close(b.reached)
	}
}

// Max is the cap in US dollars (0 for a nil Budget).
func (b *Budget) Max() float64 {
	if b == nil {
		return 0
	}
	return b.max
}

// Spent is what the run has spent: committed (this run and every earlier
// run in the folder) plus charged by records still in flight.
func (b *Budget) Spent() float64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.committed + b.flying
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
// calls it before each model call, so at most the calls already in flight
// when the cap is reached (one per worker) overshoot it.
func (b *Budget) Allow() error {
	if b.Reached() {
		return fmt.Errorf("%w: spent $%.4f of $%.4f", ErrBudget, b.Spent(), b.max)
	}
	return nil
}

// Charge adds usd, what one model call of the record key cost, to the spend
// in flight.
func (b *Budget) Charge(key string, usd float64) {
	if b == nil || usd == 0 {
		return
	}
	b.mu.Lock()
	b.inflight[key] += usd
	b.flying += usd
	b.check()
	b.mu.Unlock()
}

// Settle records one commit: the keys committed (their charges leave the
// spend in flight) and usd, what the committed records cost (it joins the
// committed spend). A record whose stage charged nothing (a stage without a
// meter) counts from its commit on.
func (b *Budget) Settle(keys []string, usd float64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	for _, k := range keys {
		if v, ok := b.inflight[k]; ok {
			b.flying -= v
			delete(b.inflight, k)
		}
	}
	if len(b.inflight) == 0 {
		b.flying = 0 // no float residue once nothing is in flight
	}
	b.committed += usd
	b.check()
	b.mu.Unlock()
}
