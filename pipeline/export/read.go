package export

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/cluster"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
)

// checkShards holds every shard of s's folders to its latest ledger line
// as verify does: its size, then its SHA-256 (the whole file is read). The
// first damaged shard is an error naming it. A shard missing while none of
// its rows is a key's latest (its records superseded: moved by the merge of
// small shards, or redone) is retired, not damaged, as verify says.
func checkShards(s Source) error {
	for _, dir := range s.Dirs {
		data, ok, err := outdir.ReadLedger(filepath.Join(dir, outdir.LedgerFile))
		if err != nil {
			return fmt.Errorf("export %s: %w", dir, err)
		}
		if !ok {
			continue
		}
		type want struct {
			size int64
			sum  string
		}
		shards := map[string]want{}
		var order []string
		latest := map[string]string{} // key → shard of its latest row ("" for none)
		_, err = outdir.Scan(data, func(_ int, l *outdir.Line) error {
			for i := range l.Rows {
				shard := "" // the latest row of a key wins; outdir's live-row rule
				if l.Record(&l.Rows[i]) {
					shard = l.Shard
				}
				latest[l.Rows[i].Key] = shard
			}
			if l.Shard == "" {
				return nil
			}
			if _, seen := shards[l.Shard]; !seen {
				order = append(order, l.Shard)
			}
			shards[l.Shard] = want{l.Bytes, l.SHA256}
			return nil
		})
		if err != nil {
			return fmt.Errorf("export %s: %w", dir, err)
		}
		holds := map[string]bool{}
		for _, shard := range latest {
			holds[shard] = true
		}
		for _, name := range order {
			w := shards[name]
			if _, err := outdir.LstatShard(dir, name); errors.Is(err, os.ErrNotExist) && !holds[name] {
				continue // retired
			}
			if _, err := pipeline.CheckShardSize(dir, name, w.size); err != nil {
				return fmt.Errorf("export %s: %w", dir, err)
			}
			if err := pipeline.CheckShardHash(dir, name, w.sum); err != nil {
				return fmt.Errorf("export %s: %w", dir, err)
			}
		}
	}
	return nil
}

// eachLine calls fn with every live record line of s in cat's order (a
// sharded run's folders merged as cat merges them). line is valid only
// during the call.
func eachLine(s Source, fn func(line []byte) error) error {
	return cluster.EachAll(s.Dirs, pipeline.CatOptions{}, fn)
}
