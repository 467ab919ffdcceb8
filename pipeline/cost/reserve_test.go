package cost

import (
	"errors"
	"math"
	"testing"
)

// TestBudgetReserve: a reservation counts as spend in flight; one that would
// pass the cap is refused with ErrBudget, adds nothing and stops the run
// (Done closed, later reservations and Allow refused); Adjust replaces a
// reservation by the real cost in one step, and Settle moves it to
// committed; a nil Budget reserves anything.
func TestBudgetReserve(t *testing.T) {
	var none *Budget
	if none.Reserve("k", 1e9) != nil {
		t.Fatal("a nil Budget must reserve anything")
	}
	none.Adjust("k", 1, 2)

	b := NewBudget(10, 2)
	if err := b.Reserve("a", 5); err != nil {
		t.Fatal(err)
	}
	if err := b.Reserve("b", 2); err != nil {
		t.Fatal(err)
	}
	if s := b.Spent(); s != 9 || b.Reached() {
		t.Fatalf("spent %v reached %v, want 9 and not reached", s, b.Reached())
	}
	b.Adjust("a", 5, 3) // a's call cost less than projected
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
	b.Adjust("b", 2, 0) // b's request failed: nothing billed
	b.Settle([]string{"a"}, 3)
	if s := b.Spent(); math.Abs(s-5) > 1e-12 {
		t.Fatalf("after settling a: spent %v, want 5", s)
	}
	if err := NewBudget(10, 0).Reserve("x", 10); err != nil {
		t.Fatalf("a reservation reaching the cap exactly must pass: %v", err)
	}
}
