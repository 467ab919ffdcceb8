// Package atomicfile writes files so that a reader sees either the old file or
// the whole new one, after restic's local backend: a temp file in the same
// folder, write, fsync, close, rename, fsync the folder; the temp file is
// removed on error. Every writer of reports, manifests, stores and journals
// in hermes-pipe uses it.
//
// It is a leaf: it imports nothing from this repository, so small commands
// (fakellm) and modes (cron) use it without linking the runtime.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// TempPrefix starts the name of every temp file Write creates; readers of an
// output folder skip such files and the runtime removes them on open.
const TempPrefix = ".tmp-"

// Write writes data to dir/name atomically and durably. It blocks for two
// fsyncs (the file and the folder) and returns an error naming the file.
func Write(dir, name string, data []byte) error {
	return write(dir, name, data, 0)
}

// WriteMode is Write for a file others should read too: it is created
// with mode perm (not masked by the umask) instead of Write's 0600.
func WriteMode(dir, name string, data []byte, perm os.FileMode) error {
	return write(dir, name, data, perm)
}

// write is Write; perm 0 keeps the temp file's 0600.
func write(dir, name string, data []byte, perm os.FileMode) error {
	tmp, err := writeTemp(dir, name, data, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, err)
	}
	return SyncDir(dir)
}

// File is one file of WriteAll: its name in the folder and its bytes.
type File struct {
	Name string
	Data []byte
}

// WriteAll writes files into dir as Write does each, for the cost of about
// two fsyncs instead of two per file: every temp file is written and
// fsynced at once, then all are renamed in the order given (a reader sees
// a later file new only when it sees the earlier ones new too, on a file
// system that keeps the order of renames), then the folder is fsynced. When
// a temp file cannot be written none is renamed; the temp files are
// removed on error.
func WriteAll(dir string, files ...File) error {
	tmps := make([]string, len(files))
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Go(func() { tmps[i], errs[i] = writeTemp(dir, f.Name, f.Data, 0) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		removeAll(tmps)
		return err
	}
	for i, f := range files {
		if err := os.Rename(tmps[i], filepath.Join(dir, f.Name)); err != nil {
			removeAll(tmps[i:])
			return fmt.Errorf("write %s: %w", f.Name, err)
		}
	}
	return SyncDir(dir)
}

// writeTemp writes data to a new temp file for name in dir (mode perm, or
// 0600 for 0), fsynced and closed, and returns its path; on error it
// removes it.
func writeTemp(dir, name string, data []byte, perm os.FileMode) (string, error) {
	f, err := os.CreateTemp(dir, TempPrefix+name+"-*")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	if perm != 0 {
		err = f.Chmod(perm)
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	return f.Name(), nil
}

func removeAll(paths []string) {
	for _, p := range paths {
		if p != "" {
			os.Remove(p)
		}
	}
}

// SyncDir fsyncs a folder so that a file created, renamed or removed in it
// is durable; part of the atomic-file protocol, also used by journals.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync folder %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync folder %s: %w", dir, err)
	}
	return nil
}
