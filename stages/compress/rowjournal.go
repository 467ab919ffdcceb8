package compress

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// RowsFile journals the metrics of every row a compress run settled, so the
// aggregate compression_metrics.json can be rebuilt exactly at the end of
// each run, also after a run was killed with SIGKILL.
const RowsFile = "compression_rows.jsonl"

// rowJournal appends one line per settled row with a single write(2) (which
// survives the process being killed) and fsyncs on close. A torn last line
// is cut when the journal is opened again (see openJournal) and skipped when
// it is read.
type rowJournal struct{ *journal }

type rowEntry struct {
	Key      string        `json:"k"`
	Disposal string        `json:"d,omitempty"`
	Metrics  rowMetricsRaw `json:"m"`
}

// rowMetricsRaw is RowMetrics without its Hermes-format MarshalJSON, so the
// journal round-trips every field.
type rowMetricsRaw RowMetrics

// openRowJournal prepares dir/RowsFile for appending; fresh removes it.
func openRowJournal(dir string, fresh bool) (*rowJournal, error) {
	j, err := openJournal(filepath.Join(dir, RowsFile), fresh)
	if err != nil {
		return nil, err
	}
	return &rowJournal{j}, nil
}

// add records one row. Called concurrently by workers.
func (j *rowJournal) add(key string, m *RowMetrics, disposal string) error {
	b, err := json.Marshal(rowEntry{Key: key, Disposal: disposal, Metrics: rowMetricsRaw(*m)})
	if err != nil {
		return fmt.Errorf("journal %s: %w", key, err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.appendLine(append(b, '\n'), false); err != nil {
		return fmt.Errorf("journal %s: %w", key, err)
	}
	return nil
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
