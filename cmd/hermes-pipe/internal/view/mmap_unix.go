//go:build unix

package view

import (
	"os"
	"syscall"
)

// mapFile maps the file at path read-only; release unmaps it. Its pages are
// read from the page cache as they are touched and count to the process
// only while they are.
func mapFile(path string) (data []byte, release func() error, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if fi.Size() == 0 {
		return nil, func() error { return nil }, nil
	}
	data, err = syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, &os.PathError{Op: "mmap", Path: path, Err: err}
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}

// scratchWords returns n zeroed words outside the Go heap (an anonymous
// private mapping) and the function that unmaps them: a large table that
// lives for one pass is given back to the system when the pass ends,
// rather than left to the collector, whose next goal it would set. Where
// the mapping fails they are allocated on the heap.
func scratchWords(n int) ([]uint64, func()) {
	if n == 0 {
		return nil, func() {}
	}
	b, err := syscall.Mmap(-1, 0, n*8, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]uint64, n), func() {}
	}
	return view[uint64](b, n), func() { syscall.Munmap(b) }
}
