package view

import (
	"context"
	"net/http"
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

// Near finds the neighbours of record i in q's list, from the records the
// server has now. It costs a pass over the sort order to place i, then
// tests records outward from it: a record that must be read (a text search,
// a filter while the index is built) is read until a match, at most
// searchBudget per side.
func (s *Server) Near(ctx context.Context, q Query, i int) (Near, error) {
	res := Near{Prev: -1, Next: -1}
	src, err := s.source(ctx)
	if err != nil {
		return res, err
	}
	w, err := src.walk(q)
	if err != nil {
		return res, err
	}
	defer w.close()
	k0 := w.pos(i)
	if k0 < 0 {
		return res, nil
	}
	t := newText(q)
	return walkOut(ctx, k0, w.n, searchBudget, w.at, func(j int) (bool, bool, error) {
		if w.free != nil && !w.free(j) {
			return false, false, nil
		}
		if !w.reads {
			return true, false, nil
		}
		ok, err := w.readPasses(j, t)
		return ok, true, err
	})
}

// walkOut finds the neighbours of position k0 in a list of n: from k0
// outward, backwards then forwards, the first position k whose record at(k) ok
// accepts. ok also says whether it read the record (the costly part): after
// every 64 reads on a side, that side stops (Near's Stopped) once budget
// is spent, and at once when ctx ends.
func walkOut(ctx context.Context, k0, n int, budget time.Duration, at func(k int) int, ok func(j int) (match, read bool, err error)) (Near, error) {
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
	if res.Prev, res.PrevStopped, err = walk(-1); err != nil {
		return res, err
	}
	res.Next, res.NextStopped, err = walk(1)
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
