package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/pipeline/atomicfile"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// Merging the small shards of data/ at the end of a run.
//
// A run commits a shard at MaxShardRows or MaxShardBytes, and also every
// CommitInterval (the bound on the work a crash loses), so a slow run leaves
// many small shards. At the end of a run (fresh or resumed) Run merges the
// data/ shards that hold fewer live records than the limits into shards of up
// to MaxShardRows rows and MaxShardBytes bytes, in cat's order, with the same
// protocol as a commit:
//
//  1. each merged shard is written through writeShard (temp, fsync, rename,
//     fsync data/), its line bytes copied from the old shards (same bytes;
//     a Parquet row is rebuilt from its raw_json line, as a commit builds
//     it), each old shard held to its ledger size and SHA-256 first;
//  2. one ledger line per merged shard re-points its records there (the
//     latest row of a key wins), fsynced; it carries no cost_usd, since the
//     lines that committed the records counted their cost;
//  3. then the old shards, which hold no live record any more, are removed
//     (with any other data/ shard whose rows were all superseded).
//
// A crash before 2 leaves a merged shard no ledger line names: opening the
// folder removes it, as every key in it is already done (adoptOrphans'
// strayCopy), and cat never reads it. A crash after 2 leaves old shards
// whose records are superseded by byte-identical copies: readers follow the
// ledger to the copies, verify accepts the same bytes of a key twice, and the
// next run's merge removes them. Only records whose outcome is final and not
// run again (Output.Done) are merged, which is what makes an orphan merged
// shard removable; failed/ is never merged (its records are retried by
// --resume, and an orphan there would be adopted, counting its cost twice).
//
// An object-storage run (OutputOptions.KeepShards) does not merge: its
// shards are uploaded as they commit and its readers fetch every shard a
// ledger line names, so the old shards must stay.

// stepMergeRemoved is the merge's step after each old shard is removed
// (the hook of mergeShards also sees writeShard's and the ledger's steps).
const stepMergeRemoved = "merge-removed"

// mergeStats is what mergeShards did.
type mergeStats struct {
	Sources int // small shards merged (and removed)
	Written int // merged shards written
	Records int // records moved
	Dead    int // data/ shards without live records removed
}

// mergePlan is what mergeShards moves: the live records of the small
// shards, in cat's order, the shards they leave and the data/ shards whose
// rows were all superseded.
type mergePlan struct {
	refs    []ledgerEntry
	sources []uint32
	dead    []string
}

