//go:build !unix

package pipeline

import (
	"fmt"
	"os"
)

// lockDir opens the folder; advisory locking is only implemented on unix.
func lockDir(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("lock output folder: %w", err)
	}
	return f, nil
}

func unlockDir(f *os.File) error { return f.Close() }

// FolderInUse cannot tell without advisory locks; it reports false.
func FolderInUse(dir string) bool { return false }
