package export

import (
	"errors"
	"runtime"
	"sync"
)

// The two passes spend most of their time on work that depends on one
// record line only (reading its members, decoding its turns, converting
// them); pipelined runs that work on every core and keeps the rest (the
// selection's state, the writers) in one goroutine, in reading order.

// batchLines is how many record lines a batch carries.
const batchLines = 256

// lineBatch is a run of record lines copied from a pass's reader, with
// each line's result of the per-line work.
type lineBatch[R any] struct {
	first int // the reader's ordinal of its first line
	buf   []byte
	ends  []int
	res   []R
	done  chan struct{}
}

func (b *lineBatch[R]) line(i int) []byte {
	start := 0
	if i > 0 {
		start = b.ends[i-1]
	}
	return b.buf[start:b.ends[i]]
}

// errStopped ends a reader whose consumer failed.
var errStopped = errors.New("export: stopped")

// workers is how many goroutines do the per-line work.
func workers() int { return max(1, min(runtime.GOMAXPROCS(0), 8)) }

// pipelined calls each, the pass's reader, in a goroutine of its own and
// hands its lines (copied, in batches) to workers() goroutines that call
// work with each line's ordinal (from 0, in the reader's order), the line
// and its result; then it calls consume with each line
// and its result in the reader's order, in the calling goroutine. A line
// and its result stay valid until consume returns (results are reused:
// work must set every field it reads later). The first error of consume
// stops the reader and is returned; else the reader's.
func pipelined[R any](each func(fn func(line []byte) error) error, work func(ord int, line []byte, r *R), consume func(line []byte, r *R) error) error {
	n := workers()
	free := make(chan *lineBatch[R], 4*n)
	for range cap(free) {
		free <- &lineBatch[R]{res: make([]R, batchLines), done: make(chan struct{}, 1)}
	}
	// At most cap(free) batches exist, so sends on todo and ordered never
	// block.
	todo := make(chan *lineBatch[R], cap(free))
	ordered := make(chan *lineBatch[R], cap(free))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for b := range todo {
				for i := range b.ends {
					work(b.first+i, b.line(i), &b.res[i])
				}
				b.done <- struct{}{}
			}
		})
	}
	var readErr error
	go func() {
		defer close(ordered)
		defer close(todo)
		var cur *lineBatch[R]
		read := 0
		send := func() {
			todo <- cur
			ordered <- cur
			cur = nil
		}
		readErr = each(func(line []byte) error {
			if cur == nil {
				select {
				case cur = <-free:
					cur.buf, cur.ends, cur.first = cur.buf[:0], cur.ends[:0], read
				case <-stop:
					return errStopped
				}
			}
			cur.buf = append(cur.buf, line...)
			cur.ends = append(cur.ends, len(cur.buf))
			read++
			if len(cur.ends) == batchLines {
				send()
			}
			return nil
		})
		if cur != nil && len(cur.ends) > 0 {
			send()
		}
	}()
	var err error
	for b := range ordered {
		<-b.done
		for i := 0; err == nil && i < len(b.ends); i++ {
			if err = consume(b.line(i), &b.res[i]); err != nil {
				close(stop)
			}
		}
		if cap(b.buf) > 64<<20 {
			b.buf = nil // a batch of long lines does not stay
		}
		free <- b
	}
	wg.Wait()
	if err != nil {
		return err
	}
	return readErr
}
