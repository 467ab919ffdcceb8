package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
)

// Files moves file contents in and out of a session natively (the OS, the
// container engine, the SSH connection), byte for byte, without passing them
// through a shell command line or the output limit of Exec. Every Session
// implements it.
//
// Paths are absolute, or relative to the session's current working folder:
// the folder the last command left the shell in (`cd` persists), or the
// starting folder (Spec.Cwd, else the session's own folder) before the first
// command. So a file written by a command as `out/x.txt` is read back by
// ReadRange(ctx, "out/x.txt", ...), as it would be by the next command.
//
// Errors about the file itself (missing, permission denied, a folder where a
// file was expected) are ordinary errors, usually *fs.PathError, that match
// fs.ErrNotExist, fs.ErrPermission or ErrIsDir with errors.Is; callers turn
// them into a message for the model. Only a failing driver (daemon gone,
// connection lost) returns an error wrapping ErrUnavailable, and a closed
// session one wrapping ErrClosed.
type Files interface {
	// ReadRange reads up to n bytes of the regular file at path starting at
	// byte off, and returns them with the file's size. Reading at or past
	// the end returns no bytes and no error. It transfers only the bytes
	// returned (plus a few bytes of framing), so reading the first page of a
	// 100 MB file costs what the page costs. It blocks until the bytes are
	// in memory.
	ReadRange(ctx context.Context, path string, off int64, n int) (data []byte, size int64, err error)

	// Stat describes the file at path, following symbolic links. A missing
	// file gives an error matching fs.ErrNotExist.
	Stat(ctx context.Context, path string) (FileInfo, error)

	// WriteFile replaces the file at path with data, creating missing parent
	// folders. A new file gets perm (less the session's umask); an existing
	// file keeps its permission bits. Where the driver can (all of local,
	// docker and ssh), the new content is written to a temporary file in
	// the same folder and renamed over path, so a reader never sees a
	// half-written file. A symbolic link is written through, not replaced.
	WriteFile(ctx context.Context, path string, data []byte, perm fs.FileMode) error
}

// FileInfo is what Stat reports about one file.
type FileInfo struct {
	Size int64       // bytes; for folders, what the file system reports
	Mode fs.FileMode // type bits (fs.ModeDir, ...) and permission bits
}

// IsDir reports whether the file is a folder.
func (fi FileInfo) IsDir() bool { return fi.Mode.IsDir() }

// IsRegular reports whether the file is a regular file.
func (fi FileInfo) IsRegular() bool { return fi.Mode.IsRegular() }

// ErrIsDir is matched (errors.Is) by a read or write of a folder as if it
// were a file.
var ErrIsDir = errors.New("is a directory")

// ErrNotRegular is matched by a read of something that is neither a regular
// file nor a folder (a device, a FIFO, a socket).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is matched by ReadAll when the file is larger than allowed.
var ErrTooLarge = errors.New("file too large")

// readAllChunk is how many bytes ReadAll asks for at once.
const readAllChunk = 8 << 20

// ReadAll reads the whole regular file at path through f, in chunks of a few
// MiB: one ReadRange for files up to 8 MiB. A file larger than max bytes
// (max > 0) gives an error matching ErrTooLarge after at most one chunk. A
// file that changes size while it is read gives an error. Callers: the
// rollout's patch tool and SWE's patch handling.
func ReadAll(ctx context.Context, f Files, path string, max int64) ([]byte, error) {
	first := int64(readAllChunk)
	if max > 0 {
		first = min(first, max+1)
	}
	data, size, err := f.ReadRange(ctx, path, 0, int(first))
	if err != nil {
		return nil, err
	}
	if max > 0 && size > max {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, size, max)}
	}
	if int64(len(data)) < size {
		data = append(make([]byte, 0, size), data...)
	}
	for int64(len(data)) < size {
		chunk, now, err := f.ReadRange(ctx, path, int64(len(data)), int(min(size-int64(len(data)), readAllChunk)))
		if err != nil {
			return nil, err
		}
		if now != size || len(chunk) == 0 {
			return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("file changed size while read (%d bytes, then %d)", size, now)}
		}
		data = append(data, chunk...)
	}
	return data, nil
}
