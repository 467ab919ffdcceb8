package compress

import (
	"context"
	"sync"
)

// DefaultMaxBytesInFlight bounds the bytes of the input rows being
// compressed at once (Options.MaxBytesInFlight).
const DefaultMaxBytesInFlight = 64 << 20

// rowBytes is a byte-weighted semaphore over the rows being compressed:
// the source takes a row's length before it hands the row out (blocking
// while the rows in the stage hold too much), the stage gives it back when
// the row is done. A row longer than the bound waits until it is alone. So
// the rows in work hold at most max(bound, longest row) of input bytes,
// whatever --workers is.
type rowBytes struct {
	max  int64
	mu   sync.Mutex
	held int64
	free chan struct{} // closed and replaced at each release
}

func newRowBytes(max int64) *rowBytes {
	return &rowBytes{max: max, free: make(chan struct{})}
}

// acquire waits until n bytes (at most the bound) fit, or ctx ends.
func (r *rowBytes) acquire(ctx context.Context, n int) error {
	w := min(int64(n), r.max)
	for {
		r.mu.Lock()
		if r.held == 0 || r.held+w <= r.max {
			r.held += w
			r.mu.Unlock()
			return nil
		}
		free := r.free
		r.mu.Unlock()
		select {
		case <-free:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// release gives back what acquire(n) took.
func (r *rowBytes) release(n int) {
	w := min(int64(n), r.max)
	r.mu.Lock()
	r.held -= w
	close(r.free)
	r.free = make(chan struct{})
	r.mu.Unlock()
}