// planMerge chooses what to merge from the index; the caller holds o.mu.
func (o *Output) planMerge() mergePlan {
	ix := o.ix
	n := len(ix.shards)
	rows, size := make([]int, n), make([]int64, n)
	kept := make([]bool, n) // holds a record that --resume may run again
	for _, e := range ix.entries {
		if !e.record() {
			continue
		}
		rows[e.shard]++
		size[e.shard] += int64(e.n)
		if oc := ix.outcomes[e.outcome]; oc.Retryable() || o.retry[oc] {
			kept[e.shard] = true
		}
	}
	jsonl := o.format.name == FormatJSONL // a Parquet row's length is 1, not its bytes
	var p mergePlan
	var total int
	var totalSize int64
	in := make([]bool, n)
	for sid := 1; sid < n; sid++ {
		rel := ix.shards[sid]
		if !strings.HasPrefix(rel, DataDir+"/") || !strings.HasSuffix(rel, o.format.ext) {
			continue
		}
		switch {
		case rows[sid] == 0:
			p.dead = append(p.dead, rel)
		case kept[sid] || rows[sid] >= o.opts.MaxShardRows || jsonl && size[sid] >= o.opts.MaxShardBytes:
		default:
			p.sources = append(p.sources, uint32(sid))
			in[sid] = true
			total += rows[sid]
			totalSize += size[sid]
		}
	}
	want := ceilDiv(int64(total), int64(o.opts.MaxShardRows))
	if jsonl {
		want = max(want, ceilDiv(totalSize, o.opts.MaxShardBytes))
	}
	if int64(len(p.sources)) <= want {
		p.sources = nil // merging would not make fewer shards
		return p
	}
	p.refs = make([]ledgerEntry, 0, total)
	for _, e := range ix.entries {
		if e.record() && in[e.shard] {
			p.refs = append(p.refs, e)
		}
	}
	slices.SortFunc(p.refs, func(a, b ledgerEntry) int {
		return catOrder(a.pi, int64(a.sample), a.key, b.pi, int64(b.sample), b.key)
	})
	return p
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// mergeShards merges the small shards of data/ (see the comment at the top
// of this file) and removes the data/ shards left without live records. It
// calls hook (nil: none) at each step, as the commit protocol calls
// commitHook: writeShard's steps, the ledger's, and stepMergeRemoved after
// each removal; an error from it stops the merge there, as a crash would. It
// runs after the last commit of a run, on the committer's side: nothing
// commits meanwhile. A shard that does not match its ledger line stops the
// merge before anything is written (an error: the folder is left as it was).
func (o *Output) mergeShards(hook func(step string) error) (mergeStats, error) {
	var st mergeStats
	if o.opts.KeepShards {
		return st, nil
	}
	o.mu.RLock()
	p := o.planMerge()
	o.mu.RUnlock()
	p.dead = slices.DeleteFunc(p.dead, func(rel string) bool {
		_, err := outdir.LstatShard(o.dir, rel)
		return errors.Is(err, os.ErrNotExist) // removed before
	})
	if len(p.sources) > 0 {
		if err := o.checkSources(p.sources); err != nil {
			return st, err
		}
		if err := o.moveRecords(p.refs, hook, &st); err != nil {
			return st, err
		}
	}
	var gone []string
	for _, sid := range p.sources {
		gone = append(gone, o.ix.shards[sid])
	}
	st.Sources, st.Dead = len(p.sources), len(p.dead)
	for _, rel := range append(gone, p.dead...) {
		if err := outdir.RemoveShard(o.dir, rel); err != nil {
			return st, fmt.Errorf("merge shards: remove %s: %w", rel, err)
		}
		if err := callHook(hook, stepMergeRemoved); err != nil {
			return st, fmt.Errorf("merge shards: %w", err)
		}
	}
	if len(gone)+len(p.dead) > 0 {
		if err := atomicfile.SyncDir(filepath.Join(o.dir, DataDir)); err != nil {
			return st, fmt.Errorf("merge shards: %w", err)
		}
	}
	return st, nil
}

// checkSources holds each shard to merge to its ledger line, size and
// SHA-256, so a merge never gives changed bytes a fresh checksum.
func (o *Output) checkSources(sources []uint32) error {
	for _, sid := range sources {
		rel := o.ix.shards[sid]
		if _, err := CheckShardSize(o.dir, rel, o.ix.shardSize[sid]); err != nil {
			return fmt.Errorf("merge shards: %w", err)
		}
		if err := CheckShardHash(o.dir, rel, o.ix.shardSHA[sid]); err != nil {
			return fmt.Errorf("merge shards: %w", err)
		}
	}
	return nil
}

// moveRecords copies the records refs (in their order) into new data/
// shards of up to MaxShardRows records and MaxShardBytes bytes, each
// committed by its own ledger line.
func (o *Output) moveRecords(refs []ledgerEntry, hook func(step string) error, st *mergeStats) error {
	lr := &liveReader{dir: o.dir, ix: o.ix, files: newFileCache(o.dir, 64), hashes: map[uint32]*shardHash{}}
	defer lr.close()
	var chunk []pending
	var size int64
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		if err := o.commitMerged(chunk, hook); err != nil {
			return fmt.Errorf("merge shards: %w", err)
		}
		st.Written++
		st.Records += len(chunk)
		chunk, size = chunk[:0], 0
		return nil
	}
	err := lr.each(refs, func(ref ledgerEntry, line []byte) error {
		oc := o.ix.outcomes[ref.outcome]
		rec := &schemas.Record{Key: ref.key, Outcome: oc, PromptIndex: int(ref.pi), Sample: int(ref.sample)}
		l := bytes.Clone(line[:len(line)-1]) // the reader's buffer is reused
		chunk = append(chunk, pending{key: ref.key, outcome: oc, pi: ref.pi, sample: int64(ref.sample), rec: rec, line: l})
		size += int64(len(l))
		if len(chunk) >= o.opts.MaxShardRows || size >= o.opts.MaxShardBytes {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// commitMerged writes rows as the next data/ shard and commits it with one
// ledger line (no cost_usd: see the top of this file).
func (o *Output) commitMerged(rows []pending, hook func(step string) error) error {
	name := shardName(o.nextShard, o.format.ext)
	o.nextShard++
	line := &ledgerLine{Shard: DataDir + "/" + name, Rows: make([]ledgerRow, 0, len(rows))}
	var err error
	line.Bytes, line.SHA256, err = writeShard(o.format, filepath.Join(o.dir, DataDir), name, rows, hook)
	if err != nil {
		return fmt.Errorf("write %s: %w", line.Shard, err)
	}
	for _, r := range rows {
		line.Rows = append(line.Rows, ledgerRow{Key: r.key, Outcome: r.outcome, PromptIndex: r.pi, Sample: r.sample, Len: r.n})
	}
	if err := o.appendLedgerHook(line, hook); err != nil {
		return fmt.Errorf("commit %s: %w", line.Shard, err)
	}
	o.mu.Lock()
	o.ix.apply(line)
	o.mu.Unlock()
	return nil
}

// mergeAtEnd merges the small shards once a run's last record is
// committed. A failure is logged, not returned: the folder is whole as it
// is (see mergeShards), and the next run merges again.
func (o *Output) mergeAtEnd() {
	st, err := o.mergeShards(nil)
	if err != nil {
		o.opts.Logger.Warn("the small shards of data/ were not merged (the folder is whole; the next --resume merges them)", "folder", o.dir, "error", err)
		return
	}
	if st.Written > 0 || st.Dead > 0 {
		o.opts.Logger.Info("merged small shards", "shards", st.Sources, "into", st.Written, "records", st.Records, "removed_superseded", st.Dead)
	}
}
