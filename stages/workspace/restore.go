package workspace

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/klauspost/compress/zstd"
)

// Load reads the archive info names from out's Dir and returns a clean tar
// of its members: the file is opened inside the folder (os.Root, never
// through a link), its size and SHA-256 held to info, its tar bounded to
// max bytes (0 = DefaultMax; a larger one is refused, not cut), and every
// member checked by Clean. It blocks for the read and the decompression.
func Load(out string, info Info, max int64) ([]byte, error) {
	if max <= 0 {
		max = DefaultMax
	}
	if !validName.MatchString(info.File) {
		return nil, fmt.Errorf("workspace %q: not a name hermes-pipe gives an archive", info.File)
	}
	root, err := os.OpenRoot(filepath.Join(out, Dir))
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", info.File, err)
	}
	defer root.Close()
	fi, err := root.Lstat(info.File)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", info.File, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("workspace %s: not a regular file", info.File)
	}
	if fi.Size() != info.Bytes {
		return nil, fmt.Errorf("workspace %s: %d bytes, its record says %d: damaged", info.File, fi.Size(), info.Bytes)
	}
	f, err := root.Open(info.File)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", info.File, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, info.Bytes+1))
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", info.File, err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != info.SHA256 {
		return nil, fmt.Errorf("workspace %s: SHA-256 differs from its record's: damaged", info.File)
	}
	dec, err := zstd.NewReader(bytes.NewReader(data), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(max)+1<<20))
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", info.File, err)
	}
	defer dec.Close()
	raw, err := io.ReadAll(io.LimitReader(dec, max+1))
	if err != nil {
		return nil, fmt.Errorf("workspace %s: decompress: %w", info.File, err)
	}
	if int64(len(raw)) > max {
		return nil, fmt.Errorf("workspace %s: its tar is over %d bytes (raise the bound with --keep-workspace-max)", info.File, max)
	}
	clean, err := Clean(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", info.File, err)
	}
	return clean, nil
}

// Clean reads a tar and writes a new one holding only what unpacks inside
// the target folder: folders, regular files, symbolic links (whatever they
// point at) and hard links to a regular file met before. It refuses the
// whole archive when a member's path is absolute or climbs out (`..`), when a
// member lies under a link (unpacking it would write through the link), when
// a name appears twice, or when a member is a device, FIFO or other special
// file. Owners are dropped and modes kept to their permission bits.
func Clean(r io.Reader) ([]byte, error) {
	tr := tar.NewReader(r)
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	seen := map[string]byte{} // name → type flag
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read tar: %w", err)
		}
		name, err := memberName(h.Name)
		if err != nil {
			return nil, err
		}
		if name == "" || h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if err := checkPlace(name, seen); err != nil {
			return nil, err
		}
		nh := &tar.Header{Name: name, Mode: h.Mode & 0o777, ModTime: h.ModTime, Format: tar.FormatGNU}
		switch h.Typeflag {
		case tar.TypeDir:
			nh.Typeflag, nh.Name = tar.TypeDir, name+"/"
		case tar.TypeReg:
			nh.Typeflag, nh.Size = tar.TypeReg, h.Size
		case tar.TypeSymlink:
			nh.Typeflag, nh.Linkname = tar.TypeSymlink, h.Linkname
		case tar.TypeLink:
			target, err := memberName(h.Linkname)
			if err != nil || seen[target] != tar.TypeReg {
				return nil, fmt.Errorf("member %q: a hard link to %q, which is not a file of the archive", name, h.Linkname)
			}
			nh.Typeflag, nh.Linkname = tar.TypeLink, target
		default:
			return nil, fmt.Errorf("member %q: type %q is not a file, folder or link", name, h.Typeflag)
		}
		seen[name] = nh.Typeflag
		if err := tw.WriteHeader(nh); err != nil {
			return nil, fmt.Errorf("member %q: %w", name, err)
		}
		if nh.Typeflag == tar.TypeReg {
			if _, err := io.Copy(tw, tr); err != nil {
				return nil, fmt.Errorf("member %q: %w", name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// memberName is a member's path made relative and clean ("" for the root
// folder itself), or an error when it is absolute or leaves the folder.
func memberName(n string) (string, error) {
	if strings.ContainsRune(n, 0) || path.IsAbs(n) || strings.Contains(n, "\\") {
		return "", fmt.Errorf("member %q: not a relative path", n)
	}
	c := path.Clean(n)
	if c == "." {
		return "", nil
	}
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("member %q: leaves the workspace", n)
	}
	return c, nil
}

// checkPlace refuses a member named before or lying under a link or a file
// named before.
func checkPlace(name string, seen map[string]byte) error {
	if _, dup := seen[name]; dup {
		return fmt.Errorf("member %q appears twice", name)
	}
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		if t, ok := seen[dir]; ok && t != tar.TypeDir {
			return fmt.Errorf("member %q lies under %q, which is not a folder (a link would be written through)", name, dir)
		}
	}
	return nil
}

// Restore unpacks a tar made by Clean in sess's current working folder. The
// tar goes in through the session's Files, so nothing passes through a
// command line; the session's own tar unpacks it. It blocks for the write
// and the unpacking.
func Restore(ctx context.Context, sess sandbox.Session, cleanTar []byte) error {
	tmp := "/tmp/.hermes-restore-" + randHex() + ".tar"
	if err := sess.WriteFile(ctx, tmp, cleanTar, 0o600); err != nil {
		return fmt.Errorf("restore workspace: %w", err)
	}
	res, err := sess.Exec(ctx, sandbox.Cmd{Timeout: captureTimeout, Command: "tar -xf " + tmp + "; s=$?; rm -f " + tmp + "; exit $s"})
	if err != nil {
		return fmt.Errorf("restore workspace: %w", err)
	}
	if res.ExitCode != 0 {
		return errors.New("restore workspace: tar -x: exit " + fmt.Sprint(res.ExitCode) + ": " + strings.TrimSpace(res.Stderr+" "+res.Stdout))
	}
	return nil
}
