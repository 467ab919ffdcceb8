package pipeline

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/atomicfile"
	"github.com/hermes-pipe/hermes-pipe/pipeline/cost"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// File and folder names inside an output folder (see package outdir, which
// owns the format).
const (
	ManifestFile   = outdir.ManifestFile
	LedgerFile     = outdir.LedgerFile
	RejectsFile    = outdir.RejectsFile
	StatisticsFile = outdir.StatisticsFile
	DataDir        = outdir.DataDir
	FailedDir      = outdir.FailedDir
	tempPrefix     = atomicfile.TempPrefix
)

// Mode says how OpenOutput treats an existing output folder.
type Mode int

const (
	// ModeFresh (the zero value) requires the folder to be missing or empty.
	ModeFresh Mode = iota
	// ModeResume continues the run recorded in the folder (or starts one in an
	// empty folder): keys whose latest outcome is final are skipped.
	ModeResume
	// ModeOverwrite deletes the previous run's files and starts afresh. It
	// refuses a non-empty folder that has no run.json.
	ModeOverwrite
)

// OutputOptions configure OpenOutput. The zero value of every field means its
// default.
type OutputOptions struct {
	Mode        Mode
	Kind        string // run kind recorded in run.json ("generate", "compress", …); resume refuses another kind
	Format      string // shard format; "" = jsonl; resume refuses another format
	ToolVersion string // recorded in run.json
	// Retries, when set, gives the run's retried model requests by cause at
	// its end, added to run.json's (RunConfig.Retries).
	Retries func() outdir.Retries
	// Options is the caller's run options, recorded in run.json as JSON.
	Options any
	// Outcomes lists outcomes beyond the schemas constants that this kind of
	// run produces; they are final, recorded in run.json and accepted by Verify.
	Outcomes []schemas.Outcome
	// Retry lists final outcomes of this mode that --resume runs again (the
	// mode's outdir.OutcomeSet.Retryable beyond the runtime's); their
	// records stay in data/ until the retry replaces them. Recorded in
	// run.json.
	Retry []schemas.Outcome
	// OutcomeField is the dotted path of the record member holding the
	// mode's own outcome, for Stats (see outdir.Manifest.OutcomeField).
	OutcomeField string
	// OutcomeDefault is the mode's outcome of a record without OutcomeField.
	OutcomeDefault schemas.Outcome
	// UsageField and CostField are the dotted paths of the record members
	// holding the mode's own usage and cost, for Stats (see
	// outdir.Manifest.UsageField).
	UsageField, CostField string
	// CallsField is the dotted path of the record member holding how many
	// model calls the mode made, for Stats (see outdir.Manifest.CallsField).
	CallsField string
	// InputCheck makes Run compare the input with the ledger on resume
	// (changed rows, keys no longer in the input).
	InputCheck InputCheck
	// Artifacts names files the mode writes into the output folder itself
	// (a mode's own files: its reports, metrics, ...); they are recorded in
	// run.json and Verify accepts them.
	Artifacts []string

	// VerifyShards makes opening check the SHA-256 of every shard that holds
	// live records, not only its size (which is always checked). It reads
	// every such shard once.
	VerifyShards bool

	// KeepShards leaves every committed shard as it is at the end of a run:
	// no merge of the small data/ shards (compact.go). An object-storage
	// run sets it, its shards being uploaded as they commit.
	KeepShards bool

	MaxShardRows   int           // commit a shard at this many records; default 1000
	MaxShardBytes  int64         // … or this many encoded bytes; default 64 MiB
	CommitInterval time.Duration // … or when its oldest record is this old; default 2s

	Logger *slog.Logger     // repairs done on open are logged here; default discards
	Now    func() time.Time // clock for run.json times; default time.Now
}

