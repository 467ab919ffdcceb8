package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// The ledger's line format, its parser and its torn-end rule live in
// pipeline/outdir; this file keeps the in-memory index the runtime, Cat and
// Stats build from it.

// ledgerLine and ledgerRow are the ledger's line and row (see outdir.Line).
type (
	ledgerLine = outdir.Line
	ledgerRow  = outdir.Row
)

// Marker outcomes (see outdir.Filtered).
const (
	outcomeFiltered  = outdir.Filtered
	outcomeFannedOut = outdir.FannedOut
)

// ledgerEntry is what the index keeps per key: where its latest row lives.
type ledgerEntry struct {
	key     string
	off     int64 // byte offset of the row in its shard
	pi      int64 // prompt_index
	sample  int32
	n       int32  // row length; -1 marker
	shard   uint32 // index into ledgerIndex.shards; 0 = no record (see record)
	outcome uint16 // index into ledgerIndex.outcomes
}

// ledgerIndex is the in-memory view of the ledger: the latest entry per key.
// Entries live in one slice in ledger order (a superseded key is updated in
// place), found through keyTable; keys read from the ledger file live in an
// arena. Loading 1,000,000 keys costs about 90 MB (entries, table and keys).
type ledgerIndex struct {
	table      keyTable
	entries    []ledgerEntry
	next       atomic.Uint32 // lookup hint: the entry after the last hit
	shards     []string      // relative shard paths (data/shard-00001.jsonl); shards[0] is "" for no shard
	shardSize  []int64       // size of each shard as its ledger line records it
	shardSHA   []string      // SHA-256 of each shard as its ledger line records it
	shardByNm  map[string]uint32
	outcomes   []schemas.Outcome
	outcomeIdx map[schemas.Outcome]uint16
	maxShard   int     // highest shard number named
	cost       float64 // sum of every line's cost_usd, superseded lines included
	// arena, while loadLedger reads the file a line at a time, holds the
	// keys the index keeps: the line they were read from is reused.
	arena *keyArena
	// onePass marks an index read for one pass over its records (cat,
	// EachRecord): eachLive drops its key table and entries once it has
	// the live records in order, about 100 bytes a key, before reading them.
	onePass bool
}

func newLedgerIndex(sizeHint int) *ledgerIndex {
	return &ledgerIndex{
		table:      newKeyTable(sizeHint),
		entries:    make([]ledgerEntry, 0, sizeHint),
		shards:     []string{""},
		shardSize:  []int64{0},
		shardSHA:   []string{""},
		shardByNm:  map[string]uint32{},
		outcomeIdx: map[schemas.Outcome]uint16{},
	}
}

// detach readies a one-pass index (onePass) for reading its live records
// refs: it drops the key table and entries, and copies refs' keys (into one
// string) and the shard and outcome names, which all shared the ledger
// file's memory, so the file's bytes (about twice the keys) are freed
// before the records are read.
func (ix *ledgerIndex) detach(refs []ledgerEntry) {
	ix.table, ix.entries = keyTable{}, nil
	n := 0
	for i := range refs {
		n += len(refs[i].key)
	}
	var sb strings.Builder
	sb.Grow(n)
	for i := range refs {
		sb.WriteString(refs[i].key)
	}
	keys := sb.String()
	for i := range refs {
		k := len(refs[i].key)
		refs[i].key, keys = keys[:k], keys[k:]
	}
	for i := range ix.shards {
		ix.shards[i], ix.shardSHA[i] = strings.Clone(ix.shards[i]), strings.Clone(ix.shardSHA[i])
	}
	for i := range ix.outcomes {
		ix.outcomes[i] = schemas.Outcome(strings.Clone(string(ix.outcomes[i])))
	}
	ix.shardByNm, ix.outcomeIdx = nil, nil
}

func (ix *ledgerIndex) outcomeID(o schemas.Outcome) uint16 {
	if id, ok := ix.outcomeIdx[o]; ok {
		return id
	}
	id := uint16(len(ix.outcomes))
	if ix.arena != nil {
		o = schemas.Outcome(strings.Clone(string(o)))
	}
	ix.outcomes = append(ix.outcomes, o)
	ix.outcomeIdx[o] = id
	return id
}

