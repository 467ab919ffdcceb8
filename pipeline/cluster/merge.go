package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/atomicfile"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// MergedFile is the merged manifest Merge writes in OUT, next to the merged
// statistics (pipeline.StatisticsFile).
const MergedFile = "merged.json"

// MergeOptions configure Merge. The zero value checks the shards against the
// prompts file their run.json names, when it can be read.
type MergeOptions struct {
	// Prompts is the generate input to check the union of keys against; ""
	// takes the --prompts recorded in the shards' run.json.
	Prompts string
	// NoInput skips the input check even when run.json names a prompts file.
	NoInput bool
	// InputKeys lists the keys the generate source yields for a prompts file
	// (the caller passes stages/generate/prompts.EachKey; this package may not
	// import stages). nil skips the input check.
	InputKeys KeyLister
	// AllowRetryable accepts shards whose rows still carry a retryable
	// outcome (api_error, timeout, …) instead of asking for a re-run.
	AllowRetryable bool
	// Workers is how many shards are verified at once; default 2.
	Workers int
	// Now is the clock for merged.json; default time.Now.
	Now func() time.Time
	// Name is how messages name the run: the URL when out is a local cache
	// of object storage (s3://b/run?region=…); default out. Shards are
	// named under it, before any query string.
	Name string
}

// KeyLister calls fn with every key a prompts file yields for the given
// samples per row and line limit (bad lines are rejects, not keys). It blocks
// until the file is read and returns the first read error.
type KeyLister func(ctx context.Context, path string, samples, maxLine int, fn func(key string)) error

// Merged is the content of merged.json: which shard folders make up the run
// and what each holds. No record is copied: readers open the shard folders.
type Merged struct {
	Kind       string         `json:"kind"`
	Format     string         `json:"format"`
	ShardCount int            `json:"shard_count"`
	Hash       string         `json:"hash"`
	Records    int            `json:"records"` // live records in all shards
	Keys       int            `json:"keys"`    // keys with a final outcome (record or marker)
	OK         int            `json:"ok"`
	Failed     int            `json:"failed"`    // final records whose outcome is not OK
	Retryable  int            `json:"retryable"` // records still waiting for a retry
	Input      *InputCheck    `json:"input,omitempty"`
	Shards     []ShardSummary `json:"shards"`
	MergedAt   time.Time      `json:"merged_at"`
}

// InputCheck says which input the union of keys was checked against.
type InputCheck struct {
	Prompts string `json:"prompts"`
	Samples int    `json:"samples"`
	Keys    int    `json:"keys"`
}

// ShardSummary is one shard of merged.json.
type ShardSummary struct {
	Index     int       `json:"index"`
	Dir       string    `json:"dir"` // relative to OUT
	Records   int       `json:"records"`
	Keys      int       `json:"keys"`
	OK        int       `json:"ok"`
	Failed    int       `json:"failed"`
	Retryable int       `json:"retryable"`
	Runs      int       `json:"runs"`
	UpdatedAt time.Time `json:"updated_at"`
}

// HashName names the row-to-shard hash of Of in merged.json.
const HashName = "fnv1a64-splitmix64-mod-n"

// IncompleteError is returned by Merge when the shards do not add up to a
// whole run; Problems says why, one line each.
type IncompleteError struct {
	Out      string
	Problems []string
}

func (e *IncompleteError) Error() string {
	return fmt.Sprintf("merge %s: the shards are not a complete run (%d problems):\n  %s", e.Out, len(e.Problems), strings.Join(e.Problems, "\n  "))
}

// shardCheck is what Merge learned about one shard.
type shardCheck struct {
	spec     Spec
	sum      ShardSummary
	man      pipeline.Manifest
	stats    pipeline.Statistics
	digest   keyDigest
	problems []string
}

// keyDigest is an order-independent digest of a set of keys: their number and
// the lane-wise sum of their SHA-256 prefixes. Two sets with equal digests are
// equal with overwhelming probability; unequal ones are diffed exactly.
type keyDigest struct {
	n    int
	a, b uint64
}

func (d *keyDigest) add(key string) {
	h := sha256.Sum256([]byte(key))
	d.n++
	d.a += binary.LittleEndian.Uint64(h[0:8])
	d.b += binary.LittleEndian.Uint64(h[8:16])
}

