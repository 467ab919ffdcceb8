package export

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
)

// TestPipelinedKeepsOrder runs the per-line work on several goroutines and
// checks every line reaches consume once, in the reader's order, with its
// own result and ordinal; then that a consumer's error stops the reader and
// a reader's error is returned.
func TestPipelinedKeepsOrder(t *testing.T) {
	const n = 10*batchLines + 7
	each := func(limit int, fail error) func(fn func(line []byte) error) error {
		return func(fn func(line []byte) error) error {
			for i := range limit {
				if err := fn([]byte("line " + strconv.Itoa(i))); err != nil {
					return fmt.Errorf("read: %w", err)
				}
			}
			return fail
		}
	}
	type res struct {
		ord  int
		text string
	}
	work := func(ord int, line []byte, r *res) { r.ord, r.text = ord, "done "+string(line) }
	got := 0
	err := pipelined(each(n, nil), work, func(line []byte, r *res) error {
		if want := "line " + strconv.Itoa(got); string(line) != want || r.text != "done "+want || r.ord != got {
			return fmt.Errorf("line %d: got %q, %+v", got, line, r)
		}
		got++
		return nil
	})
	if err != nil || got != n {
		t.Fatalf("%d of %d lines, %v", got, n, err)
	}
	stop := errors.New("consumer stops")
	read := 0
	err = pipelined(func(fn func(line []byte) error) error {
		return each(1<<30, nil)(func(line []byte) error { read++; return fn(line) })
	}, work, func(_ []byte, r *res) error {
		if r.ord == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || read >= 1<<30 {
		t.Fatalf("consumer's error: got %v after %d lines read", err, read)
	}
	readErr := errors.New("shard cut")
	if err := pipelined(each(5, readErr), work, func([]byte, *res) error { return nil }); !errors.Is(err, readErr) {
		t.Fatalf("reader's error: got %v", err)
	}
}
