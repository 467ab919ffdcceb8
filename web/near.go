package web

import (
	"context"
	"net/http"
	"strings"
	"time"
)

// Near is where j and k go from a record: the records before and after it
// in the list a query gives (its filters, text search and sort), -1 when
// there is none. Stopped says a text search ran out of its budget on that
// side before finding one.
type Near struct {
	Prev        int  `json:"prev"`
	Next        int  `json:"next"`
	PrevStopped bool `json:"prev_stopped,omitempty"`
	NextStopped bool `json:"next_stopped,omitempty"`
}

// Near finds the neighbours of record i in q's list. It costs a pass over
// the sort order to place i, then the index filters outward from it; a text
// search reads records outward from i until a match, at most searchBudget
// per side.
func (s *Server) Near(ctx context.Context, q Query, i int) (Near, error) {
	if s.idx() == nil {
		return s.nearBuilding(ctx, q, i)
	}
	res := Near{Prev: -1, Next: -1}
	l, err := s.list(q)
	if err != nil {
		return res, err
	}
	n, order, desc, at, match := l.n, l.order, l.desc, l.at, l.match
	// place i in the order
	k0 := -1
	if order == nil {
		k0 = i
		if desc {
			k0 = n - 1 - i
		}
	} else {
		for k, v := range order {
			if int(v) == i {
				k0 = k
				break
			}
		}
		if desc && k0 >= 0 {
			k0 = n - 1 - k0
		}
	}
	if k0 < 0 {
		return res, nil
	}
	needle := []byte(strings.ToLower(q.Text))
	sc := newLineScanner(s)
	defer sc.close()
	return walkOut(ctx, k0, n, 1, searchBudget, at, func(j int) (bool, bool, error) {
		if !match(j) {
			return false, false, nil
		}
		if len(needle) == 0 {
			return true, false, nil
		}
		line, err := sc.line(j)
		if err != nil {
			return false, false, err
		}
		return sc.contains(line, needle), true, nil
	})
}

// walkOut finds the neighbours of position k0 in a list of n: from k0
// outward, -step then +step, the first position k whose record at(k) ok
// accepts. ok also says whether it read the record (the costly part): after
// every 64 reads on a side, that side stops (Near's Stopped) once budget
// is spent, and at once when ctx ends.
func walkOut(ctx context.Context, k0, n, step int, budget time.Duration, at func(k int) int, ok func(j int) (match, read bool, err error)) (Near, error) {
	res := Near{Prev: -1, Next: -1}
	walk := func(step int) (int, bool, error) {
		deadline := time.Now().Add(budget)
		reads := 0
		for k := k0 + step; k >= 0 && k < n; k += step {
			if ctx.Err() != nil || reads > 0 && reads%64 == 0 && time.Now().After(deadline) {
				return -1, true, nil
			}
			j := at(k)
			m, read, err := ok(j)
			if err != nil {
				return -1, false, err
			}
			if read {
				reads++
			}
			if m {
				return j, false, nil
			}
		}
		return -1, false, nil
	}
	var err error
	if res.Prev, res.PrevStopped, err = walk(-step); err != nil {
		return res, err
	}
	res.Next, res.NextStopped, err = walk(step)
	return res, err
}

func (s *Server) near(w http.ResponseWriter, r *http.Request) {
	i, ok := s.index(w, r)
	if !ok {
		return
	}
	q, err := parseQuery(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	res, err := s.Near(r.Context(), q, i)
	if err != nil {
		httpError(w, err)
		return
	}
	writeJSON(w, res)
}