var hashSeed = maphash.MakeSeed()

// find returns the position of key in entries. Sources yield keys in input
// order and the ledger holds them in nearly that order, so the entry after the
// previous hit is tried first: a sequential read instead of a hash probe.
func (ix *ledgerIndex) find(key string) (uint32, bool) { return ix.findFrom(&ix.next, key) }

// findFrom is find with the hint next: a reader going through the keys
// apart from the runtime's (a count at the same time) keeps its own.
func (ix *ledgerIndex) findFrom(next *atomic.Uint32, key string) (uint32, bool) {
	n := next.Load()
	if int(n) < len(ix.entries) && ix.entries[n].key == key {
		next.Store(n + 1)
		return n, true
	}
	i, ok := ix.findHashed(key)
	if ok {
		next.Store(i + 1)
	}
	return i, ok
}

func (ix *ledgerIndex) findHashed(key string) (uint32, bool) {
	return ix.table.find(maphash.String(hashSeed, key), key, ix.entries)
}

// set makes e the latest entry of its key.
func (ix *ledgerIndex) set(e ledgerEntry) { ix.setHashed(e, 0, false) }

// setHashed is set with the key's hash h when hashed (warm).
func (ix *ledgerIndex) setHashed(e ledgerEntry, h uint64, hashed bool) {
	if n := ix.next.Load(); int(n) < len(ix.entries) && ix.entries[n].key == e.key {
		e.key = ix.entries[n].key // the key as kept (arena)
		ix.entries[n] = e
		ix.next.Store(n + 1)
		return
	}
	if !hashed {
		h = maphash.String(hashSeed, e.key)
	}
	if i, ok := ix.table.find(h, e.key, ix.entries); ok {
		e.key = ix.entries[i].key
		ix.entries[i] = e
		if ix.arena != nil {
			// Loading: the rows after a jump in a line that re-points
			// keys in order (a merge) find their keys by the hint again.
			ix.next.Store(i + 1)
		}
		return
	}
	if ix.arena != nil {
		e.key = ix.arena.keep(e.key)
	}
	ix.entries = append(ix.entries, e)
	ix.table.insert(h, uint32(len(ix.entries)-1))
}

// keyTable is an open-addressing hash table from key to entry position. Each
// slot packs the high 32 bits of the key's hash with the position plus one
// (0 = empty), so a probe rarely touches an entry whose key differs, and a
// key's home slot is those 32 bits scaled to the table's size, so the table
// grows without hashing the keys again. It is kept at most 60% full whatever
// its size (not a power of two: a million keys take 13 MB, not 16 or 32). It
// holds no pointers, so the garbage collector skips it, and it inserts about
// 2.5 times faster than a map[uint64]uint32 of the same keys. It holds fewer
// than 1<<31 entries (positions are uint32).
type keyTable struct {
	slots []uint64
	used  int
}

func newKeyTable(hint int) keyTable {
	return keyTable{slots: make([]uint64, max(1024, hint*5/3+1))}
}

// home returns the slot where the probe for a key whose hash's high 32 bits
// are hi starts.
func (t *keyTable) home(hi uint64) int { return int(hi * uint64(len(t.slots)) >> 32) }

func (t *keyTable) find(h uint64, key string, entries []ledgerEntry) (uint32, bool) {
	for s := t.home(h >> 32); ; {
		v := t.slots[s]
		if v == 0 {
			return 0, false
		}
		if v>>32 == h>>32 && entries[uint32(v)-1].key == key {
			return uint32(v) - 1, true
		}
		if s++; s == len(t.slots) {
			s = 0
		}
	}
}

func (t *keyTable) insert(h uint64, pos uint32) {
	if 5*(t.used+1) > 3*len(t.slots) {
		old := t.slots
		t.slots = make([]uint64, 2*len(old))
		for _, v := range old {
			if v != 0 {
				t.put(v)
			}
		}
	}
	t.put(h&^0xffffffff | uint64(pos+1))
	t.used++
}

