//go:build unix

package pipeline

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDir takes an exclusive advisory lock on the folder itself, so two runs
// cannot write to one output folder. The lock dies with the process.
func lockDir(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("lock output folder: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("output folder %s is in use by another run", dir)
		}
		return nil, fmt.Errorf("lock output folder: %w", err)
	}
	return f, nil
}

func unlockDir(f *os.File) error {
	return f.Close() // closing the descriptor releases the lock
}
