package pipeline

import (
	"container/heap"
	"slices"
	"sync"
	"time"
)

// Writing a shard ahead of its commit.
//
// A commit writes its batch's rows in Cat's order (catOrder), so a batch
// was written whole when it was committed: the last one of a run (up to
// MaxShardRows records, 3.5 MB in scripts/bench-generate.sh's runs) was
// written and fsynced after the last rollout ended, 8-14 ms that every run
// waited for before it could exit. Most of those rows were done long
// before: once no record in the stages can sort before a row, the row's
// place in the shard is known. The writer loop writes such rows into the
// batch's temp file as they become settled (prewrite), and the commit
// writes only the rest.
//
// What bounds a settled row is the least record in the stages (inflight):
// the rows of a record sort with its input's prompt index and sample,
// unless a stage fans a record out into others of its own numbering, and a
// source reads rows in order, unless it does not. So the bound is a guess
// and the commit checks it: the batch, sorted, must start with the rows
// written ahead, in that order, or the commit writes the whole batch again
// into a new temp file. The output is the same bytes either way.

// prewriteEvery is how often the writer loop looks for settled rows (a
// variable for tests).
var prewriteEvery = 5 * time.Millisecond

// rowKey is where a row sorts: catOrder's fields.
type rowKey struct {
	pi, sample int64
	key        string
}

func (a rowKey) compare(b rowKey) int { return catOrder(a.pi, a.sample, a.key, b.pi, b.sample, b.key) }

// inflight is the set of records in the stages, by input key, with its
// least member in catOrder: dispatch adds a record, the writer loop
// removes it when its rows arrive (a record the stages dropped is removed
// by its worker).
type inflight struct {
	mu   sync.Mutex
	h    rowHeap
	live map[string]bool // every key in h: true while its record is in the stages
}

func newInflight() *inflight { return &inflight{live: map[string]bool{}} }

func (f *inflight) add(pi, sample int64, key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, inHeap := f.live[key]; !inHeap {
		heap.Push(&f.h, rowKey{pi, sample, key})
	}
	f.live[key] = true
}

// remove takes key out of the set; a key not in it is ignored (the rows
// of a fanned-out record carry keys of their own).
func (f *inflight) remove(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live[key] {
		f.live[key] = false // popped by least once it reaches the top
	}
}

// least returns the least record in the stages; ok is false when there is
// none.
func (f *inflight) least() (k rowKey, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.h) > 0 && !f.live[f.h[0].key] {
		delete(f.live, f.h[0].key)
		heap.Pop(&f.h)
	}
	if len(f.h) == 0 {
		return rowKey{}, false
	}
	return f.h[0], true
}

type rowHeap []rowKey

func (h rowHeap) Len() int           { return len(h) }
func (h rowHeap) Less(i, j int) bool { return h[i].compare(h[j]) < 0 }
func (h rowHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *rowHeap) Push(x any)        { *h = append(*h, x.(rowKey)) }
func (h *rowHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func keyOf(p *pending) rowKey { return rowKey{p.pi, p.sample, p.key} }

// prewrite writes into b's temp file (created at the first call) the rows
// of b that sort before every record still in the stages, in catOrder, and
// moves them from b.rows to b.pre. A failed write, or a row that sorts
// before what was written already, ends prewriting for b: its commit then
// writes every row itself.
func (o *Output) prewrite(b *batch, bound rowKey, bounded bool) {
	if b.preOff || len(b.rows) == 0 {
		return
	}
	isSettled := func(p *pending) bool { return !bounded || keyOf(p).compare(bound) < 0 }
	var settled []pending // most looks find none and allocate nothing
	for i := range b.rows {
		if isSettled(&b.rows[i]) {
			settled = append(settled, b.rows[i])
		}
	}
	if len(settled) == 0 {
		return
	}
	slices.SortStableFunc(settled, func(x, y pending) int { return keyOf(&x).compare(keyOf(&y)) })
	if n := len(b.pre); n > 0 && keyOf(&settled[0]).compare(keyOf(&b.pre[n-1])) <= 0 {
		o.stopPrewrite(b) // the bound was wrong: the commit writes all
		return
	}
	if b.file == nil {
		f, err := createShard(o.format, o.subDir(b.sub))
		if err != nil {
			b.preOff = true
			return
		}
		b.file = f
	}
	if err := b.file.write(settled); err != nil {
		o.stopPrewrite(b)
		return
	}
	b.pre = append(b.pre, settled...)
	b.rows = slices.DeleteFunc(b.rows, func(p pending) bool { return isSettled(&p) })
	// What reached the file goes to disk now, not in the commit's fsync.
	startWriteback(b.file.f)
}

// stopPrewrite ends prewriting for b: its rows go back to b.rows and its
// temp file is removed.
func (o *Output) stopPrewrite(b *batch) {
	b.preOff = true
	if b.file != nil {
		b.file.abort()
		b.file = nil
	}
	b.rows = append(b.pre, b.rows...)
	b.pre = nil
}

// takePrewritten merges b's rows into catOrder for its commit and returns
// the temp file holding the first n of them, or nil when b has none or
// when a row not written ahead sorts before the last one that was (the
// bound was wrong: the file is removed and the commit writes every row).
func (b *batch) takePrewritten() (f *tempShard, n int) {
	f, pre := b.file, b.pre
	if f != nil && len(pre) > 0 {
		last := keyOf(&pre[len(pre)-1])
		for i := range b.rows {
			if keyOf(&b.rows[i]).compare(last) <= 0 {
				f.abort()
				f = nil
				break
			}
		}
	}
	b.rows = append(pre, b.rows...)
	b.pre, b.file = nil, nil
	slices.SortStableFunc(b.rows, func(x, y pending) int {
		return catOrder(x.pi, x.sample, x.key, y.pi, y.sample, y.key)
	})
	if f == nil {
		return nil, 0
	}
	return f, len(pre)
}

// discard drops b uncommitted (the run failed): its temp file, if any, is
// removed.
func (b *batch) discard() {
	if b.file != nil {
		b.file.abort()
		b.file = nil
	}
}
