package compress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
)

// QuarantineFile holds the rows --over-limit quarantine keeps out of the
// output, in the output folder.
const QuarantineFile = "quarantine.jsonl"

// QuarantineEntry is one line of quarantine.jsonl: the row as it would have
// been written (compression_metrics included) under its resume key.
type QuarantineEntry struct {
	Key          string          `json:"key"`
	Reason       string          `json:"reason"`
	Tokens       int             `json:"tokens"`
	TargetTokens int             `json:"target_tokens"`
	Record       json.RawMessage `json:"record"`
}

// quarantine is the append-only quarantine.jsonl journal. Each entry is
// written and fsynced before the stage reports the row done, so the ledger
// never marks a row whose entry is not on disk. A key already present is not
// written again, so a row redone after a crash appears once.
type quarantine struct {
	*journal
	keys map[string]bool // guarded by journal.mu
}

// openQuarantine prepares dir/quarantine.jsonl for appending (see
// openJournal) and reads the keys it already holds.
func openQuarantine(dir string, fresh bool) (*quarantine, error) {
	j, err := openJournal(filepath.Join(dir, QuarantineFile), fresh)
	if err != nil {
		return nil, err
	}
	q := &quarantine{journal: j, keys: map[string]bool{}}
	if fresh {
		return q, nil
	}
	data, err := os.ReadFile(j.path)
	if errors.Is(err, os.ErrNotExist) {
		return q, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", QuarantineFile, err)
	}
	for line := range bytes.Lines(data) {
		var e struct {
			Key string `json:"key"`
		}
		if json.Unmarshal(line, &e) == nil {
			q.keys[e.Key] = true
		}
	}
	return q, nil
}

// add appends one entry and fsyncs it. It is called by workers concurrently;
// a write failure is fatal to the run.
func (q *quarantine) add(key string, m *RowMetrics, record []byte) error {
	var line bytes.Buffer
	enc := json.NewEncoder(&line)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(QuarantineEntry{Key: key, Reason: m.Outcome, Tokens: m.CompressedTokens,
		TargetTokens: m.TargetTokens, Record: record}); err != nil {
		return fmt.Errorf("quarantine %s: %w: %w", key, err, pipeline.ErrFatal)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.keys[key] {
		return nil
	}
	if err := q.appendLine(line.Bytes(), true); err != nil {
		return fmt.Errorf("quarantine %s: %w: %w", key, err, pipeline.ErrFatal)
	}
	q.keys[key] = true
	return nil
}