func (o *OutputOptions) fill() error {
	if o.MaxShardRows < 0 || o.MaxShardBytes < 0 || o.CommitInterval < 0 {
		return errors.New("output options: shard limits must not be negative")
	}
	if o.MaxShardRows == 0 {
		o.MaxShardRows = 1000
	}
	if o.MaxShardBytes == 0 {
		o.MaxShardBytes = 64 << 20
	}
	if o.CommitInterval == 0 {
		o.CommitInterval = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Manifest is the content of run.json (see outdir.Manifest).
type Manifest = outdir.Manifest

// Output is an open output folder. OpenOutput opens it, Run writes to it, and
// the caller closes it. One Output serves one Run; its methods are safe for
// concurrent use.
type Output struct {
	dir    string
	opts   OutputOptions
	format shardFormat
	lock   *os.File
	ledger *os.File
	man    Manifest
	known  map[schemas.Outcome]bool
	retry  map[schemas.Outcome]bool // final outcomes --resume runs again
	inputs *inputCheck              // nil unless OutputOptions.InputCheck.Enabled

	mu        sync.RWMutex // guards ix
	ix        *ledgerIndex
	nextShard int
	lineBuf   []byte

	rejMu   sync.Mutex
	rejects []schemas.Reject

	budget *cost.Budget // the run's cap, told of each commit; nil = none
	spend  *spendLog    // the spend journal the budget writes
	// spentOpen is what the folder's runs had spent when it was opened
	// (the spend journal, at least the ledger's cost_usd); spendIDs the
	// named calls they charged.
	spentOpen float64
	// capped is the highest cap a run of the folder reached
	// (outdir.Spend.Capped): a run capped at no more starts at its cap.
	capped   float64
	spendIDs map[string]bool

	adopted   int // orphan shards adopted on open
	lost      int // live records found lost on open, to be redone
	committed int // records and markers committed since open
	// runStats sums the statistics of the records this run commits when
	// the folder held no live record at open (countRun), so that finish
	// need not read them back (committedStats); nil otherwise, or once a
	// line could not be read. Only the committer uses it.
	runStats *statsAcc
	countRun bool
	// manWritten is what writeManifest last wrote to run.json.
	manWritten []byte
	used       bool
	closed     bool

	// prewritten counts the records commits found written ahead (the
	// committer's; for tests).
	prewritten int
	// commitHook, when set, is called at each step of the commit protocol;
	// an error aborts the commit there. Tests inject faults and snapshot the
	// folder with it.
	commitHook func(step string) error
}

// Commit protocol steps passed to commitHook.
const (
	stepTempCreated  = "temp-created"
	stepTempWritten  = "temp-written"
	stepTempSynced   = "temp-synced"
	stepRenamed      = "renamed"
	stepDirSynced    = "dir-synced"
	stepLedgerWrote  = "ledger-written"
	stepLedgerSynced = "ledger-synced"
)

// OpenOutput opens or creates the output folder dir as opts.Mode says, takes
// an exclusive lock on it and repairs what a crash may have left: leftover
// temp files are removed, a torn last ledger line is truncated, and a shard
// committed but missing from the ledger is validated and journalled (or
// removed when invalid, so its keys are redone). It reads the whole ledger:
// about half a second and 100 MB per million keys.
func OpenOutput(dir string, opts OutputOptions) (*Output, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	format, err := formatByName(opts.Format)
	if err != nil {
		return nil, err
	}
	opts.Format = format.name
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create output folder: %w", err)
	}
	o := &Output{dir: dir, opts: opts, format: format}
	if o.lock, err = lockDir(dir); err != nil {
		return nil, err
	}
	if err := o.open(); err != nil {
		o.Close()
		return nil, err
	}
	return o, nil
}

func (o *Output) open() error {
	entries, err := os.ReadDir(o.dir)
	if err != nil {
		return fmt.Errorf("read output folder: %w", err)
	}
	man, hasMan, err := readManifest(o.dir)
	if err != nil {
		return err
	}
	// A run killed while it wrote its first run.json (before anything
	// else, below) left only that file's temp: --resume finds the folder
	// as the killed run did, empty (repair removes the temp).
	empty := len(entries) == 0 || (!hasMan && o.opts.Mode == ModeResume && onlyManifestTemps(entries))
	if hasMan, err = o.admit(empty, man, hasMan); err != nil {
		return err
	}
	if err := o.setManifest(man, hasMan); err != nil {
		return err
	}
	if !hasMan {
		// run.json first: a folder killed while it is being set up is then
		// still a run that --resume accepts, not a foreign non-empty folder.
		if err := o.writeManifest(); err != nil {
			return err
		}
	}
	if err := o.repair(); err != nil {
		return err
	}
	if o.opts.InputCheck.Enabled {
		o.inputs = newInputCheck(o.opts.InputCheck, o.ix)
	}
	spend, sp, err := openSpend(o.dir)
	if err != nil {
		return err
	}
	o.spend, o.spendIDs = spend, sp.IDs
	o.spentOpen = max(sp.USD, o.ix.cost)
	o.capped = sp.Capped
	// Whether any record is live: a resumed folder answers at its first entry.
	if !slices.ContainsFunc(o.ix.entries, func(e ledgerEntry) bool { return e.record() }) {
		o.runStats, o.countRun = newStatsAcc(true), true
	}
	if err := o.writeManifest(); err != nil {
		return err
	}
	return atomicfile.SyncDir(o.dir)
}

// onlyManifestTemps reports whether every entry is a temp file of run.json.
func onlyManifestTemps(entries []os.DirEntry) bool {
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), tempPrefix+ManifestFile+"-") {
			return false
		}
	}
	return true
}

// admit applies the open mode to the folder as found (empty or not, with
// or without the run.json man): it refuses a folder the mode may not use
// and, for ModeOverwrite, deletes the previous run. It returns whether the
// folder's run.json is kept (false once an overwrite removed it).
func (o *Output) admit(empty bool, man Manifest, hasMan bool) (bool, error) {
	switch o.opts.Mode {
	case ModeFresh:
		if !empty {
			return hasMan, refusedf("output folder %s is not empty: pass --resume to continue the run in it or --overwrite to replace it", o.dir)
		}
	case ModeOverwrite:
		if !empty && !hasMan {
			return hasMan, refusedf("output folder %s is not empty and has no %s: refusing to overwrite a folder hermes-pipe did not create", o.dir, ManifestFile)
		}
		if err := o.removeRun(); err != nil {
			return hasMan, err
		}
		hasMan = false
	case ModeResume:
		if !empty && !hasMan {
			return hasMan, refusedf("output folder %s is not empty and has no %s: it is not a run to resume", o.dir, ManifestFile)
		}
		if hasMan {
			if man.Format != o.opts.Format {
				return hasMan, refusedf("output folder %s was written as %s, not %s: resume with the same format", o.dir, man.Format, o.opts.Format)
			}
			if man.Kind != "" && o.opts.Kind != "" && man.Kind != o.opts.Kind {
				return hasMan, refusedf("output folder %s holds a %s run, not %s", o.dir, man.Kind, o.opts.Kind)
			}
		}
	default:
		return hasMan, fmt.Errorf("output options: unknown mode %d", o.opts.Mode)
	}
	return hasMan, nil
}

