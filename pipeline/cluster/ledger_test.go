package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
)

// TestReadLedger checks the view of a ledger: the latest row of a key wins,
// marker rows hold no record, units come in (prompt_index, sample, key)
// order, and a torn or unparsable last line is left out while an unparsable
// line before it is an error.
func TestReadLedger(t *testing.T) {
	good := `{"shard": "data/shard-00001.jsonl", "bytes": 20, "sha256": "x", "rows": [["b", "ok", 1, 0, 10], ["a", "error", 0, 0, 10]]}` + "\n" +
		`{"rows": [["c", "filtered", 2, 0, -1]]}` + "\n" +
		`{"shard": "data/shard-00002.jsonl", "bytes": 10, "sha256": "y", "rows": [["a", "ok", 0, 0, 10]]}` + "\n"
	for name, tail := range map[string]string{
		"clean":      "",
		"torn":       `{"shard": "data/shard-00003.jsonl", "rows": [["d", "ok"`,
		"unparsable": "{\"shard\": \"data/shard-00003.jsonl\", \"rows\": [[\"d\"]]}\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, pipeline.LedgerFile), []byte(good+tail), 0o600); err != nil {
				t.Fatal(err)
			}
			lv, err := readLedger(dir)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, u := range lv.units {
				got = append(got, u.key+":"+string(u.outcome)+map[bool]string{true: "+rec", false: ""}[u.record])
			}
			if want := "a:ok+rec b:ok+rec c:filtered"; strings.Join(got, " ") != want {
				t.Errorf("units %q, want %q", strings.Join(got, " "), want)
			}
			if len(lv.files) != 2 || lv.files["data/shard-00001.jsonl"] != 2 || lv.files["data/shard-00002.jsonl"] != 1 {
				t.Errorf("files %v", lv.files)
			}
		})
	}
	dir := t.TempDir()
	bad := "{\"rows\": [[\"d\"]]}\n" + good
	if err := os.WriteFile(filepath.Join(dir, pipeline.LedgerFile), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readLedger(dir); err == nil || !strings.Contains(err.Error(), "ledger line 1") {
		t.Errorf("unparsable first line: err %v, want ledger line 1", err)
	}
}
