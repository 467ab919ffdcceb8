package outdir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// TestValidShard: only the names the runtime writes pass.
func TestValidShard(t *testing.T) {
	for _, ok := range []string{"data/shard-00001.jsonl", "failed/shard-12.parquet", "data/shard-123456789012345678.jsonl"} {
		if err := ValidShard(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "../outside.jsonl", "../../victimdir/victim.jsonl", "/etc/passwd", "data/../../x.jsonl",
		"data/shard-1.jsonl/..", "data/sub/shard-1.jsonl", "data//shard-1.jsonl", "./data/shard-1.jsonl", "data\\shard-1.jsonl",
		"quarantine/shard-1.jsonl", "data/shard-.jsonl", "data/shard-1", "data/shard-1.", "data/shard-1.a.b", "data/shard-1.JSONL",
		"data/.tmp-shard-1.jsonl", "data/shard-1234567890123456789.jsonl", "data/shard-1.jsonl\x00", "data", "data/"} {
		if err := ValidShard(bad); !errors.Is(err, ErrShardPath) {
			t.Errorf("%q: %v, want ErrShardPath", bad, err)
		}
	}
}

// TestScanShardPathNotTorn: a complete line naming a path outside the folder
// is an error wherever it is, the last line included (a crash cannot write
// it, so it is not a torn end to cut); ParseLine still fills the line so
// repair can keep its rows.
func TestScanShardPathNotTorn(t *testing.T) {
	good := AppendLine(nil, &Line{Rows: []Row{{Key: "a", Outcome: Filtered, Len: -1}}})
	bad := AppendLine(nil, &Line{Shard: "../x.jsonl", Bytes: 3, CostUSD: 0.5, Rows: []Row{{Key: "b", Outcome: schemas.OutcomeCompleted, Len: 3}}})
	for _, data := range []string{string(good) + string(bad), string(bad) + string(good)} {
		for _, scan := range scanners {
			_, err := scan.fn(data, func(int, *Line) error { return nil })
			if !errors.Is(err, ErrShardPath) || !strings.Contains(err.Error(), "ledger line") {
				t.Errorf("%s %q: err %v", scan.name, data, err)
			}
		}
	}
	var l Line
	err := ParseLine(strings.TrimSuffix(string(bad), "\n"), &l)
	if !errors.Is(err, ErrShardPath) || TornEnd(true, err) || l.Shard != "../x.jsonl" || l.CostUSD != 0.5 || len(l.Rows) != 1 {
		t.Errorf("ParseLine: %v, %+v", err, l)
	}
	if !TornEnd(true, ParseLine(`{"shard":"data/shard-1.jsonl"`, &l)) {
		t.Error("a cut line is torn")
	}
}

// TestOpenShardRefusesLinks: a shard that is a symbolic link is refused
// (ErrShardLink), whether it points outside the folder or in it; a data/
// that leads out of the folder is refused too; RemoveShard removes a link,
// never its target.
func TestOpenShardRefusesLinks(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(dir, DataDir), 0o755)
	os.WriteFile(filepath.Join(dir, DataDir, "shard-00001.jsonl"), []byte("{}\n"), 0o644)
	target := filepath.Join(outside, "secret.jsonl")
	os.WriteFile(target, []byte("secret\n"), 0o644)
	os.Symlink(target, filepath.Join(dir, DataDir, "shard-00002.jsonl"))
	os.Symlink("shard-00001.jsonl", filepath.Join(dir, DataDir, "shard-00003.jsonl"))

	f, err := OpenShard(dir, "data/shard-00001.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, rel := range []string{"data/shard-00002.jsonl", "data/shard-00003.jsonl"} {
		if f, err := OpenShard(dir, rel); !errors.Is(err, ErrShardLink) {
			if f != nil {
				f.Close()
			}
			t.Errorf("%s: %v, want ErrShardLink", rel, err)
		}
	}
	if _, err := OpenShard(dir, "../secret.jsonl"); !errors.Is(err, ErrShardPath) {
		t.Errorf("outside: %v", err)
	}
	if err := RemoveShard(dir, "data/shard-00002.jsonl"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(target); err != nil {
		t.Fatalf("the link's target was removed: %v", err)
	}

	// data/ itself a link out of the folder.
	other := t.TempDir()
	os.MkdirAll(filepath.Join(outside, "data"), 0o755)
	os.WriteFile(filepath.Join(outside, "data", "shard-00001.jsonl"), []byte("secret\n"), 0o644)
	os.Symlink(filepath.Join(outside, "data"), filepath.Join(other, DataDir))
	if f, err := OpenShard(other, "data/shard-00001.jsonl"); err == nil {
		f.Close()
		t.Error("opened a shard through a data/ that leads out of the folder")
	}
}

// TestJournalRefusesLink: a side journal that is a symbolic link is neither
// read nor appended to.
func TestJournalRefusesLink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(target, []byte("x\ntorn"), 0o644)
	p := filepath.Join(dir, "quarantine.jsonl")
	os.Symlink(target, p)
	if _, err := OpenJournal(p, false); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("OpenJournal: %v", err)
	}
	if err := ScanJournal(p, func([]byte) error { return nil }); err == nil {
		t.Error("ScanJournal read through a link")
	}
	if b, _ := os.ReadFile(target); string(b) != "x\ntorn" {
		t.Errorf("the target changed: %q", b)
	}
}
