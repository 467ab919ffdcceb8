package cost

import (
	"errors"
	"fmt"
	"testing"
)

// journalOf keeps the charges a Budget journals.
type journalOf []string

func (j *journalOf) Charged(key string, call int, id string, usd float64) {
	*j = append(*j, fmt.Sprintf("%s/%d/%s/%g", key, call, id, usd))
}

// TestBudgetMeter: the spend starts from what the folder spent, grows with
// every charge (each journalled in order), and a commit (Settle) takes
// nothing off: the charges are what was paid. The cap closes Done and makes
// Allow fail with ErrBudget; a nil Budget is no cap, a meter counts
// without a cap.
func TestBudgetMeter(t *testing.T) {
	if NewBudget(0, 5) != nil {
		t.Fatal("a cap of 0 must be no cap")
	}
	var none *Budget
	none.Charge("k", 1, 1)
	none.Settle([]string{"k"})
	if none.Allow() != nil || none.Reached() || none.Done() != nil {
		t.Fatal("a nil Budget must be a no-op")
	}

	b := NewBudget(10, 4)
	var j journalOf
	b.Keep(&j, nil)
	b.Charge("a", 1, 2)
	b.Charge("a", 2, 1)
	b.Charge("b", 1, 1)
	b.Charge("b", 2, 0) // free: nothing to journal
	if s := b.Spent(); s != 8 || b.Reached() {
		t.Fatalf("spent %v reached %v, want 8 and not reached", s, b.Reached())
	}
	b.Settle([]string{"a"})
	if s := b.Spent(); s != 8 {
		t.Fatalf("after settling a: spent %v, want 8", s)
	}
	b.Charge("b", 3, 2)
	select {
	case <-b.Done():
	default:
		t.Fatal("Done not closed at the cap")
	}
	if err := b.Allow(); !errors.Is(err, ErrBudget) {
		t.Fatalf("Allow at the cap: %v", err)
	}
	if got := fmt.Sprint(j); got != "[a/1//2 a/2//1 b/1//1 b/3//2]" {
		t.Errorf("journal %s", got)
	}
	if NewBudget(3, 3).Allow() == nil {
		t.Fatal("a folder that already spent the cap must be reached at once")
	}

	m := NewMeter(1)
	m.Charge("a", 1, 1e6)
	if m.Reached() || m.Allow() != nil || m.Reserve("a", 1e9) != nil || m.Spent() != 1+1e6+1e9 || m.Max() != 0 {
		t.Fatalf("a meter must count without a cap: spent %v", m.Spent())
	}
}
