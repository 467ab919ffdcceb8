package local

import (
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"path"
	"syscall"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
)

// File operations of a confined session: the path is mapped as commands see
// it (confine.Mapper) and every host access goes through an os.Root of the
// mount behind it, so a link a command planted cannot lead outside.

// locate resolves path (relative to the session's current folder) to its
// mount and opens the mount's root.
func (s *Session) locate(p string, follow bool) (*os.Root, confine.Location, error) {
	loc, err := s.mapper.Resolve(s.resolve(p), follow)
	if err != nil {
		return nil, loc, rename(err, p)
	}
	r, err := os.OpenRoot(loc.Root)
	if err != nil {
		return nil, loc, rename(err, p)
	}
	return r, loc, nil
}

func (s *Session) readConfined(p string, off int64, n int) ([]byte, int64, error) {
	r, loc, err := s.locate(p, true)
	if err != nil {
		return nil, 0, err
	}
	defer r.Close()
	return readRange(p, off, n, func() (fs.FileInfo, error) { return r.Stat(loc.Rel) },
		func() (*os.File, error) { return r.OpenFile(loc.Rel, os.O_RDONLY|syscall.O_NONBLOCK, 0) })
}

func (s *Session) statConfined(p string) (sandbox.FileInfo, error) {
	r, loc, err := s.locate(p, true)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	defer r.Close()
	fi, err := r.Stat(loc.Rel)
	if err != nil {
		return sandbox.FileInfo{}, rename(err, p)
	}
	return sandbox.FileInfo{Size: fi.Size(), Mode: fi.Mode()}, nil
}

func (s *Session) writeConfined(p string, data []byte, perm fs.FileMode) error {
	r, loc, err := s.locate(p, true)
	if err != nil {
		return err
	}
	defer r.Close()
	if loc.ReadOnly {
		return &fs.PathError{Op: "write", Path: p, Err: fs.ErrPermission}
	}
	mode := perm.Perm() &^ umask()
	if fi, err := r.Stat(loc.Rel); err == nil {
		if fi.IsDir() {
			return &fs.PathError{Op: "write", Path: p, Err: sandbox.ErrIsDir}
		}
		mode = fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	}
	dir := path.Dir(loc.Rel)
	if err := r.MkdirAll(dir, 0o777&^umask()); err != nil {
		return rename(err, p)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(dir, ".hermes-write."+hex.EncodeToString(rnd[:]))
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return rename(err, p)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Chmod(tmp, mode)
	}
	if err == nil {
		err = r.Rename(tmp, loc.Rel)
	}
	if err != nil {
		_ = r.Remove(tmp)
		return rename(err, p)
	}
	return nil
}
