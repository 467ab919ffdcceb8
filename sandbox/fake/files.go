package fake

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// defaultCwd is the working folder of a session whose Spec names none.
const defaultCwd = "/sandbox"

// memFile is one file of a session's in-memory file system.
type memFile struct {
	data []byte
	mode fs.FileMode
}

// FailFiles makes every later file operation (ReadRange, Stat, WriteFile)
// of every session return err as a driver failure (wrap
// sandbox.ErrUnavailable to simulate a daemon that went away); nil restores
// success.
func (d *Driver) FailFiles(err error) *Driver {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.filesErr = err
	return d
}

// FileCalls returns how many file operations sessions of d ran.
func (d *Driver) FileCalls() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fileCalls
}

// fileOp records a file operation and returns the injected failure, if any.
func (s *Session) fileOp(ctx context.Context, op string) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return fmt.Errorf("fake sandbox %s: %w", op, sandbox.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fake sandbox %s: %w", op, err)
	}
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	s.d.fileCalls++
	if s.d.filesErr != nil {
		return fmt.Errorf("fake sandbox %s: %w", op, s.d.filesErr)
	}
	return nil
}

// abs resolves p against the session's working folder: Spec.Cwd, else
// /sandbox (the fake has no shell, so `cd` never moves it).
func (s *Session) abs(p string) string {
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	cwd := s.spec.Cwd
	if cwd == "" {
		cwd = defaultCwd
	}
	return path.Join(cwd, p)
}

// isDir reports whether p is a folder: the root, the working folder and
// its parents, or a parent of a file written before.
func (s *Session) isDir(p string) bool {
	if p == "/" || s.dirs[p] {
		return true
	}
	cwd := s.spec.Cwd
	if cwd == "" {
		cwd = defaultCwd
	}
	return cwd == p || strings.HasPrefix(cwd, p+"/")
}

// ReadRange implements sandbox.Files on the session's in-memory files.
func (s *Session) ReadRange(ctx context.Context, p string, off int64, n int) ([]byte, int64, error) {
	if err := s.fileOp(ctx, "read"); err != nil {
		return nil, 0, err
	}
	if off < 0 || n < 0 {
		return nil, 0, &fs.PathError{Op: "read", Path: p, Err: errors.New("negative offset or length")}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.abs(p)
	f, ok := s.files[a]
	if !ok {
		if s.isDir(a) {
			return nil, 0, &fs.PathError{Op: "read", Path: p, Err: sandbox.ErrIsDir}
		}
		return nil, 0, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	size := int64(len(f.data))
	if off >= size {
		return []byte{}, size, nil
	}
	end := min(size, off+int64(n))
	return append([]byte{}, f.data[off:end]...), size, nil
}

// Stat implements sandbox.Files on the session's in-memory files.
func (s *Session) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	if err := s.fileOp(ctx, "stat"); err != nil {
		return sandbox.FileInfo{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.abs(p)
	if f, ok := s.files[a]; ok {
		return sandbox.FileInfo{Size: int64(len(f.data)), Mode: f.mode}, nil
	}
	if s.isDir(a) {
		return sandbox.FileInfo{Size: 4096, Mode: fs.ModeDir | 0o755}, nil
	}
	return sandbox.FileInfo{}, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
}

// WriteFile implements sandbox.Files on the session's in-memory files,
// creating the parent folders.
func (s *Session) WriteFile(ctx context.Context, p string, data []byte, perm fs.FileMode) error {
	if err := s.fileOp(ctx, "write"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.abs(p)
	if s.isDir(a) {
		return &fs.PathError{Op: "write", Path: p, Err: sandbox.ErrIsDir}
	}
	for d := path.Dir(a); d != "/"; d = path.Dir(d) {
		if _, ok := s.files[d]; ok {
			return &fs.PathError{Op: "mkdir", Path: p, Err: errors.New("not a directory")}
		}
	}
	if s.files == nil {
		s.files, s.dirs = map[string]memFile{}, map[string]bool{}
	}
	for d := path.Dir(a); d != "/"; d = path.Dir(d) {
		s.dirs[d] = true
	}
	mode := perm.Perm() &^ 0o022
	if old, ok := s.files[a]; ok {
		mode = old.mode
	}
	s.files[a] = memFile{data: append([]byte{}, data...), mode: mode}
	return nil
}
