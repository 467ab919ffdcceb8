package outdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// An output folder may come from someone else, so a shard path read from it
// (a ledger line's "shard") is never trusted: ParseLine refuses any that is
// not a name the runtime writes, and readers open shards through OpenShard,
// which does not follow a symbolic link. A ledger line that names a path
// outside the folder is corruption, not a torn end: Scan reports it wherever
// it is, `verify` lists it, `repair` drops it, and nothing reads, writes or
// deletes the path it names.

// ErrShardPath marks a ledger line whose shard is not a shard path of the
// folder (see ValidShard).
var ErrShardPath = errors.New("not a shard of the output folder")

// ErrShardLink marks a shard file that is a symbolic link: the runtime never
// writes one, and following it could read a file outside the folder.
var ErrShardLink = errors.New("a symbolic link, not a shard file hermes-pipe wrote")

// ValidShard checks a shard path read from an output folder: it must be
// relative, in one of the folders shards are written to (DataDir,
// FailedDir), and named as the runtime names shards: "data/shard-00012.jsonl"
// (digits, then one extension of lowercase letters and digits). Nothing else
// can appear in a ledger the runtime wrote, so the rule leaves no room for
// "..", an absolute path, a separator or a hidden file. It costs a few
// comparisons and allocates only for its error.
func ValidShard(name string) error {
	file, ok := cutShardDir(name)
	if !ok || !validShardFile(file) {
		return fmt.Errorf("shard %q: %w (want %s/ or %s/shard-NNNNN.EXT)", name, ErrShardPath, DataDir, FailedDir)
	}
	return nil
}

// cutShardDir returns the file name of a path in DataDir or FailedDir.
func cutShardDir(name string) (file string, ok bool) {
	for _, d := range []string{DataDir, FailedDir} {
		if len(name) > len(d)+1 && name[:len(d)] == d && name[len(d)] == '/' {
			return name[len(d)+1:], true
		}
	}
	return "", false
}

// validShardFile reports whether file is ShardPrefix, digits, "." and an
// extension.
func validShardFile(file string) bool {
	const prefix = ShardPrefix
	if len(file) <= len(prefix) || file[:len(prefix)] != prefix {
		return false
	}
	i, digits := len(prefix), 0
	for i < len(file) && file[i] >= '0' && file[i] <= '9' {
		i++
		digits++
	}
	if digits == 0 || digits > 18 || i == len(file) || file[i] != '.' || i+1 == len(file) {
		return false
	}
	for _, c := range []byte(file[i+1:]) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// OpenShard opens the shard rel of the output folder dir for reading. rel
// must pass ValidShard; the file is opened through os.Root, so no
// component of the path (data/ included) may lead out of dir, and the shard
// itself must not be a symbolic link (ErrShardLink). Readers of shards (cat,
// verify, repair, opening a folder, view) all open them here. It costs an
// lstat and an open.
func OpenShard(dir, rel string) (*os.File, error) {
	return inShardRoot(dir, rel, openShardIn)
}

// LstatShard returns what the shard rel of the folder is without following
// it: a symbolic link is an error wrapping ErrShardLink; a missing file an
// error wrapping fs.ErrNotExist.
func LstatShard(dir, rel string) (fs.FileInfo, error) {
	return inShardRoot(dir, rel, lstatShardIn)
}

// inShardRoot checks rel with ValidShard and runs do on it inside dir
// opened as an os.Root, which it closes after. It costs one open of dir: the
// readers call it once per shard, never per record.
func inShardRoot[T any](dir, rel string, do func(*os.Root, string) (T, error)) (T, error) {
	var zero T
	if err := ValidShard(rel); err != nil {
		return zero, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return zero, err
	}
	defer root.Close()
	return do(root, rel)
}

func lstatShardIn(root *os.Root, rel string) (fs.FileInfo, error) {
	fi, err := root.Lstat(rel)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("shard %s: %w", rel, ErrShardLink)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("shard %s: not a regular file", rel)
	}
	return fi, nil
}

func openShardIn(root *os.Root, rel string) (*os.File, error) {
	if _, err := lstatShardIn(root, rel); err != nil {
		return nil, err
	}
	// The lstat and the open are two steps: a link swapped in between is
	// still followed only inside the folder (os.Root).
	return root.Open(rel)
}

// RemoveShard removes the shard rel of the folder dir (a damaged or
// unadoptable one): rel must pass ValidShard, and a symbolic link is
// removed itself, never what it points at. A missing file is not an error.
func RemoveShard(dir, rel string) error {
	if err := ValidShard(rel); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
