package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResumeAfterKillDuringFirstManifest: a run killed while it wrote its
// first run.json leaves only that file's temp, and --resume takes the folder
// as the killed run found it (the temp removed); a folder holding anything
// else without run.json is still refused, and a fresh run still refuses it.
func TestResumeAfterKillDuringFirstManifest(t *testing.T) {
	dir := t.TempDir()
	temp := filepath.Join(dir, tempPrefix+ManifestFile+"-1234567")
	if err := os.WriteFile(temp, []byte(`{"kind": "te`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenOutput(dir, testOutOpts(ModeFresh)); err == nil || !strings.Contains(err.Error(), "pass --resume") {
		t.Fatalf("fresh run into the folder: %v", err)
	}
	out := openOut(t, dir, ModeResume)
	out.Close()
	if _, err := os.Stat(temp); !os.IsNotExist(err) {
		t.Errorf("the temp file is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err != nil {
		t.Errorf("no run.json after the resume: %v", err)
	}

	other := t.TempDir()
	for _, name := range []string{tempPrefix + ManifestFile + "-1", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(other, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := OpenOutput(other, testOutOpts(ModeResume)); err == nil || !strings.Contains(err.Error(), "not a run to resume") {
		t.Fatalf("resume of a folder with a foreign file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(other, tempPrefix+ManifestFile+"-1")); err != nil {
		t.Errorf("a refused folder lost a file: %v", err)
	}
}
