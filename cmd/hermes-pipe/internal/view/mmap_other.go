//go:build !unix

package view

import "os"

// mapFile reads the file at path into memory (no mapping off unix).
func mapFile(path string) (data []byte, release func() error, err error) {
	data, err = os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}

// scratchWords returns n zeroed words (on the heap off unix) and the
// function that releases them.
func scratchWords(n int) ([]uint64, func()) { return make([]uint64, n), func() {} }
