package compress

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
)

// RowsFile journals the metrics of every row a compress run settled, so the
// aggregate compression_metrics.json can be rebuilt exactly at the end of
// each run, also after a run was killed with SIGKILL.
const RowsFile = "compression_rows.jsonl"

// rowJournal appends one line per settled row with a single write(2) (which
// survives the process being killed) and fsyncs on close. A torn last line
// is skipped on reading.
type rowJournal struct {
	mu   sync.Mutex
	f    *os.File
	path string
}

type rowEntry struct {
	Key      string        `json:"k"`
	Disposal string        `json:"d,omitempty"`
	Metrics  rowMetricsRaw `json:"m"`
}

// rowMetricsRaw is RowMetrics without its Hermes-format MarshalJSON, so the
// journal round-trips every field.
type rowMetricsRaw RowMetrics

// openRowJournal opens dir/RowsFile for appending; fresh truncates it.
func openRowJournal(dir string, fresh bool) (*rowJournal, error) {
	path := filepath.Join(dir, RowsFile)
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if fresh {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", RowsFile, err)
	}
	return &rowJournal{f: f, path: path}, nil
}

// add records one row. Called concurrently by workers.
func (j *rowJournal) add(key string, m *RowMetrics, disposal string) error {
	b, err := json.Marshal(rowEntry{Key: key, Disposal: disposal, Metrics: rowMetricsRaw(*m)})
	if err != nil {
		return fmt.Errorf("journal %s: %w", key, err)
	}
	b = append(b, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.f.Write(b); err != nil {
		return fmt.Errorf("journal %s: %w", key, err)
	}
	return nil
}

// close fsyncs and closes the journal; safe to call twice.
func (j *rowJournal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := errors.Join(j.f.Sync(), j.f.Close())
	j.f = nil
	if err == nil {
		err = pipeline.SyncDir(filepath.Dir(j.path))
	}
	return err
}

// rebuild sums the latest journal entry of every key that done reports
// committed (rows still in flight when a run died are left out: they will be
// settled again) into agg. Memory is one entry per key.
func rebuildAggregate(path string, done func(key string) bool, agg *Aggregate) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", RowsFile, err)
	}
	defer f.Close()
	latest := map[string]rowEntry{}
	var order []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var e rowEntry
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Key == "" {
			continue // a torn last line
		}
		if _, seen := latest[e.Key]; !seen {
			order = append(order, e.Key)
		}
		latest[e.Key] = e
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", RowsFile, err)
	}
	for _, k := range order {
		if !done(k) {
			continue
		}
		e := latest[k]
		m := RowMetrics(e.Metrics)
		agg.Add(&m, e.Disposal)
	}
	return nil
}
