package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// resolve returns path made absolute against the session's current folder:
// the one the last command saved in the state folder, else the starting one.
func (s *Session) resolve(path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	cwd := s.cwd
	if b, err := os.ReadFile(filepath.Join(s.state, "cwd")); err == nil {
		// The shell rewrites the file in place: its first line is the folder.
		d, _, _ := strings.Cut(string(b), "\n")
		if filepath.IsAbs(d) {
			if s.mapper != nil { // a path in the sandbox's view, not the host's
				return filepath.Join(d, path)
			}
			if fi, err := os.Stat(d); err == nil && fi.IsDir() {
				cwd = d
			}
		}
	}
	return filepath.Join(cwd, path)
}

// check fails on a closed session or a done ctx.
func (s *Session) check(ctx context.Context, op string) error {
	if s.isClosed() {
		return fmt.Errorf("local sandbox %s: %w", op, sandbox.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("local sandbox %s: %w", op, err)
	}
	return nil
}

// ReadRange implements sandbox.Files with os.Open and ReadAt: only the range
// is read.
func (s *Session) ReadRange(ctx context.Context, path string, off int64, n int) ([]byte, int64, error) {
	if err := s.check(ctx, "read"); err != nil {
		return nil, 0, err
	}
	if off < 0 || n < 0 {
		return nil, 0, &fs.PathError{Op: "read", Path: path, Err: errors.New("negative offset or length")}
	}
	if s.mapper != nil {
		return s.readConfined(path, off, n)
	}
	abs := s.resolve(path)
	return readRange(path, off, n, func() (fs.FileInfo, error) { return os.Stat(abs) },
		func() (*os.File, error) { return os.OpenFile(abs, os.O_RDONLY|syscall.O_NONBLOCK, 0) })
}

// readRange reads up to n bytes of the regular file path at off; stat and
// open reach the file (through the OS, or through an os.Root when confined).
// It stats before opening: opening a FIFO would block until a writer came.
func readRange(path string, off int64, n int, stat func() (fs.FileInfo, error), open func() (*os.File, error)) ([]byte, int64, error) {
	if fi, err := stat(); err != nil {
		return nil, 0, rename(err, path)
	} else if err := sandbox.CheckRead(path, sandbox.FileInfo{Mode: fi.Mode()}, 0, 0, 0); err != nil {
		return nil, 0, err
	}
	f, err := open()
	if err != nil {
		return nil, 0, rename(err, path)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, rename(err, path)
	}
	info := sandbox.FileInfo{Size: fi.Size(), Mode: fi.Mode()}
	if err := sandbox.CheckRead(path, info, 0, 0, 0); err != nil {
		return nil, 0, err
	}
	if off >= info.Size || n == 0 {
		return []byte{}, info.Size, nil
	}
	buf := make([]byte, min(int64(n), info.Size-off))
	got, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, rename(err, path)
	}
	return buf[:got], info.Size, nil
}

// Stat implements sandbox.Files with os.Stat.
func (s *Session) Stat(ctx context.Context, path string) (sandbox.FileInfo, error) {
	if err := s.check(ctx, "stat"); err != nil {
		return sandbox.FileInfo{}, err
	}
	if s.mapper != nil {
		return s.statConfined(path)
	}
	fi, err := os.Stat(s.resolve(path))
	if err != nil {
		return sandbox.FileInfo{}, rename(err, path)
	}
	return sandbox.FileInfo{Size: fi.Size(), Mode: fi.Mode()}, nil
}

// WriteFile implements sandbox.Files: a temporary file beside the target,
// renamed over it. No fsync: sandbox files need no durability.
func (s *Session) WriteFile(ctx context.Context, path string, data []byte, perm fs.FileMode) error {
	if err := s.check(ctx, "write"); err != nil {
		return err
	}
	if s.mapper != nil {
		return s.writeConfined(path, data, perm)
	}
	abs := s.resolve(path)
	if fi, err := os.Lstat(abs); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if target, err := filepath.EvalSymlinks(abs); err == nil {
			abs = target
		} else if t, err := os.Readlink(abs); err == nil { // dangling: create the target
			if !filepath.IsAbs(t) {
				t = filepath.Join(filepath.Dir(abs), t)
			}
			abs = t
		}
	}
	mode := perm.Perm() &^ umask()
	if fi, err := os.Stat(abs); err == nil {
		if fi.IsDir() {
			return &fs.PathError{Op: "write", Path: path, Err: sandbox.ErrIsDir}
		}
		mode = fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	}
	dir := filepath.Dir(abs)
	if err := os.MkdirAll(dir, 0o777&^umask()); err != nil {
		return rename(err, path)
	}
	tmp, err := os.CreateTemp(dir, ".hermes-write.*")
	if err != nil {
		return rename(err, path)
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), mode)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), abs)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return rename(err, path)
	}
	return nil
}

// rename reports err (usually *fs.PathError on the absolute path) under the
// path the caller gave.
func rename(err error, path string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		e := pe.Err
		if errors.Is(e, syscall.EISDIR) {
			e = sandbox.ErrIsDir
		}
		return &fs.PathError{Op: pe.Op, Path: path, Err: e}
	}
	return &fs.PathError{Op: "access", Path: path, Err: err}
}

// umask returns the process umask, read once from /proc/self/status (Linux
// 4.7 and later); 022 where it cannot be read. syscall.Umask is not used:
// reading it that way changes it for a moment under every goroutine.
var umask = sync.OnceValue(func() fs.FileMode {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Umask:"); ok {
				if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return fs.FileMode(m)
				}
			}
		}
	}
	return 0o022
})
