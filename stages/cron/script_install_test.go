package cron

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInstallScriptCopiesIntoAFreshHome(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	src := filepath.Join(t.TempDir(), "watchdog.sh")
	if err := os.WriteFile(src, []byte("#!/bin/sh\necho ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	name, _, err := InstallScript(home, src)
	if err != nil || name != "watchdog.sh" {
		t.Fatalf("InstallScript = %q, %v", name, err)
	}
	st, err := os.Stat(ScriptsDir(home))
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("scripts folder: %v %v", st, err)
	}
	if p, err := ResolveScript(home, name); err != nil {
		t.Fatal(err)
	} else if b, _ := os.ReadFile(p); string(b) != "#!/bin/sh\necho ok\n" {
		t.Fatalf("copied %q", b)
	}
	// The same file again reuses the copy; the bare name finds it.
	if name, _, err := InstallScript(home, src); err != nil || name != "watchdog.sh" {
		t.Fatalf("again: %q %v", name, err)
	}
	if name, _, err := InstallScript(home, "watchdog.sh"); err != nil || name != "watchdog.sh" {
		t.Fatalf("bare: %q %v", name, err)
	}
	// Other content under the same name never replaces the script.
	other := filepath.Join(t.TempDir(), "watchdog.sh")
	os.WriteFile(other, []byte("#!/bin/sh\nrm -rf /tmp/x\n"), 0o644)
	if _, _, err := InstallScript(home, other); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "already exists with other content") {
		t.Fatalf("other content: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ScriptsDir(home), "watchdog.sh")); string(b) != "#!/bin/sh\necho ok\n" {
		t.Fatalf("script replaced: %q", b)
	}
}

func TestInstallScriptUndoRemovesOnlyWhatItCopied(t *testing.T) {
	home := t.TempDir()
	src := filepath.Join(t.TempDir(), "a.sh")
	os.WriteFile(src, []byte("echo a\n"), 0o600)
	_, undo, err := InstallScript(home, src)
	if err != nil {
		t.Fatal(err)
	}
	_, undo2, err := InstallScript(home, src) // reused: its undo keeps the file
	if err != nil {
		t.Fatal(err)
	}
	undo2()
	if _, err := os.Stat(filepath.Join(ScriptsDir(home), "a.sh")); err != nil {
		t.Fatalf("undo of a reuse removed the script: %v", err)
	}
	undo()
	if _, err := os.Stat(filepath.Join(ScriptsDir(home), "a.sh")); !os.IsNotExist(err) {
		t.Fatalf("undo left the copy: %v", err)
	}
}

func TestInstallScriptRefusals(t *testing.T) {
	home := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "evil.sh"), []byte("echo evil\n"), 0o700)
	os.MkdirAll(ScriptsDir(home), 0o700)
	// A link in the scripts folder pointing out of it is refused, not copied over.
	if err := os.Symlink(filepath.Join(outside, "evil.sh"), filepath.Join(ScriptsDir(home), "link.sh")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := InstallScript(home, "link.sh"); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("link out of the folder: %v", err)
	}
	// Neither in the scripts folder nor a file: the error names both places.
	t.Chdir(outside)
	_, _, err := InstallScript(home, "missing.sh")
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), ScriptsDir(home)) || !strings.Contains(err.Error(), filepath.Join(outside, "missing.sh")) {
		t.Fatalf("missing: %v", err)
	}
	// A folder is not a script.
	if _, _, err := InstallScript(home, outside); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ScriptsDir(home), filepath.Base(outside))); !os.IsNotExist(err) {
		t.Fatalf("a folder was copied: %v", err)
	}
	// A relative name inside the scripts folder still names it; ./ names the working folder.
	os.MkdirAll(filepath.Join(ScriptsDir(home), "tools"), 0o700)
	os.WriteFile(filepath.Join(ScriptsDir(home), "tools", "t.sh"), []byte("echo t\n"), 0o700)
	if name, _, err := InstallScript(home, filepath.Join("tools", "t.sh")); err != nil || name != filepath.Join("tools", "t.sh") {
		t.Fatalf("name in a subfolder: %q %v", name, err)
	}
	os.WriteFile(filepath.Join(outside, "t2.sh"), []byte("echo t2\n"), 0o600)
	if name, _, err := InstallScript(home, "./t2.sh"); err != nil || name != "t2.sh" {
		t.Fatalf("./t2.sh: %q %v", name, err)
	}
	// A bare name in the working folder is copied (the README's example).
	if name, _, err := InstallScript(home, "evil.sh"); err != nil || name != "evil.sh" {
		t.Fatalf("bare name in the working folder: %q %v", name, err)
	}
	// A bare name in both places with different content is ambiguous.
	os.WriteFile(filepath.Join(ScriptsDir(home), "evil.sh"), []byte("echo changed\n"), 0o700)
	if _, _, err := InstallScript(home, "evil.sh"); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "other content") {
		t.Fatalf("ambiguous bare name: %v", err)
	}
}
