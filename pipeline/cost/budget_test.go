package cost

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// journalOf keeps the reservations and charges a Budget journals; fail,
// when set, is the error of every reservation.
type journalOf struct {
	lines []string
	fail  error
}

func (j *journalOf) Reserved(key string, call int, res int64, usd float64) error {
	if j.fail != nil {
		return j.fail
	}
	j.lines = append(j.lines, fmt.Sprintf("reserve %d %s/%d/%g", res, key, call, usd))
	return nil
}

func (j *journalOf) Capped(max float64) { j.lines = append(j.lines, fmt.Sprintf("capped %g", max)) }

func (j *journalOf) Charged(key string, call int, id string, res int64, usd float64) {
	if res != 0 {
		j.lines = append(j.lines, fmt.Sprintf("settle %d %s/%d/%g", res, key, call, usd))
		return
	}
	j.lines = append(j.lines, fmt.Sprintf("%s/%d/%s/%g", key, call, id, usd))
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
	if got := fmt.Sprint(j.lines); got != "[a/1//2 a/2//1 b/1//1 b/3//2 capped 10]" {
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

// TestBudgetBeginEnd: a call's projected cost is journalled as a numbered
// reservation before it goes out and counts as spent while open; End
// replaces it by the real cost with a line naming the reservation, also
// for a call that cost nothing. A call whose projection does not fit under
// the cap is refused (ErrBudget, not journalled) and no call starts after
// it; a journal that cannot be written refuses the call; a meter only
// journals; a nil Budget does nothing.
func TestBudgetBeginEnd(t *testing.T) {
	bg := context.Background()
	var none *Budget
	if r, err := none.Begin(bg, "k", 1, 5); err != nil || r != (Reservation{}) {
		t.Fatalf("nil Budget: %v %v", r, err)
	}
	none.End(Reservation{}, 1)

	b := NewBudget(10, 2)
	j := &journalOf{}
	b.Keep(j, nil)
	r1, err := b.Begin(bg, "a", 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := b.Begin(bg, "b", 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	if s := b.Spent(); s != 9 {
		t.Fatalf("spent with two open reservations %v, want 9", s)
	}
	if _, err := b.Begin(bg, "c", 1, 8.5); !errors.Is(err, ErrBudget) || !b.Reached() {
		t.Fatalf("a projection past the cap even without the calls in flight: %v, reached %v", err, b.Reached())
	}
	if _, err := b.Begin(bg, "c", 1, 0.1); !errors.Is(err, ErrBudget) {
		t.Fatalf("a call after a refusal: %v", err)
	}
	b.End(r1, 2.5)
	b.End(r2, 0)
	b.End(Reservation{}, 7) // settles nothing
	if s := b.Spent(); s != 4.5 {
		t.Fatalf("spent after both settled %v, want 4.5", s)
	}
	want := "[reserve 1 a/1/3 reserve 2 b/1/4 capped 10 settle 1 a/1/2.5 settle 2 b/1/0]"
	if got := fmt.Sprint(j.lines); got != want {
		t.Errorf("journal %s, want %s", got, want)
	}

	// A folder whose run reached a cap of 10 (4.5 spent: the refused
	// call did not fit) starts a run capped at 10 or less at the cap; a
	// higher cap runs.
	for _, c := range []struct {
		max     float64
		reached bool
	}{{10, true}, {6, true}, {10.01, false}} {
		again := NewBudget(c.max, b.Spent())
		again.StoppedAt(10)
		if again.Reached() != c.reached {
			t.Errorf("a run capped at %v after a run reached 10: reached %v", c.max, again.Reached())
		}
	}
	none.StoppedAt(1)

	broken := NewBudget(10, 0)
	broken.Keep(&journalOf{fail: errors.New("disk full")}, nil)
	if _, err := broken.Begin(bg, "a", 1, 1); err == nil || errors.Is(err, ErrBudget) || broken.Spent() != 0 {
		t.Fatalf("an unwritable journal: %v, spent %v", err, broken.Spent())
	}

	m := NewMeter(0)
	mj := &journalOf{}
	m.Keep(mj, nil)
	r, err := m.Begin(bg, "a", 1, 1e9)
	if err != nil {
		t.Fatal(err)
	}
	m.End(r, 1)
	if m.Spent() != 1 || len(mj.lines) != 2 {
		t.Fatalf("meter: spent %v, journal %v", m.Spent(), mj.lines)
	}
}

// TestBudgetBeginWaits: a call that fits under the cap only once the calls
// in flight end (their reservations are projections) waits for them rather
// than ending the run: it goes out when one ends for less than projected,
// and is refused when what they really cost leaves no room. Its context
// ends the wait with the context's error, not ErrBudget.
func TestBudgetBeginWaits(t *testing.T) {
	bg := context.Background()
	b := NewBudget(10, 0)
	var j journalOf // written under the budget's lock; read after got
	b.Keep(&j, nil)
	r1, err := b.Begin(bg, "a", 1, 6)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error)
	go func() {
		_, err := b.Begin(bg, "b", 1, 5)
		got <- err
	}()
	b.End(r1, 2)
	if err := <-got; err != nil || b.Spent() != 7 {
		t.Fatalf("after the call in flight cost $2: %v, spent %v", err, b.Spent())
	}
	// The waiting call's reservation comes after the settle that made room
	// for it, whenever the goroutine ran: had it gone out at once, it would
	// have been journalled before it.
	if want := []string{"reserve 1 a/1/6", "settle 1 a/1/2", "reserve 2 b/1/5"}; !slices.Equal(j.lines, want) {
		t.Fatalf("journal %q, want %q", j.lines, want)
	}

	c := NewBudget(10, 0)
	r, _ := c.Begin(bg, "a", 1, 6)
	go func() {
		_, err := c.Begin(bg, "b", 1, 5)
		got <- err
	}()
	c.End(r, 6) // no room left for $5 either way
	if err := <-got; !errors.Is(err, ErrBudget) || !c.Reached() {
		t.Fatalf("after the call in flight cost its projection: %v", err)
	}

	d := NewBudget(10, 0)
	if _, err := d.Begin(bg, "a", 1, 6); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	go func() {
		_, err := d.Begin(ctx, "b", 1, 5)
		got <- err
	}()
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) || errors.Is(err, ErrBudget) || d.Reached() {
		t.Fatalf("a wait whose context ended: %v", err)
	}
}
