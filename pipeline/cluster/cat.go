package cluster

import (
	"bufio"
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
)

// CatAll writes the live records of every output folder in dirs (the shards
// of one run, from ShardDirs) to w as one stream in (prompt_index, sample,
// key) order, the order pipeline.Cat gives one folder. It is CatAllWith with
// default options.
func CatAll(dirs []string, w io.Writer) error {
	return CatAllWith(dirs, w, pipeline.CatOptions{})
}

// CatAllWith merges the pipeline.CatWith streams of dirs: it reads each
// folder's ledger for the order of its lines, runs one CatWith per folder
// into a pipe and always writes the smallest head next. Lines are copied
// verbatim. It blocks until every stream ends; memory is each folder's
// ledger view (about 100 bytes per key) plus one line per folder. A folder
// that a running shard appends to while it is read may disagree with its
// ledger view; CatAllWith then fails and asks to retry.
func CatAllWith(dirs []string, w io.Writer, opts pipeline.CatOptions) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	err := EachAll(dirs, opts, func(line []byte) error {
		if _, err := bw.Write(line); err != nil {
			return fmt.Errorf("cat: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("cat: %w", err)
	}
	return nil
}

// EachAll calls fn with every line CatAllWith writes, in its order (each
// line ends with its newline and is valid only during the call). An error
// of fn ends it and is returned as it is.
func EachAll(dirs []string, opts pipeline.CatOptions, fn func(line []byte) error) error {
	if len(dirs) == 1 && !opts.Final {
		// One folder needs no merge, nor a pipe to zip with its order.
		return pipeline.EachRecord(dirs[0], func(_ pipeline.RecordRef, line []byte) error { return fn(line) })
	}
	streams := make([]*catStream, 0, len(dirs))
	var wg sync.WaitGroup
	defer func() {
		for _, s := range streams {
			s.pr.CloseWithError(errors.New("cat stopped"))
		}
		wg.Wait()
	}()
	h := &catHeap{}
	for _, dir := range dirs {
		lv, err := readLedger(dir)
		if err != nil {
			return fmt.Errorf("cat %s: %w", dir, err)
		}
		var order []unit
		for _, u := range lv.units {
			if u.record && !(opts.Final && u.outcome.Retryable()) {
				order = append(order, u)
			}
		}
		pr, pw := io.Pipe()
		s := &catStream{dir: dir, order: order, pr: pr, r: bufio.NewReaderSize(pr, 256<<10)}
		streams = append(streams, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			pw.CloseWithError(pipeline.CatWith(dir, pw, opts))
		}()
		ok, err := s.next()
		if err != nil {
			return err
		}
		if ok {
			heap.Push(h, s)
		}
	}
	for h.Len() > 0 {
		s := (*h)[0]
		if err := fn(s.line); err != nil {
			return err
		}
		ok, err := s.next()
		if err != nil {
			return err
		}
		if ok {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
	return nil
}

// catStream is one folder's Cat output zipped with its ledger order.
type catStream struct {
	dir   string
	order []unit
	i     int // index in order of the current line
	pr    *io.PipeReader
	r     *bufio.Reader
	line  []byte
}

// next reads the following line; ok is false at a clean end.
func (s *catStream) next() (bool, error) {
	line, err := s.r.ReadBytes('\n')
	if s.line != nil {
		s.i++
	}
	// The pipe ends with exactly io.EOF when CatWith succeeded; any other
	// error is CatWith's own, which already names the folder.
	if err == io.EOF && len(line) == 0 {
		if s.i != len(s.order) {
			return false, fmt.Errorf("cat %s: %d records, but its ledger listed %d: the folder changed while it was read; try again", s.dir, s.i, len(s.order))
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if s.i >= len(s.order) {
		return false, fmt.Errorf("cat %s: more records than its ledger listed: the folder changed while it was read; try again", s.dir)
	}
	s.line = line
	return true, nil
}

type catHeap []*catStream

func (h catHeap) Len() int { return len(h) }
func (h catHeap) Less(i, j int) bool {
	a, b := h[i].order[h[i].i], h[j].order[h[j].i]
	return cmp.Or(cmp.Compare(a.pi, b.pi), cmp.Compare(a.sample, b.sample), strings.Compare(a.key, b.key)) < 0
}
func (h catHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *catHeap) Push(x any)   { *h = append(*h, x.(*catStream)) }
func (h *catHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