// Merge checks that the shard folders under out form one complete run and
// records it: every index 0..N-1 has a folder that passes pipeline.Verify;
// every key sits in the shard that owns it (so no key is in two shards); no
// record waits for a retry (unless AllowRetryable); and, when a prompts file
// is known, the union of the shards' keys equals the input's keys. Then it
// writes out/merged.json and the merged out/statistics.json atomically and
// returns the manifest. Nothing is copied. On failure it returns an
// *IncompleteError listing every problem and removes a stale merged.json.
//
// It blocks while it reads every shard once (Verify) plus each ledger and the
// prompts file; memory is one shard's ledger view per worker.
func Merge(ctx context.Context, out string, opts MergeOptions) (*Merged, error) {
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	name := opts.Name
	if name == "" {
		name = out
	}
	specs, n, err := layout(out)
	if err != nil {
		return nil, fmt.Errorf("merge %s: %w", name, err)
	}
	var problems []string
	have := map[int]bool{}
	for _, s := range specs {
		have[s.Index] = true
	}
	for i := 0; i < n; i++ {
		if !have[i] {
			problems = append(problems, fmt.Sprintf("%s: missing (that index never ran): run it", Spec{Index: i, Count: n}.Name()))
		}
	}

	checks := make([]*shardCheck, len(specs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, opts.Workers)
	errs := make([]error, len(specs))
	for i, sp := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if ctx.Err() != nil {
				errs[i] = ctx.Err()
				return
			}
			checks[i], errs[i] = checkShard(out, childName(name, sp.Name()), sp, opts.AllowRetryable)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("merge %s: %w", name, err)
	}

	m := &Merged{ShardCount: n, Hash: HashName}
	for _, c := range checks {
		problems = append(problems, c.problems...)
		switch {
		case c.man.Kind == "":
			// No readable run.json: the shard's own problems say why.
		case m.Kind == "":
			m.Kind, m.Format = c.man.Kind, c.man.Format
		case c.man.Kind != m.Kind || c.man.Format != m.Format:
			problems = append(problems, fmt.Sprintf("%s: a %s run in %s, the others are %s in %s", c.spec.Name(), c.man.Kind, c.man.Format, m.Kind, m.Format))
		}
		m.Shards = append(m.Shards, c.sum)
		m.Records += c.sum.Records
		m.Keys += c.sum.Keys
		m.OK += c.sum.OK
		m.Failed += c.sum.Failed
		m.Retryable += c.sum.Retryable
	}

	if !opts.NoInput && opts.InputKeys != nil && len(checks) > 0 {
		in, inProblems, err := checkInput(ctx, out, checks, n, opts.Prompts, opts.InputKeys)
		if err != nil {
			return nil, fmt.Errorf("merge %s: %w", name, err)
		}
		m.Input = in
		problems = append(problems, inProblems...)
	}

	if len(problems) > 0 {
		if err := os.Remove(filepath.Join(out, MergedFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			problems = append(problems, fmt.Sprintf("remove stale %s: %v", MergedFile, err))
		}
		return nil, &IncompleteError{Out: name, Problems: problems}
	}
	m.MergedAt = opts.Now().UTC()
	stats := make([]pipeline.Statistics, len(checks))
	for i, c := range checks {
		stats[i] = c.stats
	}
	if err := writeJSON(out, pipeline.StatisticsFile, MergeStatistics(stats)); err != nil {
		return nil, fmt.Errorf("merge %s: %w", name, err)
	}
	if err := writeJSON(out, MergedFile, m); err != nil {
		return nil, fmt.Errorf("merge %s: %w", name, err)
	}
	return m, nil
}

// childName names the sub-folder child of the run named name: joined to
// the path, before the query string of a URL.
func childName(name, child string) string {
	if q := strings.IndexByte(name, '?'); q >= 0 && strings.Contains(name[:q], "://") {
		return strings.TrimRight(name[:q], "/") + "/" + child + name[q:]
	}
	if strings.Contains(name, "://") {
		return strings.TrimRight(name, "/") + "/" + child
	}
	return filepath.Join(name, child)
}

// shellWord quotes s for a command line when it holds characters a shell
// would interpret (a URL's '?' and '&').
func shellWord(s string) string {
	if strings.ContainsAny(s, "?&;*$ '\"\\|<>()") {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return s
}

// checkShard verifies one shard folder and summarises its ledger; shown is
// how messages name the shard.
func checkShard(out, shown string, sp Spec, allowRetry bool) (*shardCheck, error) {
	dir := sp.Dir(out)
	c := &shardCheck{spec: sp, sum: ShardSummary{Index: sp.Index, Dir: sp.Name()}}
	rep, err := pipeline.Verify(dir)
	if err != nil {
		return nil, err
	}
	if !rep.OK() {
		p := rep.Problems[0]
		c.problems = append(c.problems, fmt.Sprintf("%s: verify found %d problems, first %s (run `hermes-pipe verify %s`)", sp.Name(), len(rep.Problems), p, shellWord(shown)))
		return c, nil
	}
	man, ok, err := outdir.ReadManifest(dir)
	if err == nil && !ok {
		err = fmt.Errorf("no %s", outdir.ManifestFile)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sp.Name(), err)
	}
	c.man = man
	c.sum.Runs, c.sum.UpdatedAt = c.man.Runs, c.man.UpdatedAt
	lv, err := readLedger(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sp.Name(), err)
	}
	var foreign []string
	retry := map[schemas.Outcome]int{}
	for _, u := range lv.units {
		if !sp.Owns(u.key) {
			if len(foreign) < 3 {
				foreign = append(foreign, u.key)
			}
		}
		if !u.outcome.Retryable() {
			c.sum.Keys++
		}
		c.digest.add(u.key)
		switch {
		case u.outcome.Retryable():
			c.sum.Retryable++
			retry[u.outcome]++
		case !u.record:
			// a marker: the key is done without a record
		case u.outcome.OK():
			c.sum.OK++
		default:
			c.sum.Failed++
		}
		if u.record {
			c.sum.Records++
		}
	}
	if len(foreign) > 0 {
		c.problems = append(c.problems, fmt.Sprintf("%s: holds keys another shard owns (e.g. %s): it was written with another shard count or without sharding", sp.Name(), strings.Join(foreign, ", ")))
	}
	if len(retry) > 0 && !allowRetry {
		var parts []string
		for _, oc := range sortedOutcomes(retry) {
			parts = append(parts, fmt.Sprintf("%s ×%d", oc, retry[oc]))
		}
		c.problems = append(c.problems, fmt.Sprintf("%s: %d rows await a retry (%s): run index %d again with --resume", sp.Name(), c.sum.Retryable, strings.Join(parts, ", "), sp.Index))
	}
	c.stats, err = shardStats(dir, c.sum.Records)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sp.Name(), err)
	}
	return c, nil
}