// setManifest makes o.man this run's run.json: man (a new one unless
// hasMan) with the options' kind, format, version, options, outcomes,
// fields and artifacts merged in, and sets the outcome tables from it.
func (o *Output) setManifest(man Manifest, hasMan bool) error {
	now := o.opts.Now().UTC()
	if !hasMan {
		man = Manifest{CreatedAt: now}
	}
	man.Kind = cmp.Or(o.opts.Kind, man.Kind)
	man.Format = o.opts.Format
	man.ToolVersion = o.opts.ToolVersion
	if o.opts.Options != nil {
		var err error
		if man.Options, err = json.Marshal(o.opts.Options); err != nil {
			return fmt.Errorf("encode run options: %w", err)
		}
	}
	man.Outcomes = appendNew(man.Outcomes, o.opts.Outcomes)
	man.Retry = appendNew(man.Retry, o.opts.Retry)
	if o.opts.OutcomeField != "" {
		man.OutcomeField, man.OutcomeDefault = o.opts.OutcomeField, o.opts.OutcomeDefault
	}
	if o.opts.CostField != "" {
		man.UsageField, man.CostField = o.opts.UsageField, o.opts.CostField
	}
	if o.opts.CallsField != "" {
		man.CallsField = o.opts.CallsField
	}
	man.Artifacts = appendNew(man.Artifacts, o.opts.Artifacts)
	man.UpdatedAt = now
	o.man = man
	o.known = knownOutcomes(man.Outcomes)
	o.retry = map[schemas.Outcome]bool{}
	for _, oc := range o.opts.Retry {
		o.retry[oc] = true
	}
	return nil
}

// appendNew appends to list each of add it does not hold yet, in order.
func appendNew[T comparable](list, add []T) []T {
	for _, v := range add {
		if !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	return list
}

// repair makes the folder's layout whole and loads its ledger: it creates
// data/ and failed/, refuses symbolic links, removes leftover temp files,
// truncates a torn ledger line, adopts orphan shards and checks the shards
// that hold live records.
func (o *Output) repair() error {
	for _, sub := range []string{DataDir, FailedDir} {
		if err := os.MkdirAll(filepath.Join(o.dir, sub), 0o755); err != nil {
			return fmt.Errorf("create %s folder: %w", sub, err)
		}
	}
	if err := o.noLinks(); err != nil {
		return err
	}
	for _, sub := range []string{".", DataDir, FailedDir} {
		if err := o.removeTemps(filepath.Join(o.dir, sub)); err != nil {
			return err
		}
	}
	if err := o.loadLedger(); err != nil {
		return err
	}
	if err := o.adoptOrphans(); err != nil {
		return err
	}
	return o.checkShards()
}

// noLinks refuses a folder whose ledger, data/ or failed/ is a symbolic
// link: the runtime never makes one, and writing through it would write
// outside the folder (a folder may come from someone else).
func (o *Output) noLinks() error {
	for _, name := range []string{LedgerFile, DataDir, FailedDir, outdir.WorkspacesDir} {
		fi, err := os.Lstat(filepath.Join(o.dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("open output folder %s: %w", o.dir, err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return refusedf("output folder %s: %s is a symbolic link; hermes-pipe never makes one and does not write through it (replace it with the real file or folder)", o.dir, name)
		}
	}
	return nil
}

// removeRun deletes the files of a previous run, data first and run.json
// last, so an interrupted overwrite can simply be repeated.
func (o *Output) removeRun() error {
	for _, name := range []string{DataDir, FailedDir, outdir.WorkspacesDir, LedgerFile, RejectsFile, StatisticsFile, outdir.SpendFile, outdir.GradesFile, ManifestFile} {
		if err := os.RemoveAll(filepath.Join(o.dir, name)); err != nil {
			return fmt.Errorf("overwrite %s: %w", o.dir, err)
		}
	}
	return o.removeTemps(o.dir)
}

func (o *Output) removeTemps(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			p := filepath.Join(dir, e.Name())
			if err := os.Remove(p); err != nil {
				return fmt.Errorf("remove leftover temp file: %w", err)
			}
			o.opts.Logger.Info("removed leftover temp file", "path", p)
		}
	}
	return nil
}

func (o *Output) loadLedger() error {
	path := filepath.Join(o.dir, LedgerFile)
	ld, err := loadLedger(path)
	if err != nil {
		return fmt.Errorf("open output folder %s: %w", o.dir, err)
	}
	if ld.torn {
		if err := os.Truncate(path, ld.good); err != nil {
			return fmt.Errorf("truncate torn ledger line: %w", err)
		}
		o.opts.Logger.Info("truncated torn last ledger line", "line", ld.tornLine, "bytes", ld.size-ld.good)
	}
	o.ix = ld.ix
	o.ledger, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open ledger: %w", err)
	}
	if ld.torn {
		if err := o.ledger.Sync(); err != nil {
			return fmt.Errorf("sync ledger: %w", err)
		}
	}
	o.nextShard = o.ix.maxShard + 1
	return nil
}

