package outdir

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// WorkspacesDir is the folder of generate --keep-workspace's archives (one
// per record, named by hashes; written and read by stages/workspace).
const WorkspacesDir = "workspaces"

// GradesFile is the journal `regrade` appends the new grades of an output
// folder's records to: one GradeLine per regraded record, appended with a
// single write and fsynced, a torn last line left out. The records' shards
// are never rewritten; readers (cat, stats, export, through pipeline's record
// reader) show a record with its latest grade from here.
const GradesFile = "grades.jsonl"

// GradeLine is one line of GradesFile: the new reward and grade of the record
// keyed Key. Record is the SHA-256 of the record line that was graded (as its
// shard holds it, newline included): a line applies to that record only, so a
// record written again later (a row redone by --resume) is not shown with a
// grade of its former self.
type GradeLine struct {
	Key    string         `json:"key"`
	Record string         `json:"record_sha256"`
	Reward *float64       `json:"reward"`
	Grade  *schemas.Grade `json:"grade"`
	Time   string         `json:"time,omitempty"`
}

// RecordSum is GradeLine.Record of a record line.
func RecordSum(line []byte) string {
	s := sha256.Sum256(line)
	return hex.EncodeToString(s[:])
}

// Encode returns the line with its newline.
func (g GradeLine) Encode() []byte {
	b, err := json.Marshal(g)
	if err != nil { // strings, numbers and a Grade: always encodable
		panic(err)
	}
	return append(b, '\n')
}

// ReadGrades reads dir's GradesFile and returns the latest line of every key
// (a missing file: none). A line that does not parse is an error naming the
// file and line; the torn last line of a killed regrade is left out.
func ReadGrades(dir string) (map[string]GradeLine, error) {
	path := filepath.Join(dir, GradesFile)
	out := map[string]GradeLine{}
	n := 0
	err := ScanJournal(path, func(line []byte) error {
		n++
		var g GradeLine
		if err := json.Unmarshal(line, &g); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if g.Key == "" || len(g.Record) != 64 {
			return fmt.Errorf("%s:%d: key and record_sha256 are required", path, n)
		}
		out[g.Key] = g
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