func sortedOutcomes(m map[schemas.Outcome]int) []schemas.Outcome {
	keys := make([]schemas.Outcome, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// shardStats returns the statistics a run wrote at its end when they cover
// every live record, and recomputes them otherwise (a run killed after its
// last commit leaves the previous run's figures).
func shardStats(dir string, records int) (pipeline.Statistics, error) {
	var st pipeline.Statistics
	b, err := os.ReadFile(filepath.Join(dir, pipeline.StatisticsFile))
	if err == nil && json.Unmarshal(b, &st) == nil && st.Records == records {
		return st, nil
	}
	return pipeline.Stats(dir)
}

// checkInput compares each shard's keys with the input keys that hash to it.
func checkInput(ctx context.Context, out string, checks []*shardCheck, n int, path string, eachInputKey KeyLister) (*InputCheck, []string, error) {
	opts := recordedOptions(checks[0].man)
	if path == "" {
		p := recordedPrompts(checks[0].man)
		if p == "" {
			return nil, nil, nil // none, recorded on another machine, or not followed
		}
		path = p
	}
	if checks[0].man.Kind != "generate" {
		return nil, nil, fmt.Errorf("check input: only generate runs can be checked against a prompts file (this is a %s run)", checks[0].man.Kind)
	}
	samples := intOption(opts, "samples", 1)
	maxLine := intOption(opts, "max-line-bytes", 0)
	want := make([]keyDigest, n)
	err := eachInputKey(ctx, path, samples, maxLine, func(key string) {
		want[Of(key, n)].add(key)
	})
	if err != nil {
		return nil, nil, err
	}
	in := &InputCheck{Prompts: path, Samples: samples}
	for _, d := range want {
		in.Keys += d.n
	}
	var problems []string
	for _, c := range checks {
		if len(c.problems) > 0 {
			continue // already reported; its keys may be anything
		}
		if c.digest == want[c.spec.Index] {
			continue
		}
		missing, extra, err := diffShard(ctx, out, c.spec, path, samples, maxLine, eachInputKey)
		if err != nil {
			return nil, nil, err
		}
		problems = append(problems, fmt.Sprintf("%s: %d input keys missing%s, %d keys not in the input%s: run index %d again with --resume (a changed input needs --overwrite)",
			c.spec.Name(), len(missing), sample(missing), len(extra), sample(extra), c.spec.Index))
	}
	return in, problems, nil
}

func sample(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	if len(keys) > 3 {
		keys = keys[:3]
	}
	return " (e.g. " + strings.Join(keys, ", ") + ")"
}

// diffShard lists the input keys the shard lacks and the shard keys the input
// lacks, exactly. It runs only for a shard whose digest disagrees.
func diffShard(ctx context.Context, out string, sp Spec, path string, samples, maxLine int, eachInputKey KeyLister) (missing, extra []string, err error) {
	lv, err := readLedger(sp.Dir(out))
	if err != nil {
		return nil, nil, err
	}
	have := make(map[string]bool, len(lv.units))
	for _, u := range lv.units {
		have[u.key] = !u.outcome.Retryable()
	}
	seen := map[string]bool{}
	err = eachInputKey(ctx, path, samples, maxLine, func(key string) {
		if !sp.Owns(key) {
			return
		}
		seen[key] = true
		if !have[key] {
			missing = append(missing, key)
		}
	})
	if err != nil {
		return nil, nil, err
	}
	for _, u := range lv.units {
		if !seen[u.key] && !u.outcome.Retryable() {
			extra = append(extra, u.key)
		}
	}
	sort.Strings(extra)
	return missing, extra, nil
}

// recordedOptions decodes the flags a run recorded in run.json.
func recordedOptions(man pipeline.Manifest) map[string]any {
	m := map[string]any{}
	_ = json.Unmarshal(man.Options, &m)
	return m
}

// recordedPrompts returns the prompts file a generate run recorded in
// run.json (its --prompts as given) when it may be read here, else "". The
// path comes from the folder, which may come from someone else, so it is
// followed only to a regular file: never a device, a pipe or /proc, which
// could block or never end. A path recorded on another machine is simply
// not there; --prompts replaces it.
func recordedPrompts(man pipeline.Manifest) string {
	p, _ := recordedOptions(man)["prompts"].(string)
	if p == "" {
		return ""
	}
	if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
		return ""
	}
	return p
}

func intOption(m map[string]any, name string, def int) int {
	if f, ok := m[name].(float64); ok && f > 0 {
		return int(f)
	}
	return def
}

// MergeStatistics adds up the statistics of disjoint output folders. Counts,
// sums, rates, the mean and the maximum are exact. The p50 and p95 durations
// are the record-weighted means of the shards' percentiles: shards are
// disjoint random samples of one run (rows are assigned by hash), so this
// estimates the whole run's percentile; exact only with one shard.
func MergeStatistics(list []pipeline.Statistics) pipeline.Statistics {
	st := pipeline.NewStatistics()
	var p50, p95 float64
	for _, s := range list {
		st.Add(s)
		p50 += float64(s.Duration.P50MS) * float64(s.Records)
		p95 += float64(s.Duration.P95MS) * float64(s.Records)
	}
	st.Finish()
	if st.Records > 0 {
		st.Duration.P50MS = int64(p50/float64(st.Records) + 0.5)
		st.Duration.P95MS = int64(p95/float64(st.Records) + 0.5)
	}
	return st
}

// StatsAll returns the statistics of a run's folders (one, or the shards
// of a sharded run from ShardDirs): pipeline.Stats of each, merged by
// MergeStatistics when there are several. `stats` and `report` both print
// it, so their figures agree.
func StatsAll(dirs []string) (pipeline.Statistics, error) {
	all := make([]pipeline.Statistics, 0, len(dirs))
	for _, dir := range dirs {
		st, err := pipeline.Stats(dir)
		if err != nil {
			return st, err
		}
		all = append(all, st)
	}
	if len(all) == 1 {
		return all[0], nil
	}
	return MergeStatistics(all), nil
}

// writeJSON writes v to dir/name, indented, with the runtime's atomic-file
// protocol.
func writeJSON(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return atomicfile.Write(dir, name, append(b, '\n'))
}

// readManifestFile reads a shard folder's run.json; a missing one is an
// error.
func readManifestFile(dir string) (pipeline.Manifest, error) {
	man, ok, err := outdir.ReadManifest(dir)
	if err == nil && !ok {
		err = fmt.Errorf("%s: no %s", dir, outdir.ManifestFile)
	}
	return man, err
}