// put places the packed slot value v (a hash's high 32 bits, position plus
// one) in the first free slot from its home.
func (t *keyTable) put(v uint64) {
	s := t.home(v >> 32)
	for t.slots[s] != 0 {
		if s++; s == len(t.slots) {
			s = 0
		}
	}
	t.slots[s] = v
}

// len returns the number of distinct keys.
func (ix *ledgerIndex) len() int { return len(ix.entries) }

// lookup returns the latest outcome of key.
func (ix *ledgerIndex) lookup(key string) (schemas.Outcome, bool) {
	i, ok := ix.find(key)
	if !ok {
		return "", false
	}
	return ix.outcomes[ix.entries[i].outcome], true
}

// apply adds one ledger line to the index; later lines win.
func (ix *ledgerIndex) apply(l *ledgerLine) {
	ix.cost += l.CostUSD
	var sid uint32
	if l.Shard != "" {
		if ix.arena != nil { // the line's memory is reused
			l.Shard, l.SHA256 = strings.Clone(l.Shard), strings.Clone(l.SHA256)
		}
		if id, ok := ix.shardByNm[l.Shard]; ok {
			sid = id // named twice: Verify reports it; the later rows win
			ix.shardSize[sid], ix.shardSHA[sid] = l.Bytes, l.SHA256
		} else {
			sid = uint32(len(ix.shards))
			ix.shards = append(ix.shards, l.Shard)
			ix.shardSize = append(ix.shardSize, l.Bytes)
			ix.shardSHA = append(ix.shardSHA, l.SHA256)
			ix.shardByNm[l.Shard] = sid
		}
		if num, ok := shardNumber(l.Shard); ok && num > ix.maxShard {
			ix.maxShard = num
		}
	}
	var off int64
	var w warmRows
	for i := range l.Rows {
		if i%len(w.h) == 0 {
			ix.warm(&w, l.Rows[i:min(i+len(w.h), len(l.Rows))])
		}
		r := &l.Rows[i]
		e := ledgerEntry{key: r.Key, off: off, pi: r.PromptIndex, sample: int32(r.Sample), n: int32(r.Len), shard: sid, outcome: ix.outcomeID(r.Outcome)}
		if !l.Record(r) {
			e.shard, e.off = 0, 0 // no record: outdir's live-row rule
		}
		if !r.Marker() {
			off += r.Len
		}
		ix.setHashed(e, w.h[i%len(w.h)], w.hashed[i%len(w.h)]) // the latest row of a key wins
	}
}

// warmRows is what warm learns of up to 32 rows of a line.
type warmRows struct {
	h      [32]uint64
	hashed [32]bool
	sink   uint64
}

// warm hashes the rows the lookup hint will not find, as far as it can
// tell, and reads the home slot of each, before apply sets them one by one:
// the reads do not wait for each other, so a batch of keys new to a large
// table costs about one cache miss, not one each, and set then finds the
// slots in the cache. It changes nothing but w.
func (ix *ledgerIndex) warm(w *warmRows, rows []ledgerRow) {
	t := &ix.table
	next := int(ix.next.Load())
	for j := range rows {
		if next < len(ix.entries) && ix.entries[next].key == rows[j].Key {
			next++
			w.hashed[j] = false
			continue
		}
		h := maphash.String(hashSeed, rows[j].Key)
		w.h[j], w.hashed[j] = h, true
		w.sink += t.slots[t.home(h>>32)]
	}
}

// record reports whether e, a key's latest row, is a live record (apply
// left a shard only on the rows outdir.Line.Record accepts).
func (e *ledgerEntry) record() bool { return e.shard != 0 }

// ledgerLoad is the result of reading a ledger file.
type ledgerLoad struct {
	ix       *ledgerIndex
	size     int64 // file size
	good     int64 // bytes up to the end of the last good line
	torn     bool  // the file ends with a torn or unparsable line
	tornLine int   // its 1-based line number
}

