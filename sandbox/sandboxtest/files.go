package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// runFiles adds the sandbox.Files subtests.
func (s *suite) runFiles(t *testing.T) {
	t.Run("EmptyFile", s.filesEmpty)
	t.Run("Binary1MiB", s.filesBinary)
	t.Run("Large20MiB", s.filesLarge)
	t.Run("NonUTF8Name", s.filesNonUTF8Name)
	t.Run("ParentsCreated", s.filesParents)
	t.Run("Ranges", s.filesRanges)
	t.Run("Errors", s.filesErrors)
	t.Run("RelativePaths", s.filesRelative)
	t.Run("Overwrite", s.filesOverwrite)
	t.Run("AfterClose", s.filesAfterClose)
}

// fctx is the budget of one file operation in the suite.
func fctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// randomBytes returns n bytes from a generator seeded by seed.
func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// scratch returns a fresh absolute folder name for the session's files: in
// the session's own folder for shell drivers (found with pwd), else below
// the fake's working folder.
func (s *suite) scratch(t *testing.T, sess sandbox.Session) string {
	t.Helper()
	if !s.caps.Shell {
		return "/sandboxtest-" + fmt.Sprint(seq.Add(1))
	}
	res := run(t, sess, `d=$(mktemp -d) && echo "$d"`, 0)
	d := strings.TrimSpace(res.Stdout)
	if res.ExitCode != 0 || !strings.HasPrefix(d, "/") {
		t.Fatalf("mktemp -d: %+v", res)
	}
	return d
}

