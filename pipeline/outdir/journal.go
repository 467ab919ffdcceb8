package outdir

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/hermes-pipe/hermes-pipe/pipeline/atomicfile"
)

// Journal is an append-only file of lines that goroutines write concurrently
// (a mode's side journals: compress's quarantine.jsonl and
// compression_rows.jsonl). The file is created on the first line, so a run
// that writes none leaves no file. Each line goes out with a single write(2),
// which survives the process being killed; a torn last line is cut when the
// journal is opened again.
type Journal struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

// OpenJournal prepares path for appending without opening it. With fresh it
// removes a file left by a previous run (--overwrite); otherwise it cuts a
// torn last line (a crash mid-write), so the next line appended starts on a
// line of its own instead of being glued to the fragment. It reads only the
// file's tail. A journal that is a symbolic link is refused.
func OpenJournal(path string, fresh bool) (*Journal, error) {
	j := &Journal{path: path}
	name := filepath.Base(path)
	if fresh {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("remove old %s: %w", name, err)
		}
		return j, nil
	}
	if err := notLink(path); err != nil {
		return nil, err
	}
	end, err := completeEnd(path)
	if errors.Is(err, os.ErrNotExist) {
		return j, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if end >= 0 {
		if err := os.Truncate(path, end); err != nil {
			return nil, fmt.Errorf("cut torn end of %s: %w", name, err)
		}
	}
	return j, nil
}

// notLink refuses a journal that is a symbolic link: the runtime never makes
// one, and reading or appending through it would reach a file outside the
// output folder (a folder may come from someone else). A missing file is
// fine.
func notLink(path string) error {
	fi, err := os.Lstat(path)
	if err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link; hermes-pipe never makes one and does not follow it (replace it with the real file)", path)
	}
	return nil
}

// Path returns the journal's file path.
func (j *Journal) Path() string { return j.path }

// completeEnd returns the length of path up to and including its last
// newline when bytes follow it, or -1 when the file ends with a complete
// line (or is empty).
func completeEnd(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	buf := make([]byte, 32<<10)
	for end := size; end > 0; {
		start := max(end-int64(len(buf)), 0)
		b := buf[:end-start]
		if _, err := f.ReadAt(b, start); err != nil && err != io.EOF {
			return 0, err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			if start+int64(i)+1 == size {
				return -1, nil
			}
			return start + int64(i) + 1, nil
		}
		end = start
	}
	if size == 0 {
		return -1, nil
	}
	return 0, nil
}

// Append writes line (which ends in a newline) with a single write(2); with
// durable it also fsyncs. It is safe for concurrent use.
func (j *Journal) Append(line []byte, durable bool) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	name := filepath.Base(j.path)
	if j.f == nil {
		f, err := os.OpenFile(j.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("open %s: %w", name, err)
		}
		j.f = f
		if err := atomicfile.SyncDir(filepath.Dir(j.path)); err != nil {
			return err
		}
	}
	if _, err := j.f.Write(line); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if durable {
		if err := j.f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", name, err)
		}
	}
	return nil
}

// Sync fsyncs what was appended; nothing when no line was.
func (j *Journal) Sync() error {
	// The fsync runs outside the lock: appends (a model call's spend line,
	// written while every budget check waits) go on while it flushes.
	j.mu.Lock()
	f := j.f
	j.mu.Unlock()
	if f == nil {
		return nil
	}
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrClosed) { // Close fsyncs too
		return fmt.Errorf("sync %s: %w", filepath.Base(j.path), err)
	}
	return nil
}

// Close fsyncs and closes the file if it was opened; it is safe to call
// twice.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := errors.Join(j.f.Sync(), j.f.Close())
	j.f = nil
	if err != nil {
		return fmt.Errorf("close %s: %w", filepath.Base(j.path), err)
	}
	return nil
}

// ScanJournal calls fn with every complete line of the journal at path
// (without its newline), in order. A last line without a newline is torn (a
// crash mid-write) and left out, as OpenJournal cuts it. A missing file has
// no lines. It reads the file whole.
func ScanJournal(path string, fn func(line []byte) error) error {
	if err := notLink(path); err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		if err := fn(data[:i]); err != nil {
			return err
		}
		data = data[i+1:]
	}
	return nil
}
