package sandbox

import (
	"errors"
	"io/fs"
	"os/exec"
	"strings"
	"testing"
)

// TestAssignBytes runs the generated assignment in /bin/sh and checks that
// the variable holds the exact bytes, and that the script is ASCII.
func TestAssignBytes(t *testing.T) {
	for _, s := range []string{"plain/name.txt", "it's", "back\\slash", "bad-\xff\xfe", "nl\n", "%s %b \\0101", "\t", "é"} {
		code := assignBytes("p", s)
		for i := 0; i < len(code); i++ {
			if code[i] >= 0x80 {
				t.Fatalf("assignment of %q is not ASCII: %q", s, code)
			}
		}
		out, err := exec.Command("/bin/sh", "-c", code+`printf '%s' "$p"`).Output()
		if err != nil {
			t.Fatalf("%q: %v", code, err)
		}
		if string(out) != s {
			t.Fatalf("assignment of %q gave %q (code %q)", s, out, code)
		}
	}
}

func TestFileError(t *testing.T) {
	for _, c := range []struct {
		stderr string
		want   error
	}{
		{"stat: can't stat './x': No such file or directory", fs.ErrNotExist},
		{"sh: can't open x: no such file", fs.ErrNotExist},
		{"sh: 1: cannot open x: Permission denied", fs.ErrPermission},
		{"./d: Is a directory", ErrIsDir},
	} {
		err := FileError("read", "x", 1, c.stderr)
		if !errors.Is(err, c.want) {
			t.Errorf("FileError(%q) = %v, want %v", c.stderr, err, c.want)
		}
	}
	err := FileError("write", "x", 1, "mkdir: can't create directory './f/': Not a directory\n")
	if errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "Not a directory") {
		t.Errorf("other failure: %v", err)
	}
}

func TestReadOutputAndStat(t *testing.T) {
	r := NewReadOutput(5)
	for _, p := range []string{"12 81", "a4\nhel", "lo"} {
		_, _ = r.Write([]byte(p))
	}
	fi, data, err := r.Result()
	if err != nil || fi.Size != 12 || !fi.IsRegular() || fi.Mode.Perm() != 0o644 || string(data) != "hello" {
		t.Fatalf("got %+v %q %v", fi, data, err)
	}
	_, _ = r.Write([]byte("x"))
	if _, _, err := r.Result(); err == nil {
		t.Fatal("more bytes than asked for were accepted")
	}
	if fi, err := ParseFileStat("4096 41ed"); err != nil || !fi.IsDir() || fi.Mode.Perm() != 0o755 {
		t.Fatalf("folder: %+v %v", fi, err)
	}
	if _, err := ParseFileStat("garbage"); err == nil {
		t.Fatal("bad stat line accepted")
	}
	if err := CheckRead("f", FileInfo{Size: 10}, 8, 5, 2); err != nil {
		t.Fatalf("short read at the end: %v", err)
	}
	if err := CheckRead("f", FileInfo{Size: 10}, 0, 5, 3); err == nil {
		t.Fatal("a short read in the middle passed")
	}
}
