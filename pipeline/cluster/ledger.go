package cluster

import (
	"cmp"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// unit is the latest ledger row of one key in a shard folder.
type unit struct {
	key     string
	pi      int64
	sample  int64
	outcome schemas.Outcome
	record  bool // false for a marker row (filtered, fanned out): no line of its own
}

// ledgerView is what a shard folder's ledger says, read without locking or
// repairing the folder.
type ledgerView struct {
	units []unit         // one per key, latest row wins, in (prompt_index, sample, key) order
	files map[string]int // committed shard file → rows it holds
}

// readLedger reads dir's ledger.jsonl through outdir.Scan, without locking
// or repairing the folder: a torn or unparsable last line (a crash
// mid-append) is left out, as the runtime does; an unparsable line before it
// is an error. Keys share the ledger file's memory; the view costs about 100
// bytes per key plus the file.
func readLedger(dir string) (*ledgerView, error) {
	data, _, err := outdir.ReadLedger(filepath.Join(dir, outdir.LedgerFile))
	if err != nil {
		return nil, err
	}
	v := &ledgerView{files: map[string]int{}}
	pos := map[string]int{}
	_, err = outdir.Scan(data, func(_ int, l *outdir.Line) error {
		if l.Shard != "" {
			v.files[l.Shard] = len(l.Rows)
		}
		for i := range l.Rows {
			r := &l.Rows[i]
			u := unit{key: r.Key, outcome: r.Outcome, pi: r.PromptIndex, sample: r.Sample, record: l.Record(r)}
			if i, ok := pos[u.key]; ok {
				v.units[i] = u // the latest row of a key wins
				continue
			}
			pos[u.key] = len(v.units)
			v.units = append(v.units, u)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(v.units, func(a, b unit) int {
		return cmp.Or(cmp.Compare(a.pi, b.pi), cmp.Compare(a.sample, b.sample), strings.Compare(a.key, b.key))
	})
	return v, nil
}
