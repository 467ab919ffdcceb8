package compress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

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
// never marks a row whose entry is not on disk. A torn last line (crash
// mid-write) is cut on open, and a key already present is not written again,
// so a row redone after a crash appears once.
type quarantine struct {
	mu   sync.Mutex
	path string
	f    *os.File
	keys map[string]bool
}

// openQuarantine opens dir/quarantine.jsonl for appending. With fresh it
// first removes a file left by a previous run (--overwrite). It is opened
// lazily on the first entry, so runs without quarantined rows leave no file.
func openQuarantine(dir string, fresh bool) (*quarantine, error) {
	q := &quarantine{path: filepath.Join(dir, QuarantineFile), keys: map[string]bool{}}
	if fresh {
		if err := os.Remove(q.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("remove old %s: %w", QuarantineFile, err)
		}
		return q, nil
	}
	data, err := os.ReadFile(q.path)
	if errors.Is(err, os.ErrNotExist) {
		return q, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", QuarantineFile, err)
	}
	good := 0
	for good < len(data) {
		i := bytes.IndexByte(data[good:], '\n')
		if i < 0 {
			break
		}
		var e struct {
			Key string `json:"key"`
		}
		if json.Unmarshal(data[good:good+i], &e) != nil {
			break
		}
		q.keys[e.Key] = true
		good += i + 1
	}
	if good < len(data) {
		if err := os.Truncate(q.path, int64(good)); err != nil {
			return nil, fmt.Errorf("cut torn end of %s: %w", QuarantineFile, err)
		}
	}
	return q, nil
}

// add appends one entry and fsyncs it. It is called by workers concurrently;
// a write failure is fatal to the run.
func (q *quarantine) add(key string, m *RowMetrics, record []byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.keys[key] {
		return nil
	}
	var line bytes.Buffer
	enc := json.NewEncoder(&line)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(QuarantineEntry{Key: key, Reason: m.Outcome, Tokens: m.CompressedTokens,
		TargetTokens: m.TargetTokens, Record: record}); err != nil {
		return fmt.Errorf("quarantine %s: %w: %w", key, err, pipeline.ErrFatal)
	}
	if q.f == nil {
		f, err := os.OpenFile(q.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("open %s: %w: %w", QuarantineFile, err, pipeline.ErrFatal)
		}
		q.f = f
		if err := pipeline.SyncDir(filepath.Dir(q.path)); err != nil {
			return fmt.Errorf("%w: %w", err, pipeline.ErrFatal)
		}
	}
	if _, err := q.f.Write(line.Bytes()); err != nil {
		return fmt.Errorf("write %s: %w: %w", QuarantineFile, err, pipeline.ErrFatal)
	}
	if err := q.f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w: %w", QuarantineFile, err, pipeline.ErrFatal)
	}
	q.keys[key] = true
	return nil
}

// close closes the file if it was opened.
func (q *quarantine) close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.f == nil {
		return nil
	}
	err := q.f.Close()
	q.f = nil
	if err != nil {
		return fmt.Errorf("close %s: %w", QuarantineFile, err)
	}
	return nil
}
