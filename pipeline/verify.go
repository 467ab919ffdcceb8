package pipeline

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// Problem is one defect Verify found. Line is 1-based, 0 when the problem is
// with the file as a whole.
type Problem struct {
	File string `json:"file"`
	Line int    `json:"line,omitempty"`
	Msg  string `json:"problem"`
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg)
	}
	return p.File + ": " + p.Msg
}

// VerifyReport is the result of Verify.
type VerifyReport struct {
	Shards   int       `json:"shards"`
	Records  int       `json:"records"`   // record lines in all shards
	LiveKeys int       `json:"live_keys"` // keys with a live record
	Problems []Problem `json:"problems"`
}

// OK reports whether the folder is whole.
func (r VerifyReport) OK() bool { return len(r.Problems) == 0 }

// WriteText prints the report, one problem a line.
func (r VerifyReport) WriteText(w io.Writer) error {
	for _, p := range r.Problems {
		if _, err := fmt.Fprintln(w, p.String()); err != nil {
			return err
		}
	}
	status := "ok"
	if !r.OK() {
		status = fmt.Sprintf("%d problems", len(r.Problems))
	}
	_, err := fmt.Fprintf(w, "%d shards, %d records, %d live keys: %s\n", r.Shards, r.Records, r.LiveKeys, status)
	return err
}

// Verify proves that the output folder dir is whole: run.json and every
// ledger line parse; every shard the ledger names exists with the recorded
// size and SHA-256, no torn line, one record per ledger row with the same
// key, outcome, position and length; every record is schema-valid (key,
// known outcome, prompt_index, sample, conversations with valid roles) and in
// the folder its outcome belongs to; no key has two final records; every shard
// file is in the ledger; the spend journal's lines parse (a torn last one
// aside); and no temp or unknown file is left. It returns an
// error only when the folder cannot be read at all; defects are listed in the
// report. It reads every shard once.
func Verify(dir string) (VerifyReport, error) {
	v := &verifier{dir: dir, final: map[string]finalRecord{}, shardLine: map[string]int{}}
	if _, err := os.Stat(dir); err != nil {
		return v.rep, fmt.Errorf("verify: %w", err)
	}
	man, ok, err := readManifest(dir)
	switch {
	case err != nil:
		v.add(ManifestFile, 0, "%v", err)
	case !ok:
		v.add(ManifestFile, 0, "missing: not an output folder")
	default:
		if _, err := formatByName(man.Format); err != nil {
			v.add(ManifestFile, 0, "%v", err)
			return v.rep, nil
		}
	}
	v.known = knownOutcomes(man.Outcomes)
	v.retry = map[schemas.Outcome]bool{}
	for _, oc := range man.Retry {
		v.retry[oc] = true
	}
	v.artifacts = man.Artifacts
	if err := v.ledger(); err != nil {
		return v.rep, err
	}
	v.files()
	v.spend()
	return v.rep, nil
}

// spend checks the spend journal (outdir.SpendFile) line by line: a torn
// last line is what a kill -9 mid-write leaves, cut by the next run, and
// not a defect.
func (v *verifier) spend() {
	if _, err := outdir.ReadSpend(v.dir); err != nil {
		v.add(outdir.SpendFile, 0, "%v", err)
	}
}

type verifier struct {
	dir       string
	artifacts []string // files the mode keeps in the folder (run.json says which)
	known     map[schemas.Outcome]bool
	retry     map[schemas.Outcome]bool // final outcomes the mode runs again (run.json)
	rep       VerifyReport
	final     map[string]finalRecord // key → where its final record is
	shardLine map[string]int         // shard → ledger line naming it
	live      map[string]bool        // key → latest row has a record
	latest    map[string]int         // key → ledger line of its latest row
}

