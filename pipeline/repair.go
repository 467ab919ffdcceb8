package pipeline

import (
	"cmp"
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

// ErrNoLedger is returned (wrapped) by Cat, Stats and merge when an output
// folder holds shard files but its ledger is missing or empty: reading it
// would print nothing and lie. Repair rebuilds the ledger.
var ErrNoLedger = errors.New("the ledger is missing or empty")

// noLedgerError returns an ErrNoLedger error naming the command that
// rebuilds the ledger when dir holds shard files, else nil. Callers invoke it
// only when the ledger has no entry, so a healthy folder pays nothing.
func noLedgerError(dir string) error {
	shards, err := shardFiles(dir)
	if err != nil || len(shards) == 0 {
		return err
	}
	return fmt.Errorf("%w but %s holds %d shard files: run `hermes-pipe repair %s` to rebuild it from the shards", ErrNoLedger, dir, len(shards), dir)
}

// shardFile is a shard file found on disk.
type shardFile struct {
	rel string // data/shard-00001.jsonl
	num int
}

// shardFiles lists the shard files of data/ and failed/ in shard-number
// order (the order they were committed in).
func shardFiles(dir string) ([]shardFile, error) {
	var out []shardFile
	for _, sub := range []string{DataDir, FailedDir} {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s folder: %w", sub, err)
		}
		for _, e := range entries {
			if num, ok := shardNumber(e.Name()); ok && !e.IsDir() && !strings.HasPrefix(e.Name(), tempPrefix) {
				out = append(out, shardFile{rel: sub + "/" + e.Name(), num: num})
			}
		}
	}
	slices.SortFunc(out, func(a, b shardFile) int { return cmp.Or(cmp.Compare(a.num, b.num), strings.Compare(a.rel, b.rel)) })
	return out, nil
}

// RepairReport is what Repair did.
type RepairReport struct {
	Shards  int       `json:"shards"`  // shards journalled in the rebuilt ledger
	Records int       `json:"records"` // their records
	Skipped []Problem `json:"skipped"` // shards left out: not valid shards of this folder
	// Dropped lists the ledger lines whose shard path was not a shard of the
	// folder (outdir.ErrShardPath): the path was dropped and the line's
	// records marked lost, so --resume redoes them.
	Dropped []Problem `json:"dropped,omitempty"`
}

// Repair rebuilds the ledger of the output folder dir from its shard files
// when the ledger is missing or holds no complete line: each valid shard
// becomes one ledger line, in shard-number order (the commit order, so the
// latest record of a key still wins). It writes the new ledger atomically
// and holds the folder's lock meanwhile. A shard that is not valid (torn, not
// JSON, an outcome in the wrong folder) is left out and listed in Skipped;
// nothing is deleted. Markers of filtered or fanned-out inputs had no shard
// and are not restored: --resume runs those inputs again. It refuses a folder
// whose ledger still has lines, unless some of them name a shard outside the
// folder (outdir.ErrShardPath): then it only rewrites those lines without
// their shard, their records marked lost (as opening a folder marks the
// records of a damaged shard), their cost kept, and lists them in Dropped;
// the path they named is never read or deleted. It reads every shard once.
func Repair(dir string) (RepairReport, error) {
	var rep RepairReport
	man, ok, err := readManifest(dir)
	if err != nil {
		return rep, fmt.Errorf("repair %s: %w", dir, err)
	}
	if !ok {
		return rep, fmt.Errorf("repair %s: not an output folder: no %s", dir, ManifestFile)
	}
	format, err := formatByName(man.Format)
	if err != nil {
		return rep, fmt.Errorf("repair %s: %s: %w", dir, ManifestFile, err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return rep, fmt.Errorf("repair %s: %w", dir, err)
	}
	defer unlockDir(lock)
	if rep.Dropped, err = dropShardPaths(dir); err != nil {
		return rep, fmt.Errorf("repair %s: %w", dir, err)
	}
	ld, err := loadLedger(filepath.Join(dir, LedgerFile))
	if err != nil {
		return rep, fmt.Errorf("repair %s: %w", dir, err)
	}
	if ld.good > 0 && len(rep.Dropped) > 0 {
		return rep, nil
	}
	if ld.good > 0 {
		return rep, fmt.Errorf("repair %s: its ledger holds %d keys; repair only rebuilds a missing or empty ledger (run verify to see what is wrong)", dir, ld.ix.len())
	}
	shards, err := shardFiles(dir)
	if err != nil {
		return rep, fmt.Errorf("repair %s: %w", dir, err)
	}
	var buf []byte
	for _, sf := range shards {
		if err := outdir.ValidShard(sf.rel); err != nil {
			rep.Skipped = append(rep.Skipped, Problem{File: sf.rel, Msg: err.Error()})
			continue
		}
		if !strings.HasSuffix(sf.rel, format.ext) {
			rep.Skipped = append(rep.Skipped, Problem{File: sf.rel, Msg: fmt.Sprintf("not a %s shard", format.name)})
			continue
		}
		line, err := scanShard(dir, format, sf.rel)
		if err != nil {
			rep.Skipped = append(rep.Skipped, Problem{File: sf.rel, Msg: err.Error()})
			continue
		}
		buf = outdir.AppendLine(buf, line)
		rep.Shards++
		rep.Records += len(line.Rows)
	}
	if err := atomicfile.Write(dir, LedgerFile, buf); err != nil {
		return rep, fmt.Errorf("repair %s: %w", dir, err)
	}
	return rep, nil
}

// dropShardPaths rewrites dir's ledger, atomically, with every complete line
// that names a shard outside the folder replaced by a line without a shard:
// its record rows become lost markers, its marker rows and cost_usd stay.
// Every other byte is kept as it is (a torn end too: opening the folder cuts
// it). It returns the lines it replaced, and writes nothing when there are
// none.
func dropShardPaths(dir string) ([]Problem, error) {
	data, ok, err := outdir.ReadLedger(filepath.Join(dir, LedgerFile))
	if err != nil || !ok {
		return nil, err
	}
	var (
		out     []byte
		dropped []Problem
		l       ledgerLine
	)
	for n, pos := 1, 0; pos < len(data); n++ {
		end := strings.IndexByte(data[pos:], '\n')
		if end < 0 {
			out = append(out, data[pos:]...)
			break
		}
		line := data[pos : pos+end]
		pos += end + 1
		perr := outdir.ParseLine(line, &l)
		if !errors.Is(perr, outdir.ErrShardPath) {
			out = append(out, line...)
			out = append(out, '\n')
			continue
		}
		fixed := ledgerLine{CostUSD: l.CostUSD, Rows: make([]ledgerRow, 0, len(l.Rows))}
		for _, r := range l.Rows {
			if !r.Marker() {
				r.Outcome, r.Len = schemas.OutcomeLost, -1
			}
			fixed.Rows = append(fixed.Rows, r)
		}
		out = outdir.AppendLine(out, &fixed)
		dropped = append(dropped, Problem{File: LedgerFile, Line: n, Msg: fmt.Sprintf("%v: dropped the path; the line's records are marked lost, --resume redoes them", perr)})
	}
	if len(dropped) == 0 {
		return nil, nil
	}
	if err := atomicfile.Write(dir, LedgerFile, out); err != nil {
		return nil, err
	}
	return dropped, nil
}
