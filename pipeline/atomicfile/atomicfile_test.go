package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// entries lists dir's names, temp files included.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// WriteAll replaces every file with its new bytes and leaves no temp file.
func TestWriteAll(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "b.json"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := WriteAll(dir, File{"a.jsonl", []byte("")}, File{"b.json", []byte("new b\n")}, File{"run.json", []byte("{}\n")})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a.jsonl": "", "b.json": "new b\n", "run.json": "{}\n"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	if got := entries(t, dir); len(got) != 3 {
		t.Errorf("folder holds %q, want the three files only", got)
	}
	if err := WriteAll(dir); err != nil {
		t.Errorf("no file: %v", err)
	}
}

// When one file cannot be written, no file of the group is replaced and no
// temp file is left.
func TestWriteAllRenamesNothingWhenOneFails(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.json"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := WriteAll(dir, File{"a.json", []byte("new")}, File{"missing/b.json", []byte("x")})
	if err == nil || !strings.Contains(err.Error(), "missing/b.json") {
		t.Fatalf("err = %v, want one naming missing/b.json", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "a.json")); string(got) != "old" {
		t.Errorf("a.json = %q, want it untouched", got)
	}
	if got := entries(t, dir); len(got) != 1 {
		t.Errorf("folder holds %q, want a.json only", got)
	}
}
