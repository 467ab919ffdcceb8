package cost

import (
	"errors"
	"testing"
)

// TestBudgetMeter: the spend starts from what was committed, grows with
// charges in flight, moves to committed on Settle (a record that charged
// nothing counts from its commit), and the cap closes Done and makes Allow
// fail with ErrBudget; a nil Budget is no cap.
func TestBudgetMeter(t *testing.T) {
	if NewBudget(0, 5) != nil {
		t.Fatal("a cap of 0 must be no cap")
	}
	var none *Budget
	none.Charge("k", 1)
	none.Settle([]string{"k"}, 1)
	if none.Allow() != nil || none.Reached() || none.Done() != nil {
		t.Fatal("a nil Budget must be a no-op")
	}

	b := NewBudget(10, 4)
	b.Charge("a", 2)
	b.Charge("a", 1)
	b.Charge("b", 1)
	if s := b.Spent(); s != 8 || b.Reached() {
		t.Fatalf("spent %v reached %v, want 8 and not reached", s, b.Reached())
	}
	b.Settle([]string{"a"}, 3) // a's charges become committed: no change
	if s := b.Spent(); s != 8 {
		t.Fatalf("after settling a: spent %v, want 8", s)
	}
	b.Settle([]string{"c"}, 1.5) // a record whose stage charged nothing
	if s := b.Spent(); s != 9.5 || b.Allow() != nil {
		t.Fatalf("spent %v, allow %v", s, b.Allow())
	}
	b.Charge("b", 0.5)
	select {
	case <-b.Done():
	default:
		t.Fatal("Done not closed at the cap")
	}
	if err := b.Allow(); !errors.Is(err, ErrBudget) {
		t.Fatalf("Allow at the cap: %v", err)
	}
	if NewBudget(3, 3).Allow() == nil {
		t.Fatal("a folder that already spent the cap must be reached at once")
	}
}
