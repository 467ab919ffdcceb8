package pipeline

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// CatOptions configure CatWith.
type CatOptions struct {
	// Final limits the output to records whose outcome is final (the data
	// folder); by default records still waiting for a retry are included.
	Final bool
	// Ungraded gives records as their shards hold them, without the latest
	// grade `regrade` journalled for them (outdir.GradesFile); by default
	// a regraded record shows its new reward and grade.
	Ungraded bool
}

// Cat writes every live record of the output folder dir to w, one JSON line
// each, in (prompt_index, sample, key) order, whatever order they finished
// in. A record is live when it is the latest ledger entry for its key. Cat
// only reads: it may run while a run appends, and then shows what was
// committed when it started.
//
// It orders records from the ledger alone and copies their lines verbatim
// from the shards with positioned reads, coalescing adjacent ones; it never
// holds more than 1 MiB of record text. From Parquet shards it prints the
// raw_json column, the same bytes, decoding one row group at a time and
// keeping the last four (about 32 MiB of text). Its memory cost is the ledger index:
// about 100 bytes per key plus the ledger file, so 1,000,000 keys cost about
// 150 MB.
func Cat(dir string, w io.Writer) error { return CatWith(dir, w, CatOptions{}) }

// CatWith is Cat with options.
func CatWith(dir string, w io.Writer, opts CatOptions) error {
	ix, _, err := openReadOnly(dir)
	if err != nil {
		return fmt.Errorf("cat %s: %w", dir, err)
	}
	err = eachLive(dir, ix, opts, true, func(_ ledgerEntry, line []byte) error {
		_, err := w.Write(line)
		return err
	})
	if err != nil {
		return fmt.Errorf("cat %s: %w", dir, err)
	}
	return nil
}

// openReadOnly loads the ledger of an output folder without repairing it: a
// torn last line is ignored.
func openReadOnly(dir string) (*ledgerIndex, Manifest, error) {
	man, ok, err := readManifest(dir)
	if err != nil {
		return nil, man, err
	}
	if !ok {
		return nil, man, fmt.Errorf("not an output folder: no %s", ManifestFile)
	}
	if _, err := formatByName(man.Format); err != nil {
		return nil, man, fmt.Errorf("%s: %w", ManifestFile, err)
	}
	ld, err := loadLedger(filepath.Join(dir, LedgerFile))
	if err != nil {
		return nil, man, err
	}
	if ld.ix.len() == 0 {
		if err := noLedgerError(dir); err != nil {
			return nil, man, err
		}
	}
	ld.ix.onePass = true
	return ld.ix, man, nil
}

// liveRefs returns the live records of ix in (prompt_index, sample, key)
// order; marker rows have no record and are left out.
func liveRefs(ix *ledgerIndex, finalOnly bool) []ledgerEntry {
	refs := make([]ledgerEntry, 0, ix.len())
	for _, e := range ix.entries {
		if !e.record() {
			continue
		}
		if finalOnly && ix.outcomes[e.outcome].Retryable() {
			continue
		}
		refs = append(refs, e)
	}
	slices.SortFunc(refs, func(a, b ledgerEntry) int {
		return catOrder(a.pi, int64(a.sample), a.key, b.pi, int64(b.sample), b.key)
	})
	return refs
}

// catOrder compares two records in Cat's order: prompt_index, then sample,
// then key. Whatever sums or writes records in that order (statistics'
// float sums, compaction, a shard's rows) uses it, so all agree with Cat.
func catOrder(pi1, sample1 int64, key1 string, pi2, sample2 int64, key2 string) int {
	return cmp.Or(cmp.Compare(pi1, pi2), cmp.Compare(sample1, sample2), strings.Compare(key1, key2))
}

// eachLive calls fn with every live record line (newline included) in order.
// A record of a Parquet shard is its raw_json column, the same line the
// JSONL format holds; its ledger offset is its row number.
//
// With check, each shard is held to its ledger line, so a damaged shard is an
// error instead of lines that lie: its size is compared before its first
// record is read, and its SHA-256 is computed from the bytes read (plus the
// gaps between live records, read from the file) and compared once every
// record was handed to fn; a Parquet shard is hashed whole before its first
// record. A changed shard of the same size is thus reported (exit 1) after
// its lines were printed.
//
// The hash is the cost of that check (about as much again as reading), so
// it is spent only on shards that may have changed since they were
// committed: a shard is written before the ledger line that commits it, so
// one whose modification time is not older than the ledger's was written
// (or rewritten, copied, pulled) since; older shards get the size check
// only. `verify` always hashes every shard.
//
// Unless opts.Ungraded, a record `regrade` graded again is handed to fn with
// its latest reward and grade from the folder's grades journal (the one place
// cat, stats, export and the report read records through), after the
// shard's bytes were checked.
func eachLive(dir string, ix *ledgerIndex, opts CatOptions, check bool, fn func(ref ledgerEntry, line []byte) error) error {
	if !opts.Ungraded {
		grades, err := loadGrades(dir)
		if err != nil {
			return err
		}
		fn = withGrades(grades, fn)
	}
	refs := liveRefs(ix, opts.Final)
	if ix.onePass {
		ix.detach(refs)
	}
	lr := &liveReader{dir: dir, ix: ix, check: check, files: newFileCache(dir, 64), hashes: map[uint32]*shardHash{}}
	defer lr.close()
	if fi, err := os.Stat(filepath.Join(dir, LedgerFile)); err == nil {
		lr.ledgerMod = fi.ModTime()
	}
	if err := lr.each(refs, fn); err != nil {
		return err
	}
	return lr.checkHashes()
}