// loadLedger reads path into an index by outdir.ScanReader: a torn or
// unparsable last line is reported (torn) and left out; an unparsable line
// before the last one is an error naming its line, and so is a line naming a
// shard outside the folder, wherever it is (its error tells how repair drops
// it). A missing file yields an empty index. The file is read twice as a
// stream, never whole: once for its shape (shapeOf), so the index, its table
// and the buffers are sized once, and once to index it; the keys kept are copied into an arena
// (about half the file: the rest of a line is not kept).
func loadLedger(path string) (*ledgerLoad, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return &ledgerLoad{ix: newLedgerIndex(0)}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ledger: %w", err)
	}
	defer f.Close()
	sh, err := shapeOf(f)
	if err != nil {
		return nil, fmt.Errorf("read ledger: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("read ledger: %w", err)
	}
	ld := &ledgerLoad{ix: newLedgerIndex(sh.rows)}
	ld.ix.arena = &keyArena{}
	t, err := outdir.ScanReader(f, outdir.ScanSize{Line: sh.maxLine, Rows: sh.maxLineRows}, func(_ int, l *outdir.Line) error {
		ld.ix.apply(l)
		return nil
	})
	ld.ix.arena = nil
	if err != nil {
		return nil, shardPathHint(filepath.Dir(path), err)
	}
	ld.size, ld.good, ld.torn, ld.tornLine = t.Size, t.Good, t.Torn, t.TornLine
	ld.ix.next.Store(0)
	return ld, nil
}

// ledgerShape is what loadLedger's first pass learns of a ledger file: its
// rows (superseded ones included) and its longest line, in bytes and rows,
// so the index, the line buffer and the rows of a line are each allocated
// once, not grown.
type ledgerShape struct {
	rows, maxLine, maxLineRows int
}

// shapeOf reads a ledger stream for its ledgerShape. Each row of a line is an
// array starting `["` (a key's own quotes are escaped); a pair split across
// two reads is counted too.
func shapeOf(r io.Reader) (ledgerShape, error) {
	var sh ledgerShape
	buf := make([]byte, 1<<20)
	line, lineRows, lastOpen := 0, 0, false
	for {
		k, err := r.Read(buf)
		b := buf[:k]
		if k > 0 && lastOpen && b[0] == '"' {
			lineRows++
		}
		for len(b) > 0 {
			seg := b
			nl := bytes.IndexByte(b, '\n')
			if nl >= 0 {
				seg = b[:nl+1]
			}
			lineRows += bytes.Count(seg, []byte(`["`))
			line += len(seg)
			b = b[len(seg):]
			if nl >= 0 {
				sh.rows += lineRows
				sh.maxLine, sh.maxLineRows = max(sh.maxLine, line), max(sh.maxLineRows, lineRows)
				line, lineRows = 0, 0
			}
		}
		if k > 0 {
			lastOpen = buf[k-1] == '['
		}
		if errors.Is(err, io.EOF) {
			sh.rows += lineRows
			sh.maxLine, sh.maxLineRows = max(sh.maxLine, line), max(sh.maxLineRows, lineRows)
			return sh, nil
		}
		if err != nil {
			return sh, err
		}
	}
}

// keyArena keeps the keys of an index read as a stream in large shared
// blocks instead of one allocation each.
type keyArena struct {
	block []byte
}

// keep returns a copy of key that lives as long as the index uses it.
func (a *keyArena) keep(key string) string {
	const blockSize = 1 << 20
	if key == "" || len(key) > blockSize/16 {
		return strings.Clone(key)
	}
	if len(a.block)+len(key) > cap(a.block) {
		a.block = make([]byte, 0, blockSize)
	}
	start := len(a.block)
	a.block = append(a.block, key...)
	return unsafe.String(&a.block[start], len(key))
}

// shardPathHint adds to err, when a ledger line of dir names a shard outside
// the folder, that the line is not followed and how to drop it.
func shardPathHint(dir string, err error) error {
	if !errors.Is(err, outdir.ErrShardPath) {
		return err
	}
	return fmt.Errorf("%w: the line is not followed (the folder may come from someone else); run `hermes-pipe verify %s` to see it and `hermes-pipe repair %s` to drop it", err, dir, dir)
}
