package cost

import (
	"errors"
	"fmt"
	"math"
	"testing"
)

// TestBudgetReserve: a reservation counts as spend; one that would pass
// the cap is refused with ErrBudget, adds nothing and stops the run (Done
// closed, later reservations and Allow refused); Adjust replaces a
// reservation by the real cost in one step (journalled, the reservation
// not), and Settle ends what is still reserved; a nil Budget reserves
// anything.
func TestBudgetReserve(t *testing.T) {
	var none *Budget
	if none.Reserve("k", 1e9) != nil {
		t.Fatal("a nil Budget must reserve anything")
	}
	none.Adjust("k", 1, 1, 2)

	b := NewBudget(10, 2)
	var j journalOf
	b.Keep(&j, nil)
	if err := b.Reserve("a", 5); err != nil {
		t.Fatal(err)
	}
	if err := b.Reserve("b", 2); err != nil {
		t.Fatal(err)
	}
	if s := b.Spent(); s != 9 || b.Reached() {
		t.Fatalf("spent %v reached %v, want 9 and not reached", s, b.Reached())
	}
	b.Adjust("a", 1, 5, 3) // a's call cost less than projected
	if s := b.Spent(); s != 7 {
		t.Fatalf("after the adjustment: spent %v, want 7", s)
	}
	err := b.Reserve("c", 3.5)
	if !errors.Is(err, ErrBudget) {
		t.Fatalf("a reservation past the cap: %v", err)
	}
	if s := b.Spent(); s != 7 || !b.Reached() || b.Allow() == nil {
		t.Fatalf("after a refusal: spent %v, reached %v: want 7, reached, Allow refusing", s, b.Reached())
	}
	if b.Reserve("d", 0.5) == nil {
		t.Fatal("a budget that refused once must refuse every later reservation")
	}
	b.Adjust("b", 1, 2, 0) // b's request failed: nothing billed
	b.Settle([]string{"a"})
	if s := b.Spent(); math.Abs(s-5) > 1e-12 {
		t.Fatalf("after settling a: spent %v, want 5", s)
	}
	if got := fmt.Sprint(j.lines); got != "[a/1//3 capped 10]" {
		t.Errorf("journal %s, want only a's real cost and the refusal's mark", got)
	}
	if err := NewBudget(10, 0).Reserve("x", 10); err != nil {
		t.Fatalf("a reservation reaching the cap exactly must pass: %v", err)
	}
}

// TestBudgetAdjustOnce: a call named by an id is charged once over the
// folder's runs: an id an earlier run journalled (Keep) or this run
// charged only ends its reservation. Hold reserves past the cap.
func TestBudgetAdjustOnce(t *testing.T) {
	b := NewBudget(10, 1)
	var j journalOf
	b.Keep(&j, map[string]bool{"old": true})
	b.Hold("k", 20) // a request a killed run submitted: held whatever the cap
	if !b.Reached() || b.Spent() != 21 {
		t.Fatalf("hold: spent %v reached %v", b.Spent(), b.Reached())
	}
	b.AdjustOnce("k", 1, "old", 20, 4) // its reply, charged by the killed run
	if s := b.Spent(); s != 1 {
		t.Fatalf("after a reply charged before: spent %v, want 1", s)
	}
	b.AdjustOnce("k", 2, "new", 0, 2)
	b.AdjustOnce("k", 2, "new", 0, 2) // read again
	if s := b.Spent(); s != 3 || !b.Charged("new") || b.Charged("other") {
		t.Fatalf("spent %v, want 3", s)
	}
	if got := fmt.Sprint(j.lines); got != "[capped 10 k/2/new/2]" {
		t.Errorf("journal %s", got)
	}
}
