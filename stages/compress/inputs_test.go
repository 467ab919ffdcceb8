package compress

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseFileKey(t *testing.T) {
	for _, tc := range []struct {
		key  string
		name string
		line int
		ok   bool
	}{
		{"a/b.jsonl:12:0123456789ab", "a/b.jsonl", 12, true},
		{"c:d.jsonl:1:0123456789ab", "c:d.jsonl", 1, true},
		{"kA", "", 0, false},
		{"x:0:0123456789ab", "", 0, false},
		{"x:1:0123", "", 0, false},
	} {
		name, line, _, ok := ParseFileKey(tc.key)
		if name != tc.name || line != tc.line || ok != tc.ok {
			t.Errorf("%s: %q %d %v", tc.key, name, line, ok)
		}
	}
	// What FileKey builds ParseFileKey reads back, its hash RowHash's.
	row := []byte(`{"conversations": []}`)
	name, line, hash, ok := ParseFileKey(FileKey("in/a:b.jsonl", 7, row))
	if !ok || name != "in/a:b.jsonl" || line != 7 || hash != RowHash(row) {
		t.Errorf("round trip: %q %d %q %v", name, line, hash, ok)
	}
}

// TestReadInputs: what recordInputs writes ReadInputs reads back; a missing
// file says so, a damaged one names itself.
func TestReadInputs(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadInputs(dir); !os.IsNotExist(err) {
		t.Fatalf("no file: %v", err)
	}
	in := filepath.Join(dir, "in.jsonl")
	if err := recordInputs(dir, []Input{{Path: in, Name: "in.jsonl", Kind: KindJSONL}, {Path: dir, Name: "run", Kind: KindRun}}); err != nil {
		t.Fatal(err)
	}
	got, err := ReadInputs(dir)
	if err != nil || len(got) != 2 || got[0] != (Input{Path: in, Name: "in.jsonl", Kind: KindJSONL}) || got[1].Kind != KindRun {
		t.Fatalf("%+v, %v", got, err)
	}
	os.WriteFile(filepath.Join(dir, InputsFile), []byte(`{`), 0o644)
	if _, err := ReadInputs(dir); err == nil || !strings.Contains(err.Error(), InputsFile) {
		t.Errorf("damaged: %v", err)
	}
}

// TestFindInputs: a folder is walked as --in walks it, names relative to
// it, output folders whole; a file is one input of its name's kind.
func TestFindInputs(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "a.jsonl"), []byte("{}\n"))
	mustWrite(t, filepath.Join(dir, "sub", "b.jsonl.gz"), nil)
	mustWrite(t, filepath.Join(dir, "sub", "notes.txt"), nil)
	mustWrite(t, filepath.Join(dir, ".hidden", "c.jsonl"), nil)
	mustWrite(t, filepath.Join(dir, "run", "run.json"), []byte("{}"))
	mustWrite(t, filepath.Join(dir, "run", "data", "x.jsonl"), nil)
	got, err := FindInputs(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	want := `[{"Path":"` + dir + `/a.jsonl","Name":"a.jsonl","Kind":"jsonl"},{"Path":"` + dir + `/run","Name":"run","Kind":"run"},{"Path":"` + dir + `/sub/b.jsonl.gz","Name":"sub/b.jsonl.gz","Kind":"gzip"}]`
	if string(b) != want {
		t.Errorf("\n%s\nwant\n%s", b, want)
	}
	if got, err := FindInputs(filepath.Join(dir, "sub", "notes.txt"), false); err != nil || len(got) != 1 || got[0].Kind != KindJSONL || got[0].Name != "notes.txt" {
		t.Errorf("a named file: %+v %v", got, err)
	}
	if got, err := FindInputs(filepath.Join(dir, ".hidden"), true); err != nil || len(got) != 1 {
		t.Errorf("a folder named is walked even when hidden: %+v %v", got, err)
	}
}
