package llm

import (
	"errors"
	"fmt"
	"testing"
)

// TestRetryCountsByCause: each failure kind lands in its own counter, and a
// nil *RetryCounts is a no-op.
func TestRetryCountsByCause(t *testing.T) {
	var r RetryCounts
	r.count(429, errors.New("slow down"))
	r.count(503, errors.New("unavailable"))
	r.count(500, errors.New("boom"))
	r.count(0, fmt.Errorf("%w after 1m", ErrTimeout))
	r.count(0, fmt.Errorf("%w: bad JSON", ErrMalformed))
	r.count(0, errors.New("connection refused"))
	r.count(408, errors.New("request timeout"))
	if r.RateLimited.Load() != 1 || r.Server.Load() != 2 || r.Timeout.Load() != 1 || r.Malformed.Load() != 1 || r.Other.Load() != 2 || r.Total() != 7 {
		t.Fatalf("counts 429=%d 5xx=%d timeout=%d malformed=%d other=%d total=%d",
			r.RateLimited.Load(), r.Server.Load(), r.Timeout.Load(), r.Malformed.Load(), r.Other.Load(), r.Total())
	}
	var none *RetryCounts
	none.count(429, nil)
	if none.Total() != 0 {
		t.Fatal("nil RetryCounts counted")
	}
}
