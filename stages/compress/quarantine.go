package compress

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
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
	j    *outdir.Journal
	mu   sync.Mutex
	keys map[string]bool // guarded by mu
}

// openQuarantine prepares dir/quarantine.jsonl for appending (see
// outdir.OpenJournal) and reads the keys it already holds.
func openQuarantine(dir string, fresh bool) (*quarantine, error) {
	j, err := outdir.OpenJournal(filepath.Join(dir, QuarantineFile), fresh)
	if err != nil {
		return nil, err
	}
	q := &quarantine{j: j, keys: map[string]bool{}}
	if fresh {
		return q, nil
	}
	err = outdir.ScanJournal(j.Path(), func(line []byte) error {
		var e struct {
			Key string `json:"key"`
		}
		if json.Unmarshal(line, &e) == nil {
			q.keys[e.Key] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return q, nil
}

// close fsyncs and closes the journal; it is safe to call twice.
func (q *quarantine) close() error { return q.j.Close() }

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
	if err := q.j.Append(line.Bytes(), true); err != nil {
		return fmt.Errorf("quarantine %s: %w: %w", key, err, pipeline.ErrFatal)
	}
	q.keys[key] = true
	return nil
}
