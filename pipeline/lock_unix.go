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

// FolderInUse reports whether a run holds dir's lock now. It takes the lock
// and gives it back at once; a folder that cannot be opened is not in use.
func FolderInUse(dir string) bool {
	f, err := lockDir(dir)
	if err != nil {
		var pe *os.PathError
		return !errors.As(err, &pe)
	}
	_ = unlockDir(f)
	return false
}