// adoptOrphans journals shards that were renamed into place but whose ledger
// line was never written. Commits are serialised, so an orphan is newer than
// every ledger line and adopting it keeps "latest wins" correct.
func (o *Output) adoptOrphans() error {
	type orphan struct {
		rel string
		num int
	}
	var orphans []orphan
	for _, sub := range []string{DataDir, FailedDir} {
		entries, err := os.ReadDir(filepath.Join(o.dir, sub))
		if err != nil {
			return fmt.Errorf("read %s folder: %w", sub, err)
		}
		for _, e := range entries {
			num, ok := shardNumber(e.Name())
			if !ok || !strings.HasSuffix(e.Name(), o.format.ext) {
				continue
			}
			if num >= o.nextShard {
				o.nextShard = num + 1
			}
			rel := sub + "/" + e.Name()
			if _, known := o.ix.shardByNm[rel]; !known {
				orphans = append(orphans, orphan{rel, num})
			}
		}
	}
	slices.SortFunc(orphans, func(a, b orphan) int { return cmp.Compare(a.num, b.num) })
	for _, or := range orphans {
		line, err := o.scanOrphan(or.rel)
		msg := "removed a shard missing from the ledger that cannot be adopted; its records will be redone"
		if err == nil {
			if err = o.strayCopy(line); err != nil {
				msg = "removed a shard missing from the ledger whose records are already in the output folder"
			}
		}
		if err != nil {
			o.opts.Logger.Warn(msg, "shard", or.rel, "reason", err)
			if err := outdir.RemoveShard(o.dir, or.rel); err != nil {
				return fmt.Errorf("remove unadoptable shard: %w", err)
			}
			continue
		}
		if err := o.appendLedger(line); err != nil {
			return fmt.Errorf("adopt shard %s: %w", or.rel, err)
		}
		o.ix.apply(line)
		o.adopted++
		o.opts.Logger.Info("adopted a shard missing from the ledger", "shard", or.rel, "records", len(line.Rows))
	}
	return nil
}

// checkShards compares every shard that holds live records with its ledger
// line: the file must exist with the recorded size and, with VerifyShards,
// the recorded SHA-256. A shard that fails loses its records: the file is
// removed, then one ledger line of lost markers (schemas.OutcomeLost,
// retryable) supersedes its live keys, so the run redoes them and Cat never
// reads the damaged file. Both steps repeat safely after a crash between
// them. It is logged as a warning. It costs one stat per live shard, plus
// reading each with VerifyShards.
func (o *Output) checkShards() error {
	live := make([]int, len(o.ix.shards)) // live records per shard
	for _, e := range o.ix.entries {
		if e.record() {
			live[e.shard]++
		}
	}
	for sid, n := range live {
		if n == 0 {
			continue
		}
		rel := o.ix.shards[sid]
		why, err := o.shardDamage(rel, o.ix.shardSize[sid], o.ix.shardSHA[sid])
		if err != nil {
			return err
		}
		if why == "" {
			continue
		}
		o.opts.Logger.Warn("a shard of the output folder is damaged; its records will be redone", "shard", rel, "problem", why, "records", n)
		if err := outdir.RemoveShard(o.dir, rel); err != nil {
			return fmt.Errorf("remove damaged shard %s: %w", rel, err)
		}
		line := &ledgerLine{Rows: make([]ledgerRow, 0, n)}
		for _, e := range o.ix.entries {
			if e.record() && int(e.shard) == sid {
				line.Rows = append(line.Rows, ledgerRow{Key: e.key, Outcome: schemas.OutcomeLost, PromptIndex: e.pi, Sample: int64(e.sample), Len: -1})
			}
		}
		if err := o.appendLedger(line); err != nil {
			return fmt.Errorf("mark the records of damaged shard %s lost: %w", rel, err)
		}
		o.ix.apply(line)
		o.lost += len(line.Rows)
	}
	return nil
}

// shardDamage says what is wrong with the shard rel against its ledger
// record, "" when nothing is. The error is for a shard that cannot be read
// for another reason than being absent.
func (o *Output) shardDamage(rel string, size int64, sum string) (string, error) {
	fi, err := outdir.LstatShard(o.dir, rel)
	if errors.Is(err, os.ErrNotExist) {
		return "missing", nil
	}
	if errors.Is(err, outdir.ErrShardLink) {
		return "a symbolic link (not followed)", nil
	}
	if err != nil {
		return "", fmt.Errorf("check shard %s: %w", rel, err)
	}
	if fi.Size() != size {
		return fmt.Sprintf("%d bytes, the ledger says %d", fi.Size(), size), nil
	}
	if !o.opts.VerifyShards {
		return "", nil
	}
	got, err := shardSHA256(o.dir, rel)
	if err != nil {
		return "", fmt.Errorf("check shard %s: %w", rel, err)
	}
	if got != sum {
		return "SHA-256 differs from the ledger's: the content changed", nil
	}
	return "", nil
}

// strayCopy returns an error when a row of the orphan line l names a key
// that is already done: Run never commits a done key again, so such a shard
// is not a commit whose ledger line was lost but a copy (or a stray file);
// adopting it would make two live records of one key.
func (o *Output) strayCopy(l *ledgerLine) error {
	for _, r := range l.Rows {
		if o.Done(r.Key) {
			return fmt.Errorf("key %s is already done in the ledger: the shard is a copy", r.Key)
		}
	}
	return nil
}

// scanOrphan validates a shard file and builds its ledger line from its
// content. Every line must be a record with a key and an outcome that belongs
// in the shard's folder.
func (o *Output) scanOrphan(rel string) (*ledgerLine, error) { return scanShard(o.dir, o.format, rel) }

