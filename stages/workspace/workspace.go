package workspace

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/atomicfile"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/klauspost/compress/zstd"
)

// Dir is the folder of an output folder that holds the kept workspaces.
const Dir = outdir.WorkspacesDir

// Member is the member of a record's extra that describes its kept
// workspace (Info).
const Member = "workspace"

// DefaultMax is the default cap of one workspace's tar (before compression):
// 50 MB.
const DefaultMax = 50 << 20

// captureTimeout bounds the command that archives a workspace in its session.
const captureTimeout = 10 * time.Minute

// chunk is how many bytes of the session's tar are read at once.
const chunk = 8 << 20

// Info is a record's extra.workspace: what was kept of its workspace. File,
// Bytes and SHA256 name and hold the archive (zstd of a tar) under Dir;
// TarBytes is the tar's size before compression. Truncated says the tar was
// larger than MaxBytes and nothing was kept; Error that the capture itself
// failed (the session was gone, tar missing). A record with neither File nor
// one of those has no kept workspace.
type Info struct {
	File      string `json:"file,omitempty"`
	Bytes     int64  `json:"bytes,omitempty"`
	SHA256    string `json:"sha256,omitempty"`
	TarBytes  int64  `json:"tar_bytes,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	MaxBytes  int64  `json:"max_bytes,omitempty"`
	Error     string `json:"error,omitempty"`
}

// Kept reports whether info names an archive.
func (i Info) Kept() bool { return i.File != "" }

// Why says why no archive is kept ("" when one is).
func (i Info) Why() string {
	switch {
	case i.Kept():
		return ""
	case i.Truncated:
		return fmt.Sprintf("workspace over --keep-workspace-max (%d bytes): not kept", i.MaxBytes)
	case i.Error != "":
		return "workspace not kept: " + i.Error
	}
	return "no workspace kept (the run did not use --keep-workspace)"
}

// InfoOf reads extra.workspace of a record line; ok is false when the record
// has none.
func InfoOf(line []byte) (Info, bool, error) {
	raw := schemas.MemberAt(line, schemas.MemberExtra+"."+Member)
	if raw == "" || raw == "null" {
		return Info{}, false, nil
	}
	var info Info
	if err := json.Unmarshal([]byte(raw), &info); err != nil {
		return Info{}, false, fmt.Errorf("extra.%s: %w", Member, err)
	}
	return info, true, nil
}

// Set stores info as rec's extra.workspace.
func Set(rec *schemas.Record, info Info) {
	b, err := json.Marshal(info)
	if err != nil { // Info has only strings, numbers and booleans
		panic(err)
	}
	if rec.Extra == nil {
		rec.Extra = map[string]json.RawMessage{}
	}
	rec.Extra[Member] = b
}

// Keeper archives workspaces into one output folder. It is safe for
// concurrent use.
type Keeper struct {
	Out string // the output folder (its Dir is created by Prepare)
	Max int64  // cap of one tar in bytes; 0 = DefaultMax
}

// Prepare removes the temp files a killed run left in Out/Dir (the folder
// itself is made by the first archive, so a fresh run's folder is still
// empty when the runtime opens it).
func (k *Keeper) Prepare() error {
	dir := filepath.Join(k.Out, Dir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("workspaces: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), atomicfile.TempPrefix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("workspaces: remove %s: %w", e.Name(), err)
			}
		}
	}
	return nil
}

// Keep archives the files of dir in sess (the row's cwd), or of the
// session's current working folder when dir is "" (the folders a verify
// command runs in), as the workspace of the record keyed key, and returns what
// to record. It runs one tar command in the session (its output cut at
// Max+1 bytes, so an oversized folder costs at most that), reads the tar out
// through the session's Files, compresses it and writes it atomically under
// Out/Dir. A failure is returned in Info.Error, never as a lost record; the
// returned error is only a failure to write the output folder.
func (k *Keeper) Keep(ctx context.Context, sess sandbox.Session, key, dir string) (Info, error) {
	max := k.Max
	if max <= 0 {
		max = DefaultMax
	}
	tmp := "/tmp/.hermes-workspace-" + randHex() + ".tar"
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_, _ = sess.Exec(cctx, sandbox.Cmd{Command: "rm -f " + tmp + " " + tmp + ".err"})
	}()
	cd := ""
	if dir != "" {
		cd = "cd -- '" + strings.ReplaceAll(dir, "'", `'\''`) + "' && "
	}
	res, err := sess.Exec(ctx, sandbox.Cmd{Timeout: captureTimeout,
		Command: fmt.Sprintf("(%[3]star -cf - . 2>%[1]s.err | head -c %[2]d >%[1]s) && echo ok", tmp, max+1, cd)})
	if err != nil {
		return Info{Error: "archive: " + err.Error()}, nil
	}
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "ok") {
		return Info{Error: fmt.Sprintf("archive: exit %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr))}, nil
	}
	fi, err := sess.Stat(ctx, tmp)
	if err != nil {
		return Info{Error: "archive: " + err.Error()}, nil
	}
	if fi.Size > max {
		return Info{Truncated: true, TarBytes: fi.Size, MaxBytes: max}, nil
	}
	if fi.Size == 0 {
		msg, _, _ := sess.ReadRange(ctx, tmp+".err", 0, 4096)
		return Info{Error: "archive: tar wrote nothing: " + strings.TrimSpace(string(msg))}, nil
	}
	var buf bytes.Buffer
	enc, err := zstd.NewWriter(&buf, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return Info{}, fmt.Errorf("workspace %s: %w", key, err)
	}
	for off := int64(0); off < fi.Size; {
		b, _, err := sess.ReadRange(ctx, tmp, off, chunk)
		if err != nil {
			enc.Close()
			return Info{Error: "read archive: " + err.Error()}, nil
		}
		if len(b) == 0 {
			enc.Close()
			return Info{Error: fmt.Sprintf("read archive: it ended at byte %d of %d", off, fi.Size)}, nil
		}
		enc.Write(b) // a write to a bytes.Buffer does not fail
		off += int64(len(b))
	}
	if err := enc.Close(); err != nil {
		return Info{}, fmt.Errorf("workspace %s: %w", key, err)
	}
	sum := sha256.Sum256(buf.Bytes())
	info := Info{File: FileName(key, sum[:]), Bytes: int64(buf.Len()), SHA256: hex.EncodeToString(sum[:]), TarBytes: fi.Size}
	folder := filepath.Join(k.Out, Dir)
	if err := os.Mkdir(folder, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return Info{}, fmt.Errorf("workspace %s: %w", key, err)
	}
	if fi, err := os.Lstat(folder); err != nil || !fi.IsDir() {
		return Info{}, fmt.Errorf("workspace %s: %s is not a folder (a link is not followed)", key, folder)
	}
	if err := atomicfile.Write(folder, info.File, buf.Bytes()); err != nil {
		return Info{}, fmt.Errorf("workspace %s: %w", key, err)
	}
	return info, nil
}

// FileName is the archive name of a record's workspace: the key's hash (keys
// come from prompts: never a path) and the archive's, so a row redone by
// --resume writes a new file and the record that names the old one still
// finds it until the new record is committed.
func FileName(key string, archiveSum []byte) string {
	k := sha256.Sum256([]byte(key))
	return hex.EncodeToString(k[:16]) + "-" + hex.EncodeToString(archiveSum[:8]) + ".tar.zst"
}

// validName is the form FileName gives; a record naming anything else is
// refused on restore.
var validName = regexp.MustCompile(`^[0-9a-f]{32}-[0-9a-f]{16}\.tar\.zst$`)

// Sweep removes from out's Dir every archive no live record names (live
// holds the names of every record's Info.File) and the temp files of a
// killed run, and returns how many it removed. Callers: generate, at the end
// of a run with --keep-workspace, with the names read from the folder.
func Sweep(out string, live map[string]bool) (int, error) {
	dir := filepath.Join(out, Dir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("workspaces: %w", err)
	}
	n := 0
	for _, e := range ents {
		name := e.Name()
		if live[name] || !(validName.MatchString(name) || strings.HasPrefix(name, atomicfile.TempPrefix)) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			return n, fmt.Errorf("workspaces: remove %s: %w", name, err)
		}
		n++
	}
	if n > 0 {
		return n, atomicfile.SyncDir(dir)
	}
	return n, nil
}

func randHex() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}
