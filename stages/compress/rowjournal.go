package compress

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
)

// RowsFile journals the metrics of every row a compress run settled, so the
// aggregate compression_metrics.json can be rebuilt exactly at the end of
// each run, also after a run was killed with SIGKILL.
const RowsFile = "compression_rows.jsonl"

// rowJournal appends one line per settled row with a single write(2) (which
// survives the process being killed) and fsyncs on close. A torn last line
// is cut when the journal is opened again (see outdir.OpenJournal) and
// skipped when it is read.
type rowJournal struct{ j *outdir.Journal }

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
	j, err := outdir.OpenJournal(filepath.Join(dir, RowsFile), fresh)
	if err != nil {
		return nil, err
	}
	return &rowJournal{j}, nil
}

// close fsyncs and closes the journal; it is safe to call twice.
func (j *rowJournal) close() error { return j.j.Close() }

// add records one row. Called concurrently by workers.
func (j *rowJournal) add(key string, m *RowMetrics, disposal string) error {
	b, err := json.Marshal(rowEntry{Key: key, Disposal: disposal, Metrics: rowMetricsRaw(*m)})
	if err != nil {
		return fmt.Errorf("journal %s: %w", key, err)
	}
	if err := j.j.Append(append(b, '\n'), false); err != nil {
		return fmt.Errorf("journal %s: %w", key, err)
	}
	return nil
}

// rebuild sums the latest journal entry of every key that done reports
// committed (rows still in flight when a run died are left out: they will be
// settled again) into agg. Memory is one entry per key.
func rebuildAggregate(path string, done func(key string) bool, agg *Aggregate) error {
	latest := map[string]rowEntry{}
	var order []string
	err := outdir.ScanJournal(path, func(line []byte) error {
		var e rowEntry
		if json.Unmarshal(line, &e) != nil || e.Key == "" {
			return nil // not a row entry: left out
		}
		if _, seen := latest[e.Key]; !seen {
			order = append(order, e.Key)
		}
		latest[e.Key] = e
		return nil
	})
	if err != nil {
		return err
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
