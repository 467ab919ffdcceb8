package outdir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenJournalCutsTornTail: reopening keeps every complete line and drops
// only bytes after the last newline, also when the torn line is longer than
// the tail buffer.
func TestOpenJournalCutsTornTail(t *testing.T) {
	long := strings.Repeat("x", 70<<10)
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"a\n", "a\n"},
		{"a\nb\n", "a\nb\n"},
		{"a\nb", "a\n"},
		{"torn", ""},
		{"a\n" + long, "a\n"},
		{long + "\n" + long, long + "\n"},
	} {
		path := filepath.Join(t.TempDir(), "j.jsonl")
		if err := os.WriteFile(path, []byte(c.in), 0o644); err != nil {
			t.Fatal(err)
		}
		j, err := OpenJournal(path, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Append([]byte("z\n"), true); err != nil {
			t.Fatal(err)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(path)
		if string(got) != c.want+"z\n" {
			t.Errorf("%.20q...: got %d bytes ending %q, want %d bytes", c.in, len(got), got[max(len(got)-10, 0):], len(c.want)+2)
		}
	}
}
