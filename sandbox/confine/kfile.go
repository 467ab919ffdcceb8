package confine

import (
	"errors"
	"io/fs"

	"golang.org/x/sys/unix"
)

// ReadKernelFile reads a small file the kernel makes as it is read (procfs,
// cgroupfs) with plain system calls: open, reads until the end, close. A
// pooled sandbox's reset reads some twenty of them; os.ReadFile costs seven
// calls more for each (a stat for the size and the runtime's poller trying,
// and failing, to take the descriptor), which is most of their cost. Errors
// are *fs.PathError, as os.ReadFile's (fs.ErrNotExist, fs.ErrPermission).
func ReadKernelFile(path string) ([]byte, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	b, err := ReadFD(fd, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	return b, nil
}

// ErrTooLong is ReadFD's error for a file longer than its limit.
var ErrTooLong = errors.New("longer than the limit")

// ReadFD reads fd from where it is to its end with plain reads (retried
// on EINTR); more than limit bytes (limit > 0) is ErrTooLong.
func ReadFD(fd int, limit int) ([]byte, error) { return ReadFDSize(fd, 1024, limit) }

// ReadFDSize is ReadFD into a first buffer of size bytes: for a file whose
// size is known, one read fills it and one more sees its end.
func ReadFDSize(fd, size, limit int) ([]byte, error) {
	buf := make([]byte, 0, max(size, 1))
	for {
		if limit > 0 && len(buf) > limit {
			return nil, ErrTooLong
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}