// each calls fn with the line of every record of refs, in their order,
// checking each shard first when lr checks.
func (lr *liveReader) each(refs []ledgerEntry, fn func(ref ledgerEntry, line []byte) error) error {
	for i := 0; i < len(refs); {
		if err := lr.checkShard(refs[i].shard); err != nil {
			return err
		}
		var err error
		if name := lr.ix.shards[refs[i].shard]; strings.HasSuffix(name, parquetExt) {
			err = lr.parquetRecord(name, refs[i], fn)
			i++
		} else {
			i, err = lr.jsonlRun(refs, i, fn)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// liveReader is the state of one eachLive pass: the open shards, the
// ledger's modification time and the hashes of the shards being checked.
type liveReader struct {
	dir       string
	ix        *ledgerIndex
	check     bool
	files     *fileCache
	ledgerMod time.Time // zero: hash every shard
	hashes    map[uint32]*shardHash
	pq        *parquetLines // opened at the first Parquet shard
	buf       []byte
}

// close closes the Parquet shards, then the JSONL ones.
func (lr *liveReader) close() {
	if lr.pq != nil {
		lr.pq.close()
	}
	lr.files.close()
}

// maxRead bounds the bytes of back-to-back records jsonlRun reads at once.
const maxRead = 1 << 20

// checkShard holds shard sid to its ledger line the first time it is met,
// when checking: its size always; its SHA-256 when it may have changed since
// its commit, at once for a Parquet shard, else by starting a hash that the
// reads feed.
func (lr *liveReader) checkShard(sid uint32) error {
	if _, seen := lr.hashes[sid]; !lr.check || seen {
		return nil
	}
	lr.hashes[sid] = nil
	name := lr.ix.shards[sid]
	fi, err := CheckShardSize(lr.dir, name, lr.ix.shardSize[sid])
	if err != nil || fi.ModTime().Before(lr.ledgerMod) {
		return err
	}
	if strings.HasSuffix(name, parquetExt) {
		return CheckShardHash(lr.dir, name, lr.ix.shardSHA[sid])
	}
	lr.hashes[sid] = &shardHash{h: sha256.New()}
	return nil
}

// parquetRecord hands fn the line of ref, a row of the Parquet shard name.
func (lr *liveReader) parquetRecord(name string, ref ledgerEntry, fn func(ref ledgerEntry, line []byte) error) error {
	if lr.pq == nil {
		lr.pq = newParquetLines(lr.dir)
	}
	line, err := lr.pq.line(name, ref.off)
	if err != nil {
		return err
	}
	return fn(ref, line)
}

// jsonlRun reads refs[i] and the records that sit back to back after it in
// the same JSONL shard (up to maxRead bytes) with one read, feeds the
// shard's hash, hands fn each line and returns the index of the first
// record it did not read.
func (lr *liveReader) jsonlRun(refs []ledgerEntry, i int, fn func(ref ledgerEntry, line []byte) error) (int, error) {
	// Coalesce records that sit back to back in the same shard.
	j, end := i+1, refs[i].off+int64(refs[i].n)
	for j < len(refs) && refs[j].shard == refs[i].shard && refs[j].off == end && end-refs[i].off < maxRead {
		end += int64(refs[j].n)
		j++
	}
	name := lr.ix.shards[refs[i].shard]
	f, err := lr.files.get(name)
	if err != nil {
		return j, err
	}
	size := int(end - refs[i].off)
	if cap(lr.buf) < size {
		lr.buf = make([]byte, size)
	}
	buf := lr.buf[:size]
	lr.buf = buf
	if n, err := f.ReadAt(buf, refs[i].off); err != nil {
		if errors.Is(err, io.EOF) {
			return j, fmt.Errorf("shard %s ends at byte %d, but the ledger places record %s and the ones after it up to byte %d: the shard was cut short; %s",
				name, refs[i].off+int64(n), refs[i].key, end, HealHint)
		}
		return j, fmt.Errorf("read %s at byte %d: %w", name, refs[i].off, err)
	}
	if sh := lr.hashes[refs[i].shard]; sh != nil {
		if err := sh.add(f, refs[i].off, buf); err != nil {
			return j, fmt.Errorf("read %s: %w", name, err)
		}
	}
	pos := 0
	for k := i; k < j; k++ {
		line := buf[pos : pos+int(refs[k].n)]
		pos += int(refs[k].n)
		if line[len(line)-1] != '\n' {
			return j, fmt.Errorf("%s: record %s at byte %d does not end a line: the ledger and the shard disagree (run verify)", name, refs[k].key, refs[k].off)
		}
		if err := fn(refs[k], line); err != nil {
			return j, err
		}
	}
	return j, nil
}

// checkHashes ends the hashes the reads fed, in shard order: each is fed
// the rest of its shard and compared with the ledger's SHA-256; a shard
// read out of order is hashed whole instead.
func (lr *liveReader) checkHashes() error {
	ix := lr.ix
	sids := slices.Sorted(maps.Keys(lr.hashes))
	for _, sid := range sids {
		sh := lr.hashes[sid]
		if sh == nil {
			continue
		}
		name := ix.shards[sid]
		if sh.broken {
			if err := CheckShardHash(lr.dir, name, ix.shardSHA[sid]); err != nil {
				return err
			}
			continue
		}
		f, err := lr.files.get(name)
		if err != nil {
			return err
		}
		if err := sh.add(f, ix.shardSize[sid], nil); err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
		if hex.EncodeToString(sh.h.Sum(nil)) != ix.shardSHA[sid] {
			return fmt.Errorf("shard %s does not match its ledger SHA-256: its content changed; %s", name, HealHint)
		}
	}
	return nil
}

// shardHash is the SHA-256 of a shard's first pos bytes, fed in file order.
type shardHash struct {
	h      hash.Hash
	pos    int64
	broken bool // a read went backwards: hash the whole file instead
}

// add feeds the bytes between pos and off from f, then b (the file's bytes
// at off).
func (sh *shardHash) add(f *os.File, off int64, b []byte) error {
	if sh.broken {
		return nil
	}
	if off < sh.pos {
		sh.broken = true
		return nil
	}
	if off > sh.pos {
		if _, err := io.Copy(sh.h, io.NewSectionReader(f, sh.pos, off-sh.pos)); err != nil {
			return err
		}
	}
	sh.h.Write(b)
	sh.pos = off + int64(len(b))
	return nil
}

// CheckShardSize compares the size of the shard dir/rel with its ledger
// line and returns what it found; it costs one stat. cat and view check
// shards through it and CheckShardHash.
//
// The shard is looked at through outdir.LstatShard: a symbolic link, or a
// path leading out of dir, is an error and is never followed.
func CheckShardSize(dir, rel string, size int64) (fs.FileInfo, error) {
	fi, err := outdir.LstatShard(dir, rel)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("shard %s is missing; %s", rel, HealHint)
	}
	if err != nil {
		return nil, fmt.Errorf("open shard: %w", err)
	}
	if fi.Size() != size {
		return nil, fmt.Errorf("shard %s is %d bytes, the ledger says %d: it was cut short or changed; %s", rel, fi.Size(), size, HealHint)
	}
	return fi, nil
}

// HealHint tells what to do about a damaged shard; readers of a folder end
// their errors about one with it.
const HealHint = "run `hermes-pipe verify` for details, then --resume (with --verify-shards when only the content changed) redoes its records"

// CheckShardHash compares the SHA-256 of the shard dir/rel with its ledger
// line; callers have checked its size (CheckShardSize). It reads the whole
// file.
func CheckShardHash(dir, rel, sum string) error {
	got, err := shardSHA256(dir, rel)
	if err != nil {
		return fmt.Errorf("read shard %s: %w", rel, err)
	}
	if got != sum {
		return fmt.Errorf("shard %s does not match its ledger SHA-256: its content changed; %s", rel, HealHint)
	}
	return nil
}

// shardSHA256 returns the hex SHA-256 of the shard rel of dir, opened
// through outdir.OpenShard; it reads the whole file. Opening a folder
// (--verify-shards) and cat share it.
func shardSHA256(dir, rel string) (string, error) {
	f, err := outdir.OpenShard(dir, rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// readShard reads the whole shard rel of dir, opened through
// outdir.OpenShard (never a link, never outside dir).
func readShard(dir, rel string) ([]byte, error) {
	f, err := outdir.OpenShard(dir, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(int(fi.Size()) + 1)
	if _, err := b.ReadFrom(f); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// fileCache keeps a bounded number of shard files open.
type fileCache struct {
	dir   string
	max   int
	open  map[string]*os.File
	order []string
}

func newFileCache(dir string, max int) *fileCache {
	return &fileCache{dir: dir, max: max, open: map[string]*os.File{}}
}

func (c *fileCache) get(name string) (*os.File, error) {
	if f, ok := c.open[name]; ok {
		return f, nil
	}
	if len(c.order) >= c.max {
		old := c.order[0]
		c.order = c.order[1:]
		c.open[old].Close()
		delete(c.open, old)
	}
	f, err := outdir.OpenShard(c.dir, name)
	if err != nil {
		return nil, fmt.Errorf("open shard: %w", err)
	}
	c.open[name] = f
	c.order = append(c.order, name)
	return f, nil
}

func (c *fileCache) close() {
	for _, f := range c.open {
		f.Close()
	}
}

// RecordRef locates one live record of an output folder: its shard (a path
// relative to the folder) and, in a JSONL shard, the byte offset and length
// of its line; in a Parquet shard Off is its row number.
type RecordRef struct {
	Key     string
	Outcome schemas.Outcome // the ledger's outcome of the record
	Shard   string
	Off     int64
	N       int32
}

// EachRecord calls fn with every live record of the output folder dir, in
// Cat's order and with Cat's checks, and where it lives, so a caller can come
// back for one record later with a RecordReader. line is valid only during
// the call. The viewer's index is built with it.
func EachRecord(dir string, fn func(ref RecordRef, line []byte) error) error {
	return EachRecordWith(dir, CatOptions{}, fn)
}

// EachRecordWith is EachRecord with options (regrade reads the records as
// their shards hold them: CatOptions.Ungraded).
func EachRecordWith(dir string, opts CatOptions, fn func(ref RecordRef, line []byte) error) error {
	ix, _, err := openReadOnly(dir)
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	err = eachLive(dir, ix, opts, true, func(e ledgerEntry, line []byte) error {
		return fn(RecordRef{Key: e.key, Outcome: ix.outcomes[e.outcome], Shard: ix.shards[e.shard], Off: e.off, N: e.n}, line)
	})
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	return nil
}

// RecordReader reads single records of one output folder by their
// RecordRef, with positioned reads (JSONL) or one row group at a time
// (Parquet), keeping at most 64 shards open. It is not safe for concurrent
// use.
type RecordReader struct {
	dir    string
	files  *fileCache
	pq     *parquetLines
	grades map[string]gradeOverlay // the folder's grades journal, read at the first Read
	loaded bool
}

// NewRecordReader returns a reader of the records of dir; Close releases its
// files.
func NewRecordReader(dir string) *RecordReader {
	return &RecordReader{dir: dir, files: newFileCache(dir, 64)}
}

// Read returns a copy of the record line ref points at, newline included. A
// ref that does not land on a whole line (the folder changed since ref was
// taken) is an error naming the shard and offset.
//
// A record `regrade` graded again comes with its latest reward and grade, as
// EachRecord gives it.
func (r *RecordReader) Read(ref RecordRef) ([]byte, error) {
	line, err := r.read(ref)
	if err != nil {
		return nil, err
	}
	if !r.loaded {
		if r.grades, err = loadGrades(r.dir); err != nil {
			return nil, err
		}
		r.loaded = true
	}
	if g, ok := r.grades[ref.Key]; ok && outdir.RecordSum(line) == g.sum {
		line = overlayGrade(line, g)
	}
	return line, nil
}

// read is Read without the grades journal.
func (r *RecordReader) read(ref RecordRef) ([]byte, error) {
	if strings.HasSuffix(ref.Shard, parquetExt) {
		if r.pq == nil {
			r.pq = newParquetLines(r.dir)
		}
		line, err := r.pq.line(ref.Shard, ref.Off)
		if err != nil {
			return nil, err
		}
		return slices.Clone(line), nil
	}
	if ref.N <= 0 {
		return nil, fmt.Errorf("%s: record %s has no line", ref.Shard, ref.Key)
	}
	f, err := r.files.get(ref.Shard)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, ref.N)
	if _, err := f.ReadAt(buf, ref.Off); err != nil {
		return nil, fmt.Errorf("read %s at byte %d: %w", ref.Shard, ref.Off, err)
	}
	if buf[len(buf)-1] != '\n' {
		return nil, fmt.Errorf("%s: record %s at byte %d does not end a line: the folder changed since it was indexed", ref.Shard, ref.Key, ref.Off)
	}
	return buf, nil
}

// Close closes the reader's files.
func (r *RecordReader) Close() {
	r.files.close()
	if r.pq != nil {
		r.pq.close()
	}
}
