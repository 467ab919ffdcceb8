package local

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// TestOpenRefusesMissingReadOnly: a confined session whose ReadOnly folder
// is missing (swe: a task's repository that is gone) or is a file is
// refused by Open with the path named, and leaves no session folder;
// bubblewrap could not mount it and would end before the sandbox started.
// An existing folder is mounted: its files can be read, not written.
func TestOpenRefusesMissingReadOnly(t *testing.T) {
	base := t.TempDir()
	d, err := New(sandbox.Config{Local: sandbox.LocalConfig{BaseDir: base, Pool: -1}})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Confined() {
		t.Fatal("driver not confined")
	}
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "f"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(t.TempDir(), "gone")
	file := filepath.Join(repo, "f")
	for path, want := range map[string]string{gone: gone + " does not exist", file: file + " is not a folder"} {
		s, err := d.Open(context.Background(), sandbox.Spec{ReadOnly: []string{repo, path}})
		if err == nil {
			_ = s.Close(context.Background())
			t.Errorf("%s: opened", path)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %q lacks %q", path, err, want)
		}
	}
	if left, _ := os.ReadDir(base); len(left) > 0 {
		t.Errorf("refused sessions left %d entries in the base folder", len(left))
	}
	s, err := d.Open(context.Background(), sandbox.Spec{ReadOnly: []string{repo}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close(context.Background()) }()
	res, err := s.Exec(context.Background(), sandbox.Cmd{Command: "cat " + file + " && echo x > " + file})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "hello" || res.ExitCode == 0 {
		t.Errorf("read-only folder: %+v, want its file read and the write refused", res)
	}
}

// TestJoinLateKeepsStderr: when the sandbox ends before its hello (bwrap
// refused a mount, say), joinLate's error carries what it wrote on stderr,
// not only "EOF".
func TestJoinLateKeepsStderr(t *testing.T) {
	for _, tc := range []struct{ script, want string }{
		{"echo 'bwrap: Can'\\''t mount tmpfs on /x' >&2; exit 1", `EOF (it printed "", stderr: bwrap: Can't mount tmpfs on /x)`},
		{"echo nonsense; echo 'why' >&2; exit 1", `it printed "nonsense\n", stderr: why`},
		{"exit 1", `EOF (it printed "")`},
	} {
		outR, outW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		errR, errW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		c := exec.Command("sh", "-c", tc.script)
		c.Stdout, c.Stderr = outW, errW
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		outW.Close()
		errW.Close()
		err = joinLate(nil, c.Process.Pid, outR, errR, nil)
		_ = c.Wait()
		outR.Close()
		errR.Close()
		if err == nil || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to end with %q", tc.script, err, tc.want)
		}
	}
}
