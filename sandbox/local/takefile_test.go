package local

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// takeFile reads and removes a regular file the shell wrote in the report
// folder, and refuses, without blocking, what a row could have left under
// that name: a link (to a host file), a FIFO, a folder; a name with a
// slash is refused before anything is opened, and a folder on the way
// that is a link too.
func TestTakeFileRefusesWhatARowLeaves(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "dev", "shm")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	topfd, err := syscall.Open(top, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(topfd)
	take := func(name string) ([]byte, error) { return takeFile(topfd, top, []string{"dev", "shm"}, name) }
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host file"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report"), []byte("declare -- A=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := take("report")
	if err != nil || string(got) != "declare -- A=1\n" {
		t.Fatalf("takeFile(report) = %q, %v", got, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "report")); !os.IsNotExist(err) {
		t.Fatalf("the report is still there after it was read: %v", err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "folder"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"link", "fifo", "folder", "missing", "../" + filepath.Base(dir) + "/report", ".."} {
		if got, err := take(name); err == nil {
			t.Errorf("takeFile(%q) = %q, want an error", name, got)
		}
	}
	// The report folder itself replaced by a link is refused too.
	moved := filepath.Join(t.TempDir(), "shm")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(secret), dir); err != nil {
		t.Fatal(err)
	}
	if got, err := take("secret"); err == nil {
		t.Errorf("takeFile through a linked report folder = %q, want an error", got)
	}
}

// writeInside replaces what is at its name: a link there is removed, not
// followed (its target keeps its content); a file of the same size is
// written over in place, one of another size replaced.
func TestWriteInsideReplacesWithoutFollowing(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "r")); err != nil {
		t.Fatal(err)
	}
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, data := range []string{"xyz", "uvw", "longer", "s"} {
		if err := writeInside(dir, "r", []byte(data)); err != nil {
			t.Fatal(err)
		}
		if got := read(filepath.Join(dir, "r")); got != data {
			t.Fatalf("after writing %q the file holds %q", data, got)
		}
		if fi, err := os.Lstat(filepath.Join(dir, "r")); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("not a regular file: %v %v", fi, err)
		}
	}
	if got := read(target); got != "abc" {
		t.Fatalf("the link's target was written: %q", got)
	}
	if err := writeInside(dir, "../x", []byte("a")); err == nil {
		t.Fatal("a name with a slash was accepted")
	}
}
