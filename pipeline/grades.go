package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// gradeOverlay is what eachLive shows instead of a record's reward and
// grade: the latest line of the folder's grades journal (outdir.GradesFile,
// written by `regrade`) for the record's key, applied only to the record line
// it was computed from.
type gradeOverlay struct {
	sum    string
	reward []byte
	grade  []byte
}

// loadGrades reads dir's grades journal; nil when there is none.
func loadGrades(dir string) (map[string]gradeOverlay, error) {
	lines, err := outdir.ReadGrades(dir)
	if err != nil || len(lines) == 0 {
		return nil, err
	}
	out := make(map[string]gradeOverlay, len(lines))
	for k, g := range lines {
		o := gradeOverlay{sum: g.Record}
		if o.reward, err = encodeMember(g.Reward); err == nil {
			o.grade, err = encodeMember(g.Grade)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: key %s: %w", outdir.GradesFile, k, err)
		}
		out[k] = o
	}
	return out, nil
}

// encodeMember encodes v as the shard writer does (encodeRecord).
func encodeMember(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

// withGrades wraps fn so that a record with a line in grades is handed over
// with that line's reward and grade. Only records the journal names pay for
// it: one SHA-256 of the line and a copy.
func withGrades(grades map[string]gradeOverlay, fn func(ref ledgerEntry, line []byte) error) func(ref ledgerEntry, line []byte) error {
	if len(grades) == 0 {
		return fn
	}
	return func(ref ledgerEntry, line []byte) error {
		if g, ok := grades[ref.key]; ok && outdir.RecordSum(line) == g.sum {
			line = overlayGrade(line, g)
		}
		return fn(ref, line)
	}
}

// overlayGrade returns a copy of the record line (newline included) with
// its reward and grade members replaced, or added before the closing brace.
func overlayGrade(line []byte, g gradeOverlay) []byte {
	out := bytes.TrimRight(line, "\n")
	for _, m := range [...]struct {
		name string
		raw  []byte
	}{{schemas.MemberReward, g.reward}, {schemas.MemberGrade, g.grade}} {
		if set, err := schemas.SetMember(out, m.name, m.raw, false); err == nil {
			out = set
		}
	}
	return append(out, '\n')
}

// LockFolder takes the output folder's run lock (the one a run holds while
// it writes), so a command that appends to a folder's own journals
// (regrade's grades) and a run cannot write at once. It fails at once when
// a run holds it; call release when done.
func LockFolder(dir string) (release func() error, err error) {
	f, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	return func() error { return unlockDir(f) }, nil
}