// scanShard builds the ledger line of the shard dir/rel from its content
// (see scanOrphan); Repair uses it for every shard.
func scanShard(dir string, format shardFormat, rel string) (*ledgerLine, error) {
	if format.name == FormatParquet {
		return scanParquetOrphan(dir, rel)
	}
	data, err := readShard(dir, rel)
	if err != nil {
		return nil, err
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		return nil, errors.New("torn last line")
	}
	sum := sha256.Sum256(data)
	l := &ledgerLine{Shard: rel, Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	failed := strings.HasPrefix(rel, FailedDir+"/")
	for n := 1; len(data) > 0; n++ {
		i := bytes.IndexByte(data, '\n')
		var h recordHead
		if err := json.Unmarshal(data[:i], &h); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if h.Key == "" || h.Outcome == "" {
			return nil, fmt.Errorf("line %d: no key or outcome", n)
		}
		if h.Outcome.Retryable() != failed {
			return nil, fmt.Errorf("line %d: outcome %s does not belong in %s", n, h.Outcome, rel)
		}
		l.Rows = append(l.Rows, ledgerRow{Key: h.Key, Outcome: h.Outcome, PromptIndex: h.PromptIndex, Sample: h.Sample, Len: int64(i + 1)})
		if h.CostUSD != nil {
			l.CostUSD += *h.CostUSD
		}
		data = data[i+1:]
	}
	return l, nil
}

// recordHead is the part of an output line the runtime reads back
// (schemas.RecordHead; its own name is the one encoding/json's errors give).
type recordHead schemas.RecordHead

// Done reports whether key's latest ledger outcome is final and not one the
// mode retries (OutputOptions.Retry), so the unit must not run again. Run
// calls it for every source record; it costs one map lookup under a read
// lock.
func (o *Output) Done(key string) bool {
	o.mu.RLock()
	oc, ok := o.ix.lookup(key)
	o.mu.RUnlock()
	return o.isDone(oc, ok)
}

// located is where a key stands in the ledger (Output.locate).
type located struct {
	known   bool
	i       uint32      // its entry's index
	entry   ledgerEntry // the entry as it was when located
	outcome schemas.Outcome
}

// locate finds key's latest ledger entry, under the read lock.
func (o *Output) locate(key string) located { return o.locateFrom(&o.ix.next, key) }

// locateFrom is locate with the lookup hint next (ledgerIndex.findFrom).
func (o *Output) locateFrom(next *atomic.Uint32, key string) located {
	o.mu.RLock()
	defer o.mu.RUnlock()
	i, ok := o.ix.findFrom(next, key)
	if !ok {
		return located{}
	}
	e := o.ix.entries[i]
	return located{known: true, i: i, entry: e, outcome: o.ix.outcomes[e.outcome]}
}

func (o *Output) isDone(oc schemas.Outcome, ok bool) bool {
	return ok && !oc.Retryable() && !o.retry[oc] && oc != outdir.Pruned
}

// doneReader returns Done for one reader going through the keys in input
// order (DoneSkipper): it keeps its own place in the ledger, so two readers
// at once do not undo each other's sequential lookups.
func (o *Output) doneReader() func(key string) bool {
	next := new(atomic.Uint32)
	return func(key string) bool {
		at := o.locateFrom(next, key)
		return o.isDone(at.outcome, at.known)
	}
}

// Settled reports whether key's latest ledger outcome is final, whether or
// not the mode retries it: its record is committed in data/ (or it was
// filtered). Modes that rebuild side files from their own journals use it.
func (o *Output) Settled(key string) bool {
	o.mu.RLock()
	oc, ok := o.ix.lookup(key)
	o.mu.RUnlock()
	return ok && !oc.Retryable()
}

// Spent returns what the runs of the folder had spent when it was opened,
// in US dollars: what the spend journal (outdir.SpendFile) says, every
// call that returned whether or not its row was committed, attempts that
// --resume later redid included; never less than the sum of the ledger
// lines' cost_usd (a folder from before the journal counts that). A crash
// loses at most the calls in flight, and a machine crash the last second
// of calls.
func (o *Output) Spent() float64 {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return max(o.spentOpen, o.ix.cost)
}

// Keys returns how many distinct keys the ledger holds.
func (o *Output) Keys() int {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.ix.len()
}

// Dir returns the output folder path.
func (o *Output) Dir() string { return o.dir }

// Manifest returns the run.json content as it stands.
func (o *Output) Manifest() Manifest { return o.man }

// AddReject records one bad input row. Sources call it, possibly from several
// goroutines; the rows of the current run are written to rejects.jsonl when
// the run ends.
func (o *Output) AddReject(r schemas.Reject) {
	o.rejMu.Lock()
	o.rejects = append(o.rejects, r)
	o.rejMu.Unlock()
}

func (o *Output) rejectCount() int {
	o.rejMu.Lock()
	defer o.rejMu.Unlock()
	return len(o.rejects)
}

// Close releases the folder lock and open files. It is safe to call twice.
func (o *Output) Close() error {
	if o.closed {
		return nil
	}
	o.closed = true
	var errs []error
	if o.ledger != nil {
		errs = append(errs, o.ledger.Close())
	}
	errs = append(errs, o.spend.end(), o.spend.close())
	if o.lock != nil {
		errs = append(errs, unlockDir(o.lock))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close output folder: %w", err)
	}
	return nil
}

// callHook calls hook (nil: nothing) at step of a commit or merge; its
// error, naming the step, aborts the protocol there.
func callHook(hook func(step string) error, step string) error {
	if hook == nil {
		return nil
	}
	if err := hook(step); err != nil {
		return fmt.Errorf("%s: %w", step, err)
	}
	return nil
}

// appendLedger appends one line to the ledger and fsyncs it, calling
// o.commitHook at its steps.
func (o *Output) appendLedger(l *ledgerLine) error { return o.appendLedgerHook(l, o.commitHook) }

// appendLedgerHook is appendLedger calling hook at its steps.
func (o *Output) appendLedgerHook(l *ledgerLine, hook func(step string) error) error {
	o.lineBuf = outdir.AppendLine(o.lineBuf[:0], l)
	if _, err := o.ledger.Write(o.lineBuf); err != nil {
		return fmt.Errorf("write ledger: %w", err)
	}
	if err := callHook(hook, stepLedgerWrote); err != nil {
		return err
	}
	if err := o.ledger.Sync(); err != nil {
		return fmt.Errorf("sync ledger: %w", err)
	}
	return callHook(hook, stepLedgerSynced)
}

// pending is one record waiting in a batch.
type pending struct {
	key     string
	outcome schemas.Outcome
	pi      int64
	sample  int64
	rec     *schemas.Record
	line    []byte    // nil for a marker
	n       int64     // bytes the record occupies in its shard, set by writeShard
	stat    *statLine // what statistics read of line (Output.statLine); nil when not read
}

// batch collects the records of the next shard of one folder.
type batch struct {
	sub   string // DataDir or FailedDir
	rows  []pending
	bytes int64
	first time.Time

	// Written ahead of the commit (prewrite.go): pre, in catOrder, into
	// file; preOff once prewriting stopped for this batch.
	pre    []pending
	file   *tempShard
	preOff bool
}

// len is how many rows b holds, written ahead or not.
func (b *batch) len() int { return len(b.rows) + len(b.pre) }

// subDir is the path of one of the folder's shard folders.
func (o *Output) subDir(sub string) string { return filepath.Join(o.dir, sub) }

// commit writes b as one shard with the atomic-file protocol, journals it
// with one fsynced ledger line and updates the index. Only the writer
// committer goroutine calls it, so commits are serialised.
func (o *Output) commit(b *batch) error {
	if b.len() == 0 {
		return nil
	}
	pre, written := b.takePrewritten() // sorts b.rows
	defer func() {
		if pre != nil {
			pre.abort()
		}
	}()
	// The batch's statistics are summed beside its write and fsyncs, in
	// commit order still (commits are serialised and this one waits for
	// them); a commit that fails drops the run's sums, and finish reads
	// the statistics back from the folder instead.
	counted := make(chan struct{})
	go func() {
		defer close(counted)
		o.countCommitted(b.rows)
	}()
	committed := false
	defer func() {
		<-counted
		if !committed {
			o.runStats = nil
		}
	}()
	line := &ledgerLine{Rows: make([]ledgerRow, 0, len(b.rows))}
	records := 0
	for i := range b.rows {
		r := &b.rows[i]
		if r.line != nil {
			records++
			if r.rec.CostUSD != nil {
				line.CostUSD += *r.rec.CostUSD
			}
		}
	}
	if records > 0 {
		name := shardName(o.nextShard, o.format.ext)
		o.nextShard++
		line.Shard = b.sub + "/" + name
		var err error
		if pre != nil {
			f := pre
			pre = nil // commit removes its file on error
			line.Bytes, line.SHA256, err = f.commit(b.rows[written:], name, o.commitHook)
			o.prewritten += written
		} else {
			line.Bytes, line.SHA256, err = writeShard(o.format, o.subDir(b.sub), name, b.rows, o.commitHook)
		}
		if err != nil {
			return fmt.Errorf("commit shard %s: %w", line.Shard, err)
		}
	}
	// Marker rows go last so the offsets of the records stay a prefix sum.
	for i := range b.rows {
		r := &b.rows[i]
		if r.line != nil {
			line.Rows = append(line.Rows, ledgerRow{Key: r.key, Outcome: r.outcome, PromptIndex: r.pi, Sample: r.sample, Len: r.n})
		}
	}
	for i := range b.rows {
		r := &b.rows[i]
		if r.line == nil {
			line.Rows = append(line.Rows, ledgerRow{Key: r.key, Outcome: r.outcome, PromptIndex: r.pi, Sample: r.sample, Len: -1})
		}
	}
	// The calls of the rows are durable before their commit is.
	if err := o.spend.sync(); err != nil {
		return fmt.Errorf("commit shard %s: %w", line.Shard, err)
	}
	if err := o.appendLedger(line); err != nil {
		return fmt.Errorf("commit shard %s: %w", line.Shard, err)
	}
	o.mu.Lock()
	o.ix.apply(line)
	o.committed += len(line.Rows)
	o.mu.Unlock()
	committed = true
	if o.budget != nil {
		keys := make([]string, len(line.Rows))
		for i, r := range line.Rows {
			keys[i] = r.Key
		}
		o.budget.Settle(keys)
	}
	return nil
}

// writeShard writes rows to dir/name in format through a temp file in dir:
// write, fsync, close, rename, fsync the folder, calling hook (nil: none)
// after each step. It removes the temp file on error and returns the
// shard's size and SHA-256; it sets each row's n. Commits and merges
// (compact.go) write their shards through it; a commit whose first rows
// were written ahead (prewrite.go) commits its tempShard with the rest.
func writeShard(format shardFormat, dir, name string, rows []pending, hook func(step string) error) (int64, string, error) {
	sf, err := createShard(format, dir)
	if err != nil {
		return 0, "", err
	}
	return sf.commit(rows, name, hook)
}

// tempShard is a shard being written: its temp file in the shard's folder,
// the format's writer over it and the hash of what was written.
type tempShard struct {
	dir string
	f   *os.File
	h   *asyncHash
	cw  *countWriter
	sw  ShardWriter
}

// createShard creates the temp file of a new shard in dir.
func createShard(format shardFormat, dir string) (*tempShard, error) {
	f, err := os.CreateTemp(dir, tempPrefix+"shard-*")
	if err != nil {
		return nil, fmt.Errorf("create temp file: %w", err)
	}
	sf := &tempShard{dir: dir, f: f, h: newAsyncHash()}
	sf.cw = &countWriter{w: io.MultiWriter(f, sf.h)}
	sf.sw = format.newWriter(sf.cw)
	return sf, nil
}

// write appends the records of rows (markers have none) and sets each
// row's n.
func (sf *tempShard) write(rows []pending) error {
	for i := range rows {
		if rows[i].line == nil {
			continue
		}
		n, err := sf.sw.WriteRecord(rows[i].rec, rows[i].line)
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
		rows[i].n = n
	}
	return nil
}

// commit appends rows, closes the writer, fsyncs and closes the file,
// renames it to name and fsyncs the folder, calling hook after each step
// (the first, stepTempCreated, before rows are appended); it returns the
// shard's size and SHA-256. On error the temp file is removed.
func (sf *tempShard) commit(rows []pending, name string, hook func(step string) error) (int64, string, error) {
	ok := false
	defer func() {
		if !ok {
			sf.abort()
		}
	}()
	if err := callHook(hook, stepTempCreated); err != nil {
		return 0, "", err
	}
	if err := sf.write(rows); err != nil {
		return 0, "", err
	}
	if err := sf.sw.Close(); err != nil {
		return 0, "", fmt.Errorf("write: %w", err)
	}
	if err := callHook(hook, stepTempWritten); err != nil {
		return 0, "", err
	}
	if err := sf.f.Sync(); err != nil {
		return 0, "", fmt.Errorf("sync: %w", err)
	}
	if err := sf.f.Close(); err != nil {
		return 0, "", fmt.Errorf("close: %w", err)
	}
	if err := callHook(hook, stepTempSynced); err != nil {
		return 0, "", err
	}
	if err := os.Rename(sf.f.Name(), filepath.Join(sf.dir, name)); err != nil {
		return 0, "", fmt.Errorf("rename: %w", err)
	}
	ok = true
	sum := hex.EncodeToString(sf.h.sum())
	if err := callHook(hook, stepRenamed); err != nil {
		return 0, "", err
	}
	if err := atomicfile.SyncDir(sf.dir); err != nil {
		return 0, "", err
	}
	if err := callHook(hook, stepDirSynced); err != nil {
		return 0, "", err
	}
	return sf.cw.n, sum, nil
}

// abort closes and removes the temp file.
func (sf *tempShard) abort() {
	sf.h.stop()
	_ = sf.f.Close()
	_ = os.Remove(sf.f.Name())
}

// asyncHash is the SHA-256 of what is written to it, computed on a
// goroutine of its own from copies of the writes: a shard's hash runs beside
// its write and its fsync instead of before them, which shortens every
// commit, the last one of a run included, which the run waits for
// (BenchmarkWriteShard: 15.9-17.6 ms for 13 MB; 19.8-20.4 copied into
// ef871e3^, which hashed in line). At most
// asyncHashDepth copies are queued, so it holds a bounded amount of memory.
type asyncHash struct {
	ch   chan []byte
	done chan struct{}
	h    hash.Hash
	out  []byte
}

const asyncHashDepth = 8

// asyncHashBufs recycles the copies (each at most the size of one write,
// the shard writers' buffer).
var asyncHashBufs sync.Pool

func newAsyncHash() *asyncHash {
	a := &asyncHash{ch: make(chan []byte, asyncHashDepth), done: make(chan struct{}), h: sha256.New()}
	go func() {
		defer close(a.done)
		for b := range a.ch {
			a.h.Write(b)
			asyncHashBufs.Put(&b)
		}
	}()
	return a
}

func (a *asyncHash) Write(p []byte) (int, error) {
	var b []byte
	if v, ok := asyncHashBufs.Get().(*[]byte); ok {
		b = *v
	}
	a.ch <- append(b[:0], p...)
	return len(p), nil
}

// sum waits for the queued writes and returns the hash; stop after it does
// nothing.
func (a *asyncHash) sum() []byte {
	a.stop()
	return a.out
}

// stop ends the goroutine (at most once); writes after it panic.
func (a *asyncHash) stop() {
	if a.out != nil {
		return
	}
	close(a.ch)
	<-a.done
	a.out = a.h.Sum(nil)
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func readManifest(dir string) (Manifest, bool, error) { return outdir.ReadManifest(dir) }

// manifestUpdate returns run.json's bytes for o.man, or nil when they are
// the bytes last written.
func (o *Output) manifestUpdate() ([]byte, error) {
	data, err := outdir.EncodeManifest(&o.man)
	if err != nil || bytes.Equal(data, o.manWritten) {
		return nil, err
	}
	return data, nil
}

// writeManifest writes run.json, unless it would write the bytes it last
// wrote (and synced): a fresh folder's run.json is written before the
// folder is set up and again after, most often the same.
func (o *Output) writeManifest() error {
	data, err := o.manifestUpdate()
	if err != nil || data == nil {
		return err
	}
	if err := atomicfile.Write(o.dir, outdir.ManifestFile, data); err != nil {
		return err
	}
	o.manWritten = data
	return nil
}

// knownOutcomes returns the outcomes a record may carry: the runtime's and
// extra (see outdir.Known).
func knownOutcomes(extra []schemas.Outcome) map[schemas.Outcome]bool { return outdir.Known(extra) }

// rejectsFile is rejects.jsonl with the rejects of this run, sorted by file
// and line.
func (o *Output) rejectsFile() ([]byte, error) {
	o.rejMu.Lock()
	rej := slices.Clone(o.rejects)
	o.rejMu.Unlock()
	slices.SortStableFunc(rej, func(a, b schemas.Reject) int {
		return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
	})
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for _, r := range rej {
		if err := enc.Encode(r); err != nil {
			return nil, fmt.Errorf("encode reject: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// addRetries adds the run's retried requests (OutputOptions.Retries) to
// run.json's, and says whether there were any.
func (o *Output) addRetries() bool {
	if o.opts.Retries == nil {
		return false
	}
	r := o.opts.Retries()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.man.Retries == nil {
		o.man.Retries = &outdir.Retries{}
	}
	o.man.Retries.Add(r)
	return r.Total() > 0
}

// liveRecords is the number of live records in the index.
func (o *Output) liveRecords() int {
	n := 0
	for i := range o.ix.entries {
		if o.ix.entries[i].record() {
			n++
		}
	}
	return n
}

// statLine is what runStats counts of rec, whose line EncodeRecord made,
// taken while it is made (in the worker, so the committer only adds it up):
// nil when the run does not count its commits, or when the line cannot be
// read, which stops the counting (countCommitted). It is readStatLine's of
// line, read from rec itself when that is the same (statFromRecord), which
// spares decoding the line again (7 % of generate's CPU in a perf profile
// of scripts/bench-generate.sh's runtime variant).
func (o *Output) statLine(rec *schemas.Record, line []byte) *statLine {
	if !o.countRun {
		return nil
	}
	if l := statFromRecord(&o.man, rec); l != nil {
		return l
	}
	l, err := readStatLine(&o.man, line, rec.Outcome, true)
	if err != nil {
		return nil
	}
	return l
}

// countCommitted adds the records of a committed batch to runStats.
func (o *Output) countCommitted(rows []pending) {
	if o.runStats == nil {
		return
	}
	for i := range rows {
		r := &rows[i]
		if r.line == nil {
			continue
		}
		if r.stat == nil {
			o.runStats = nil
			return
		}
		o.runStats.count(r.stat, r.pi, r.sample, r.key)
	}
}

// committedStats returns the statistics of the folder's live records from
// runStats, without reading a shard, when they are exactly the records this
// run committed: the folder had none at open, every record committed is
// still live (none superseded) and no grade overlays them. ok is false
// when not; the caller then reads them back (statsFromIndex). The caller
// holds o.mu.
func (o *Output) committedStats() (st Statistics, ok bool, err error) {
	if o.runStats == nil || o.runStats.st.Records != o.liveRecords() {
		return st, false, nil
	}
	grades, err := loadGrades(o.dir)
	if err != nil || len(grades) > 0 {
		return st, false, err
	}
	acc := o.runStats
	o.runStats = nil
	return acc.finish(&o.man), true, nil
}

// finish writes what a run leaves besides shards: rejects.jsonl,
// statistics.json (recomputed from the live records when anything was
// committed or the file is missing) and run.json, the three at once
// (atomicfile.WriteAll: about two fsyncs in all, not two each), run.json
// renamed last since it names the run's end.
func (o *Output) finish() error {
	rejects, err := o.rejectsFile()
	if err != nil {
		return fmt.Errorf("finish run: %w", err)
	}
	files := []atomicfile.File{{Name: RejectsFile, Data: rejects}}
	var statsErr error
	retried := o.addRetries()
	_, statErr := os.Stat(filepath.Join(o.dir, StatisticsFile))
	if o.committed > 0 || o.adopted > 0 || o.lost > 0 || retried || statErr != nil {
		o.mu.RLock()
		st, ok, err := o.committedStats()
		if err == nil && !ok {
			st, err = statsFromIndex(o.dir, o.ix, &o.man, false) // opening checked the shards' sizes
		}
		o.mu.RUnlock()
		var data []byte
		if err == nil {
			data, err = json.MarshalIndent(st, "", "  ")
		}
		if err == nil {
			files = append(files, atomicfile.File{Name: StatisticsFile, Data: append(data, '\n')})
		}
		statsErr = err // the other files are written still
	}
	o.man.UpdatedAt = o.opts.Now().UTC()
	man, err := o.manifestUpdate()
	if err != nil {
		return fmt.Errorf("finish run: %w", errors.Join(statsErr, err))
	}
	if man != nil {
		files = append(files, atomicfile.File{Name: outdir.ManifestFile, Data: man})
	}
	if err := atomicfile.WriteAll(o.dir, files...); err != nil {
		return fmt.Errorf("finish run: %w", errors.Join(statsErr, err))
	}
	if man != nil {
		o.manWritten = man
	}
	if statsErr != nil {
		return fmt.Errorf("finish run: %w", statsErr)
	}
	return nil
}
