package confine

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// ReadKernelFile reads what os.ReadFile reads, also past its first
// kilobyte, and fails the same way on a missing file.
func TestReadKernelFile(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1000) // several of its reads
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, big, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{p, "/proc/self/status", "/proc/self/limits"} {
		got, err := ReadKernelFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if path != "/proc/self/status" && !bytes.Equal(got, want) || len(got) == 0 {
			t.Fatalf("%s: read %d bytes, want %d", path, len(got), len(want))
		}
	}
	if _, err := ReadKernelFile(filepath.Join(t.TempDir(), "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing file: %v, want fs.ErrNotExist", err)
	}
	// ReadFD stops at its limit.
	fd, err := syscall.Open(p, syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if b, err := ReadFD(fd, 4096); !errors.Is(err, ErrTooLong) {
		t.Fatalf("ReadFD over its limit: %d bytes, %v; want ErrTooLong", len(b), err)
	}
}