// roundTrip writes data to p, checks Stat and reads it back whole.
func roundTrip(t *testing.T, sess sandbox.Session, p string, data []byte) {
	t.Helper()
	ctx := fctx(t)
	if err := sess.WriteFile(ctx, p, data, 0o644); err != nil {
		t.Fatalf("WriteFile(%q, %d bytes): %v", p, len(data), err)
	}
	fi, err := sess.Stat(ctx, p)
	if err != nil {
		t.Fatalf("Stat(%q): %v", p, err)
	}
	if fi.Size != int64(len(data)) || !fi.IsRegular() || fi.IsDir() {
		t.Fatalf("Stat(%q) = size %d mode %v, want %d bytes, regular", p, fi.Size, fi.Mode, len(data))
	}
	got, err := sandbox.ReadAll(ctx, sess, p, 0)
	if err != nil {
		t.Fatalf("ReadAll(%q): %v", p, err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes of %q, wrote %d (first difference at %d)", len(got), p, len(data), firstDiff(got, data))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func (s *suite) filesEmpty(t *testing.T) {
	t.Parallel()
	sess := s.session(t, s.spec(t))
	dir := s.scratch(t, sess)
	roundTrip(t, sess, dir+"/empty", nil)
	data, size, err := sess.ReadRange(fctx(t), dir+"/empty", 0, 100)
	if err != nil || size != 0 || len(data) != 0 {
		t.Fatalf("ReadRange of an empty file = %d bytes, size %d, %v", len(data), size, err)
	}
	if s.caps.Shell {
		want(t, sess, "wc -c < "+sandbox.ShellQuote(dir+"/empty"), 0, "0")
	}
}

func (s *suite) filesBinary(t *testing.T) {
	t.Parallel()
	sess := s.session(t, s.spec(t))
	dir := s.scratch(t, sess)
	data := randomBytes(1<<20, 1)
	roundTrip(t, sess, dir+"/random.bin", data)
	if s.caps.Shell {
		// The shell sees the same bytes: compare a checksum of a slice
		// computed on both sides by cksum's algorithm-free cousin, od.
		res := run(t, sess, "head -c 16 "+sandbox.ShellQuote(dir+"/random.bin")+" | od -An -tx1 | tr -d ' \\n'", 0)
		if got, want := strings.TrimSpace(res.Stdout), fmt.Sprintf("%x", data[:16]); got != want {
			t.Fatalf("the shell reads %s, want %s", got, want)
		}
	}
}

func (s *suite) filesLarge(t *testing.T) {
	t.Parallel()
	sess := s.session(t, s.spec(t))
	dir := s.scratch(t, sess)
	data := randomBytes(20<<20, 2)
	roundTrip(t, sess, dir+"/large.bin", data)
	// One ReadRange of the whole file works too.
	got, size, err := sess.ReadRange(fctx(t), dir+"/large.bin", 0, len(data))
	if err != nil || size != int64(len(data)) || !bytes.Equal(got, data) {
		t.Fatalf("one ReadRange of 20 MiB: %d bytes, size %d, %v", len(got), size, err)
	}
}

func (s *suite) filesNonUTF8Name(t *testing.T) {
	t.Parallel()
	sess := s.session(t, s.spec(t))
	dir := s.scratch(t, sess)
	name := "bad-\xff\xfe-name 'q' \\ %s\n"
	roundTrip(t, sess, dir+"/"+name, []byte("latin-1 name\n"))
	if s.caps.Shell {
		want(t, sess, "cd "+sandbox.ShellQuote(dir)+" && set -- * && echo $# && cat bad-*", 0, "1\nlatin-1 name")
	}
}

func (s *suite) filesParents(t *testing.T) {
	t.Parallel()
	sess := s.session(t, s.spec(t))
	dir := s.scratch(t, sess)
	roundTrip(t, sess, dir+"/a/b/c/file.txt", []byte("deep\n"))
	fi, err := sess.Stat(fctx(t), dir+"/a/b")
	if err != nil || !fi.IsDir() {
		t.Fatalf("Stat of a created parent = %v, %v; want a folder", fi.Mode, err)
	}
	if s.caps.Shell {
		want(t, sess, "cat "+sandbox.ShellQuote(dir+"/a/b/c/file.txt"), 0, "deep")
	}
}

func (s *suite) filesRanges(t *testing.T) {
	t.Parallel()
	sess := s.session(t, s.spec(t))
	dir := s.scratch(t, sess)
	data := randomBytes(100_000, 3)
	p := dir + "/ranges.bin"
	ctx := fctx(t)
	if err := sess.WriteFile(ctx, p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		off  int64
		n    int
		want []byte
	}{
		{0, 10, data[:10]},
		{40_000, 1234, data[40_000:41_234]},
		{99_990, 100, data[99_990:]}, // crosses the end
		{100_000, 10, nil},           // at the end
		{150_000, 10, nil},           // past the end
		{500, 0, nil},                // nothing asked
	} {
		got, size, err := sess.ReadRange(ctx, p, c.off, c.n)
		if err != nil {
			t.Fatalf("ReadRange(%d, %d): %v", c.off, c.n, err)
		}
		if size != int64(len(data)) || !bytes.Equal(got, c.want) {
			t.Fatalf("ReadRange(%d, %d) = %d bytes, size %d; want %d bytes, size %d", c.off, c.n, len(got), size, len(c.want), len(data))
		}
	}
}

// notDriverFailure fails t when err looks like a driver failure.
func notDriverFailure(t *testing.T, what string, err error) {
	t.Helper()
	if errors.Is(err, sandbox.ErrUnavailable) || errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("%s: %v is a driver failure; a file error was expected", what, err)
	}
}

func (s *suite) filesErrors(t *testing.T) {
	t.Parallel()
	sess := s.session(t, s.spec(t))
	dir := s.scratch(t, sess)
	ctx := fctx(t)
	missing := dir + "/no/such/file"
	if _, err := sess.Stat(ctx, missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat of a missing file: %v, want fs.ErrNotExist", err)
	} else {
		notDriverFailure(t, "Stat of a missing file", err)
	}
	if _, _, err := sess.ReadRange(ctx, missing, 0, 10); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadRange of a missing file: %v, want fs.ErrNotExist", err)
	}
	if err := sess.WriteFile(ctx, dir+"/sub/f", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sess.ReadRange(ctx, dir+"/sub", 0, 10); !errors.Is(err, sandbox.ErrIsDir) {
		t.Fatalf("ReadRange of a folder: %v, want sandbox.ErrIsDir", err)
	}
	if err := sess.WriteFile(ctx, dir+"/sub", []byte("x"), 0o644); !errors.Is(err, sandbox.ErrIsDir) {
		t.Fatalf("WriteFile over a folder: %v, want sandbox.ErrIsDir", err)
	}
	// A parent that is a file.
	err := sess.WriteFile(ctx, dir+"/sub/f/g", []byte("x"), 0o644)
	if err == nil {
		t.Fatal("WriteFile below a regular file succeeded")
	}
	notDriverFailure(t, "WriteFile below a regular file", err)
	if s.caps.Shell {
		// A FIFO is refused, not opened (which would wait for a writer).
		fifo := dir + "/fifo"
		want(t, sess, "mkfifo "+sandbox.ShellQuote(fifo), 0, "")
		if _, _, err := sess.ReadRange(ctx, fifo, 0, 10); !errors.Is(err, sandbox.ErrNotRegular) {
			t.Fatalf("ReadRange of a FIFO: %v, want sandbox.ErrNotRegular", err)
		}
		// An unreadable file (skipped as root, who reads everything).
		res := run(t, sess, "id -u", 0)
		if strings.TrimSpace(res.Stdout) != "0" {
			p := dir + "/secret"
			want(t, sess, "echo s > "+sandbox.ShellQuote(p)+" && chmod 000 "+sandbox.ShellQuote(p), 0, "")
			if _, _, err := sess.ReadRange(ctx, p, 0, 10); !errors.Is(err, fs.ErrPermission) {
				t.Fatalf("ReadRange of a mode-000 file: %v, want fs.ErrPermission", err)
			}
		}
	}
}

// filesRelative checks that relative paths resolve against the folder the
// last command left the shell in (the starting folder before any).
func (s *suite) filesRelative(t *testing.T) {
	t.Parallel()
	sp := s.spec(t)
	if s.caps.Cwd != "" {
		sp.Cwd = s.caps.Cwd
	}
	sess := s.session(t, sp)
	ctx := fctx(t)
	name := fmt.Sprintf("rel-%d.txt", seq.Add(1))
	if err := sess.WriteFile(ctx, name, []byte("at start\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s.caps.Cwd != "" {
		abs := strings.TrimSuffix(s.caps.Cwd, "/") + "/" + name
		t.Cleanup(func() {
			if s.caps.Shell {
				_, _ = sess.Exec(context.Background(), sandbox.Cmd{Command: "rm -f " + sandbox.ShellQuote(abs)})
			}
		})
		got, _, err := sess.ReadRange(ctx, abs, 0, 100)
		if err != nil || string(got) != "at start\n" {
			t.Fatalf("a relative write before any command did not land in the starting folder %s: %q, %v", s.caps.Cwd, got, err)
		}
	}
	if !s.caps.Shell {
		got, _, err := sess.ReadRange(ctx, name, 0, 100)
		if err != nil || string(got) != "at start\n" {
			t.Fatalf("relative read back: %q, %v", got, err)
		}
		return
	}
	dir := s.scratch(t, sess)
	want(t, sess, "cd "+sandbox.ShellQuote(dir)+" && mkdir -p sub && cd sub", 0, "")
	if err := sess.WriteFile(ctx, "moved.txt", []byte("after cd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want(t, sess, "pwd && cat moved.txt", 0, dir+"/sub\nafter cd")
	got, _, err := sess.ReadRange(ctx, "../sub/moved.txt", 0, 100)
	if err != nil || string(got) != "after cd\n" {
		t.Fatalf("relative read after cd: %q, %v", got, err)
	}
	fi, err := sess.Stat(ctx, ".")
	if err != nil || !fi.IsDir() {
		t.Fatalf("Stat(.) = %v, %v", fi, err)
	}
}

// filesOverwrite checks that a rewrite keeps the file's permission bits,
// that a new file gets perm, and that a symbolic link is written through.
func (s *suite) filesOverwrite(t *testing.T) {
	t.Parallel()
	sess := s.session(t, s.spec(t))
	dir := s.scratch(t, sess)
	ctx := fctx(t)
	p := dir + "/tool.sh"
	if err := sess.WriteFile(ctx, p, []byte("#!/bin/sh\necho one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, err := sess.Stat(ctx, p); err != nil || fi.Mode.Perm() != 0o600 {
		t.Fatalf("new file with perm 0600: %v, %v", fi.Mode, err)
	}
	if !s.caps.Shell {
		roundTrip(t, sess, p, []byte("two"))
		return
	}
	want(t, sess, "chmod 755 "+sandbox.ShellQuote(p), 0, "")
	if err := sess.WriteFile(ctx, p, []byte("#!/bin/sh\necho two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, err := sess.Stat(ctx, p); err != nil || fi.Mode.Perm() != 0o755 {
		t.Fatalf("rewritten 0755 file: %v, %v; want its mode kept", fi.Mode, err)
	}
	want(t, sess, sandbox.ShellQuote(p), 0, "two")
	want(t, sess, "cd "+sandbox.ShellQuote(dir)+" && ln -s tool.sh link.sh", 0, "")
	if err := sess.WriteFile(ctx, dir+"/link.sh", []byte("#!/bin/sh\necho three\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want(t, sess, "cd "+sandbox.ShellQuote(dir)+" && test -L link.sh && ./tool.sh && ls -A | wc -l", 0, "three\n2")
}

func (s *suite) filesAfterClose(t *testing.T) {
	t.Parallel()
	sess := s.session(t, s.spec(t))
	if err := sess.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := sess.WriteFile(context.Background(), "x", []byte("x"), 0o644); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("WriteFile after Close: %v, want sandbox.ErrClosed", err)
	}
	if _, _, err := sess.ReadRange(context.Background(), "x", 0, 1); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("ReadRange after Close: %v, want sandbox.ErrClosed", err)
	}
}

// BenchWriteRead1MiB measures one WriteFile of 1 MiB of random bytes and
// one ReadAll of it back through sess (relative path, so in the session's
// own working folder), reporting the median of a write+read pair as
// "median-ms". Every driver's benchmark calls it.
func BenchWriteRead1MiB(b *testing.B, sess sandbox.Session) {
	data := randomBytes(1<<20, 4)
	ctx := context.Background()
	b.SetBytes(2 << 20)
	BenchMedian(b, func() error {
		if err := sess.WriteFile(ctx, "hermes-bench.bin", data, 0o644); err != nil {
			return err
		}
		got, err := sandbox.ReadAll(ctx, sess, "hermes-bench.bin", 0)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, data) {
			return errors.New("read back different bytes")
		}
		return nil
	})
}