func (v *verifier) add(file string, line int, format string, args ...any) {
	v.rep.Problems = append(v.rep.Problems, Problem{File: file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

func (v *verifier) ledger() error {
	if fi, err := os.Lstat(filepath.Join(v.dir, LedgerFile)); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		v.add(LedgerFile, 0, "a symbolic link: not followed (hermes-pipe never makes one)")
		return nil
	}
	data, err := os.ReadFile(filepath.Join(v.dir, LedgerFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("verify: read ledger: %w", err)
	}
	if bytes.IndexByte(data, '\n') < 0 {
		if nerr := noLedgerError(v.dir); nerr != nil {
			v.add(LedgerFile, 0, "%v", nerr)
		} else if err != nil {
			v.add(LedgerFile, 0, "missing")
		}
		if err != nil {
			return nil
		}
	}
	v.live = map[string]bool{}
	s := string(data)
	var l ledgerLine
	// First pass: the line holding each key's latest row, so a shard whose
	// rows were all superseded (a damaged shard removed on open, its records
	// marked lost) may be gone.
	v.latest = map[string]int{}
	for n, pos := 1, 0; pos < len(s); n++ {
		end := strings.IndexByte(s[pos:], '\n')
		if end < 0 {
			break
		}
		if outdir.ParseLine(s[pos:pos+end], &l) == nil {
			for _, r := range l.Rows {
				v.latest[r.Key] = n // the latest row of a key wins
			}
		}
		pos += end + 1
	}
	for n, pos := 1, 0; pos < len(s); n++ {
		end := strings.IndexByte(s[pos:], '\n')
		if end < 0 { // a remainder without newline: a torn end (outdir.TornEnd)
			v.add(LedgerFile, n, "torn last line (no newline)")
			break
		}
		line := s[pos : pos+end]
		pos += end + 1
		if err := outdir.ParseLine(line, &l); err != nil {
			switch {
			case errors.Is(err, outdir.ErrShardPath):
				v.add(LedgerFile, n, "%v: the line is not followed; `hermes-pipe repair` drops it", err)
			case outdir.TornEnd(pos == len(s), err):
				v.add(LedgerFile, n, "torn last line (unparsable: %v)", err)
			default:
				v.add(LedgerFile, n, "unparsable: %v", err)
			}
			continue
		}
		v.entry(n, &l)
	}
	for _, isLive := range v.live {
		if isLive {
			v.rep.LiveKeys++
		}
	}
	return nil
}

// entry checks one ledger line against its shard.
func (v *verifier) entry(n int, l *ledgerLine) {
	seen := map[string]bool{}
	for i := range l.Rows {
		r := &l.Rows[i]
		if seen[r.Key] {
			v.add(LedgerFile, n, "key %s appears twice in one entry", r.Key)
		}
		seen[r.Key] = true
		v.live[r.Key] = l.Record(r) // outdir's live-row rule; the latest row wins
		if r.Marker() {
			if !outdir.IsMarker(r.Outcome) && !r.Outcome.Retryable() {
				v.add(LedgerFile, n, "marker row for %s has outcome %q", r.Key, r.Outcome)
			}
			if r.Outcome == outdir.Pruned || r.Outcome.Retryable() {
				delete(v.final, r.Key) // its earlier final record was retired; it may run again
			}
		}
	}
	if l.Shard == "" {
		for _, r := range l.Rows {
			if !r.Marker() {
				v.add(LedgerFile, n, "row %s has a length but the entry names no shard", r.Key)
			}
		}
		return
	}
	if prev, dup := v.shardLine[l.Shard]; dup {
		v.add(LedgerFile, n, "shard %s was already committed by line %d", l.Shard, prev)
		return
	}
	v.shardLine[l.Shard] = n
	sub, _, _ := strings.Cut(l.Shard, "/") // DataDir or FailedDir: ParseLine checked the path
	v.rep.Shards++
	data, err := readShard(v.dir, l.Shard)
	if errors.Is(err, os.ErrNotExist) && !v.holdsLatest(n, l) {
		v.rep.Shards--
		return // retired: every row was superseded, nothing live is lost
	}
	if err != nil {
		v.add(l.Shard, 0, "committed by ledger line %d but unreadable: %v", n, err)
		return
	}
	if int64(len(data)) != l.Bytes {
		v.add(l.Shard, 0, "size %d bytes, ledger line %d says %d", len(data), n, l.Bytes)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != l.SHA256 {
		v.add(l.Shard, 0, "SHA-256 differs from ledger line %d: the content changed", n)
	}
	rows := l.Rows
	for i := len(rows) - 1; i >= 0 && rows[i].Marker(); i-- {
		rows = rows[:i]
	}
	if strings.HasSuffix(l.Shard, parquetExt) {
		v.verifyParquet(n, l.Shard, sub, data, rows)
		return
	}
	lineNo := 0
	for len(data) > 0 {
		lineNo++
		end := bytes.IndexByte(data, '\n')
		var line []byte
		if end < 0 {
			v.add(l.Shard, lineNo, "torn last line (no newline)")
			line, data = data, nil
		} else {
			line, data = data[:end], data[end+1:]
		}
		v.rep.Records++
		if lineNo > len(rows) {
			v.add(l.Shard, lineNo, "line not listed in ledger line %d", n)
			v.record(l.Shard, sub, lineNo, line, nil)
			continue
		}
		r := rows[lineNo-1]
		if r.Marker() {
			v.add(LedgerFile, n, "marker row %s among record rows", r.Key)
		} else if r.Len != int64(len(line))+1 && end >= 0 {
			v.add(l.Shard, lineNo, "line is %d bytes, ledger line %d says %d", len(line)+1, n, r.Len)
		}
		v.record(l.Shard, sub, lineNo, line, &r)
	}
	if lineNo < len(rows) {
		v.add(l.Shard, 0, "has %d lines, ledger line %d lists %d records", lineNo, n, len(rows))
	}
}

// holdsLatest reports whether ledger line n holds the latest row of any of
// its keys as a record (what its shard must still hold).
func (v *verifier) holdsLatest(n int, l *ledgerLine) bool {
	for i := range l.Rows {
		r := &l.Rows[i]
		// A marker row (filtered, lost, ...) is no record: its line may be
		// the latest for its key while the shard, merged away, is gone.
		if v.latest[r.Key] == n && l.Record(r) {
			return true
		}
	}
	return false
}

// verifyRecord has pointers so absent fields can be told from zero ones
// (schemas.RecordCheck; its own name is the one encoding/json's errors give).
type verifyRecord schemas.RecordCheck

// finalRecord is where a key's final record is and a 64-bit hash of its
// line (maphash: verify hashes every line, so a fast one).
type finalRecord struct {
	at  Problem
	sum uint64
}

var validRoles = map[string]bool{"system": true, "human": true, "gpt": true, "tool": true}

// record checks one shard line; row is its ledger row, nil when it has none.
func (v *verifier) record(shard, sub string, lineNo int, line []byte, row *ledgerRow) {
	var rec verifyRecord
	if err := json.Unmarshal(line, &rec); err != nil {
		v.add(shard, lineNo, "not a JSON object: %v", err)
		return
	}
	if row != nil {
		oc := row.Outcome
		if oc.Retryable() != (sub == FailedDir) {
			v.add(shard, lineNo, "outcome %s does not belong in %s/", oc, sub)
		}
		if !oc.Retryable() && !v.retry[oc] {
			here := finalRecord{at: Problem{File: shard, Line: lineNo}, sum: maphash.Bytes(hashSeed, line)}
			first, dup := v.final[row.Key]
			switch {
			case !dup:
				v.final[row.Key] = here
			case first.sum == here.sum:
				// The same bytes again: a merge moved the record into a
				// bigger shard (compact.go) and the crash came before the
				// small shard was removed. The ledger points at the copy.
				v.final[row.Key] = here
			default:
				v.add(shard, lineNo, "duplicate live key %s: also final at %s:%d", row.Key, first.at.File, first.at.Line)
			}
		}
	}
	if rec.Key == nil {
		// A verbatim record (Raw) need not carry the runtime's fields; the
		// shard checksum vouches for it.
		return
	}
	switch {
	case *rec.Key == "":
		v.add(shard, lineNo, "empty key")
	case row != nil && *rec.Key != row.Key:
		v.add(shard, lineNo, "key %s, ledger says %s", *rec.Key, row.Key)
	}
	switch {
	case rec.Outcome == nil || *rec.Outcome == "":
		v.add(shard, lineNo, "missing outcome")
	case !v.known[*rec.Outcome]:
		v.add(shard, lineNo, "unknown outcome %q", *rec.Outcome)
	case row != nil && *rec.Outcome != row.Outcome:
		v.add(shard, lineNo, "outcome %s, ledger says %s", *rec.Outcome, row.Outcome)
	}
	switch {
	case rec.PromptIndex == nil || rec.Sample == nil:
		v.add(shard, lineNo, "missing prompt_index or sample")
	case row != nil && (*rec.PromptIndex != row.PromptIndex || *rec.Sample != row.Sample):
		v.add(shard, lineNo, "position (%d, %d), ledger says (%d, %d)", *rec.PromptIndex, *rec.Sample, row.PromptIndex, row.Sample)
	}
	if len(rec.Conversations) == 0 {
		v.add(shard, lineNo, "missing conversations")
		return
	}
	var turns []map[string]any
	if err := json.Unmarshal(rec.Conversations, &turns); err != nil {
		v.add(shard, lineNo, "conversations: %v", err)
		return
	}
	for i, t := range turns {
		from, _ := t[schemas.TurnFrom].(string)
		if !validRoles[from] {
			v.add(shard, lineNo, "conversations[%d]: invalid role %q", i, t[schemas.TurnFrom])
		}
		if _, ok := t[schemas.TurnValue].(string); !ok {
			v.add(shard, lineNo, "conversations[%d]: value is not a string", i)
		}
	}
}

// files reports files the ledger does not account for.
func (v *verifier) files() {
	entries, err := os.ReadDir(v.dir)
	if err != nil {
		v.add(".", 0, "unreadable: %v", err)
		return
	}
	allowed := map[string]bool{ManifestFile: true, LedgerFile: true, RejectsFile: true, StatisticsFile: true, outdir.SpendFile: true, outdir.GradesFile: true}
	for _, a := range v.artifacts {
		allowed[a] = true
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, tempPrefix):
			v.add(name, 0, "stray temp file")
		case (name == DataDir || name == FailedDir) && e.IsDir():
			v.shardDir(name)
		case name == outdir.WorkspacesDir && e.IsDir():
			// generate --keep-workspace's archives, held to their records
			// by the readers that restore them (stages/workspace).
		case !allowed[name] || e.IsDir():
			v.add(name, 0, "unexpected file in the output folder")
		}
	}
}

func (v *verifier) shardDir(sub string) {
	entries, err := os.ReadDir(filepath.Join(v.dir, sub))
	if err != nil {
		v.add(sub, 0, "unreadable: %v", err)
		return
	}
	for _, e := range entries {
		rel := sub + "/" + e.Name()
		switch {
		case strings.HasPrefix(e.Name(), tempPrefix):
			v.add(rel, 0, "stray temp file")
		case v.shardLine[rel] > 0:
		default:
			if _, ok := shardNumber(e.Name()); ok {
				v.add(rel, 0, "shard is not in the ledger")
			} else {
				v.add(rel, 0, "unexpected file in %s/", sub)
			}
		}
	}
}
