package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// The ledger (ledger.jsonl) is an append-only journal with one line per
// committed shard:
//
//	{"shard":"data/shard-00001.jsonl","bytes":1234,"sha256":"…","rows":[["key","completed",0,0,617],…]}
//
// Each row is [key, outcome, prompt_index, sample, length]: length is the
// number of bytes the record occupies in the shard (its line and newline for
// JSONL), 1 for Parquet (so the offset is the row number), and -1 for a marker row that
// names an input key without a line of its own (the input was filtered out or
// fanned out into records with other keys). Rows appear in shard order, so a
// row's byte offset is the sum of the lengths before it. A line with an empty
// shard holds marker rows only. The latest row for a key wins.

// Marker outcomes name what happened to an input whose key has no record of
// its own. They live in the ledger only and are final.
const (
	outcomeFiltered  schemas.Outcome = "filtered"
	outcomeFannedOut schemas.Outcome = "fanned_out"
)

// ledgerRow is one row of a ledger line.
type ledgerRow struct {
	Key         string
	Outcome     schemas.Outcome
	PromptIndex int64
	Sample      int64
	Len         int64
}

// ledgerLine is one parsed ledger line.
type ledgerLine struct {
	Shard  string
	Bytes  int64
	SHA256 string
	Rows   []ledgerRow
}

// ledgerEntry is what the index keeps per key: where its latest row lives.
type ledgerEntry struct {
	key     string
	off     int64 // byte offset of the row in its shard
	pi      int64 // prompt_index
	sample  int32
	n       int32  // row length; -1 marker
	shard   uint32 // index into ledgerIndex.shards; 0 = none
	outcome uint16 // index into ledgerIndex.outcomes
}

// ledgerIndex is the in-memory view of the ledger: the latest entry per key.
// Entries live in one slice in ledger order (a superseded key is updated in
// place), found through keyTable; keys share the memory of the ledger file.
// Loading 1,000,000 keys costs about 100 MB (entries, table and file).
type ledgerIndex struct {
	table      keyTable
	entries    []ledgerEntry
	next       atomic.Uint32 // lookup hint: the entry after the last hit
	shards     []string      // relative shard paths (data/shard-00001.jsonl); shards[0] is "" for no shard
	shardByNm  map[string]uint32
	outcomes   []schemas.Outcome
	outcomeIdx map[schemas.Outcome]uint16
	maxShard   int // highest shard number named
}

func newLedgerIndex(sizeHint int) *ledgerIndex {
	return &ledgerIndex{
		table:      newKeyTable(sizeHint),
		entries:    make([]ledgerEntry, 0, sizeHint),
		shards:     []string{""},
		shardByNm:  map[string]uint32{},
		outcomeIdx: map[schemas.Outcome]uint16{},
	}
}

func (ix *ledgerIndex) outcomeID(o schemas.Outcome) uint16 {
	if id, ok := ix.outcomeIdx[o]; ok {
		return id
	}
	id := uint16(len(ix.outcomes))
	ix.outcomes = append(ix.outcomes, o)
	ix.outcomeIdx[o] = id
	return id
}

var hashSeed = maphash.MakeSeed()

// find returns the position of key in entries. Sources yield keys in input
// order and the ledger holds them in nearly that order, so the entry after the
// previous hit is tried first: a sequential read instead of a hash probe.
func (ix *ledgerIndex) find(key string) (uint32, bool) {
	if n := ix.next.Load(); int(n) < len(ix.entries) && ix.entries[n].key == key {
		ix.next.Store(n + 1)
		return n, true
	}
	i, ok := ix.findHashed(key)
	if ok {
		ix.next.Store(i + 1)
	}
	return i, ok
}

func (ix *ledgerIndex) findHashed(key string) (uint32, bool) {
	return ix.table.find(maphash.String(hashSeed, key), key, ix.entries)
}

// set makes e the latest entry of its key.
func (ix *ledgerIndex) set(e ledgerEntry) {
	if n := ix.next.Load(); int(n) < len(ix.entries) && ix.entries[n].key == e.key {
		ix.entries[n] = e
		ix.next.Store(n + 1)
		return
	}
	h := maphash.String(hashSeed, e.key)
	if i, ok := ix.table.find(h, e.key, ix.entries); ok {
		ix.entries[i] = e
		return
	}
	ix.entries = append(ix.entries, e)
	ix.table.insert(h, uint32(len(ix.entries)-1), ix.entries)
}

// keyTable is an open-addressing hash table from key to entry position. Each
// slot packs the high 32 bits of the key's hash with the position plus one
// (0 = empty), so a probe rarely touches an entry whose key differs. It holds
// no pointers, so the garbage collector skips it, and it inserts about 2.5
// times faster than a map[uint64]uint32 of the same keys.
type keyTable struct {
	slots []uint64
	used  int
}

func newKeyTable(hint int) keyTable {
	size := 1024
	for size < 2*hint {
		size <<= 1
	}
	return keyTable{slots: make([]uint64, size)}
}

func (t *keyTable) find(h uint64, key string, entries []ledgerEntry) (uint32, bool) {
	mask := uint64(len(t.slots) - 1)
	for s := h & mask; ; s = (s + 1) & mask {
		v := t.slots[s]
		if v == 0 {
			return 0, false
		}
		if v>>32 == h>>32 && entries[uint32(v)-1].key == key {
			return uint32(v) - 1, true
		}
	}
}

func (t *keyTable) insert(h uint64, pos uint32, entries []ledgerEntry) {
	if 2*(t.used+1) > len(t.slots) {
		old := t.slots
		t.slots = make([]uint64, 2*len(old))
		for _, v := range old {
			if v != 0 {
				t.put(maphash.String(hashSeed, entries[uint32(v)-1].key), uint32(v)-1)
			}
		}
	}
	t.put(h, pos)
	t.used++
}

func (t *keyTable) put(h uint64, pos uint32) {
	mask := uint64(len(t.slots) - 1)
	s := h & mask
	for t.slots[s] != 0 {
		s = (s + 1) & mask
	}
	t.slots[s] = h&^0xffffffff | uint64(pos+1)
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
	var sid uint32
	if l.Shard != "" {
		if id, ok := ix.shardByNm[l.Shard]; ok {
			sid = id // named twice: Verify reports it; the later rows win
		} else {
			sid = uint32(len(ix.shards))
			ix.shards = append(ix.shards, l.Shard)
			ix.shardByNm[l.Shard] = sid
		}
		if num, ok := shardNumber(l.Shard); ok && num > ix.maxShard {
			ix.maxShard = num
		}
	}
	var off int64
	for _, r := range l.Rows {
		e := ledgerEntry{key: r.Key, off: off, pi: r.PromptIndex, sample: int32(r.Sample), n: int32(r.Len), shard: sid, outcome: ix.outcomeID(r.Outcome)}
		if r.Len < 0 {
			e.shard, e.off = 0, 0
		} else {
			off += r.Len
		}
		ix.set(e)
	}
}

// ledgerLoad is the result of reading a ledger file.
type ledgerLoad struct {
	ix       *ledgerIndex
	size     int64 // file size
	good     int64 // bytes up to the end of the last good line
	torn     bool  // the file ends with a torn or unparsable line
	tornLine int   // its 1-based line number
}

// loadLedger reads path into an index. A torn or unparsable last line is
// reported (torn) and left out; an unparsable line before the last one is an
// error naming its line. A missing file yields an empty index.
func loadLedger(path string) (*ledgerLoad, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &ledgerLoad{ix: newLedgerIndex(0)}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ledger: %w", err)
	}
	// Keys share the file's memory instead of allocating one string each;
	// data is never written after this point.
	s := unsafe.String(unsafe.SliceData(data), len(data))
	ld := &ledgerLoad{ix: newLedgerIndex(len(s) / 40), size: int64(len(s))}
	var l ledgerLine
	pos, lineNo := 0, 0
	for pos < len(s) {
		lineNo++
		end := indexByteFrom(s, pos, '\n')
		if end < 0 {
			ld.torn, ld.tornLine = true, lineNo
			break
		}
		line := s[pos:end]
		if err := parseLedgerLine(line, &l); err != nil {
			if end+1 == len(s) {
				ld.torn, ld.tornLine = true, lineNo
				break
			}
			return nil, fmt.Errorf("ledger line %d: %w", lineNo, err)
		}
		ld.ix.apply(&l)
		pos = end + 1
		ld.good = int64(pos)
	}
	ld.ix.next.Store(0)
	return ld, nil
}

func indexByteFrom(s string, from int, c byte) int {
	i := strings.IndexByte(s[from:], c)
	if i < 0 {
		return -1
	}
	return from + i
}

// appendLedgerLine encodes l as one ledger line ending in a newline.
func appendLedgerLine(b []byte, l *ledgerLine) []byte {
	b = append(b, `{"shard":`...)
	b = appendJSONString(b, l.Shard)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, l.Bytes, 10)
	b = append(b, `,"sha256":`...)
	b = appendJSONString(b, l.SHA256)
	b = append(b, `,"rows":[`...)
	for i, r := range l.Rows {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = appendJSONString(b, r.Key)
		b = append(b, ',')
		b = appendJSONString(b, string(r.Outcome))
		b = append(b, ',')
		b = strconv.AppendInt(b, r.PromptIndex, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, r.Sample, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, r.Len, 10)
		b = append(b, ']')
	}
	return append(b, "]}\n"...)
}

// appendJSONString appends s as a JSON string; plain ASCII takes a fast path.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// parseLedgerLine parses one line into l, reusing l.Rows. It is a small
// hand-written JSON reader: encoding/json costs several times more, and the
// ledger is read on every resume. Keys and strings without escapes share the
// line's memory.
func parseLedgerLine(line string, l *ledgerLine) error {
	*l = ledgerLine{Rows: l.Rows[:0]}
	p := jscan{s: line}
	if err := p.expect('{'); err != nil {
		return err
	}
	first := true
	sawRows := false
	for {
		p.ws()
		if p.peek() == '}' {
			p.i++
			break
		}
		if !first {
			if err := p.expect(','); err != nil {
				return err
			}
		}
		first = false
		name, err := p.str()
		if err != nil {
			return err
		}
		if err := p.expect(':'); err != nil {
			return err
		}
		switch name {
		case "shard":
			l.Shard, err = p.str()
		case "bytes":
			l.Bytes, err = p.int()
		case "sha256":
			l.SHA256, err = p.str()
		case "rows":
			sawRows = true
			err = p.rows(l)
		default:
			err = p.skip()
		}
		if err != nil {
			return fmt.Errorf("field %q: %w", name, err)
		}
	}
	p.ws()
	if p.i != len(p.s) {
		return errors.New("trailing data")
	}
	if !sawRows {
		return errors.New(`missing "rows"`)
	}
	return nil
}

type jscan struct {
	s string
	i int
}

var errSyntax = errors.New("malformed JSON")

func (p *jscan) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\r', '\n':
			p.i++
		default:
			return
		}
	}
}

func (p *jscan) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *jscan) expect(c byte) error {
	p.ws()
	if p.peek() != c {
		return fmt.Errorf("%w: want %q at byte %d", errSyntax, c, p.i)
	}
	p.i++
	return nil
}

func (p *jscan) str() (string, error) {
	p.ws()
	if p.peek() != '"' {
		return "", fmt.Errorf("%w: want string at byte %d", errSyntax, p.i)
	}
	start := p.i
	end := strings.IndexByte(p.s[start+1:], '"')
	if end < 0 {
		return "", fmt.Errorf("%w: unterminated string", errSyntax)
	}
	v := p.s[start+1 : start+1+end]
	if strings.IndexByte(v, '\\') < 0 {
		for i := 0; i < len(v); i++ {
			if v[i] < 0x20 {
				return "", fmt.Errorf("%w: control character in string at byte %d", errSyntax, start+1+i)
			}
		}
		p.i = start + end + 2
		return v, nil
	}
	// Escapes: find the real closing quote and let encoding/json decode.
	i := start + 1
	for i < len(p.s) && p.s[i] != '"' {
		if p.s[i] == '\\' {
			i++
		}
		i++
	}
	if i >= len(p.s) {
		return "", fmt.Errorf("%w: unterminated string", errSyntax)
	}
	p.i = i + 1
	var out string
	if err := json.Unmarshal([]byte(p.s[start:p.i]), &out); err != nil {
		return "", fmt.Errorf("%w: bad string at byte %d", errSyntax, start)
	}
	return out, nil
}

func (p *jscan) int() (int64, error) {
	p.ws()
	start := p.i
	neg := false
	if p.peek() == '-' {
		neg = true
		p.i++
	}
	var v int64
	digits := 0
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		v = v*10 + int64(p.s[p.i]-'0')
		p.i++
		digits++
	}
	if digits == 0 || digits > 18 || (digits > 1 && p.s[p.i-digits] == '0') {
		return 0, fmt.Errorf("%w: bad integer at byte %d", errSyntax, start)
	}
	if neg {
		v = -v
	}
	return v, nil
}

func (p *jscan) rows(l *ledgerLine) error {
	if err := p.expect('['); err != nil {
		return err
	}
	p.ws()
	if p.peek() == ']' {
		p.i++
		return nil
	}
	for {
		var r ledgerRow
		var err error
		if err = p.expect('['); err != nil {
			return err
		}
		if r.Key, err = p.str(); err != nil {
			return err
		}
		if r.Key == "" {
			return errors.New("empty key")
		}
		if err = p.expect(','); err != nil {
			return err
		}
		var o string
		if o, err = p.str(); err != nil {
			return err
		}
		r.Outcome = schemas.Outcome(o)
		for _, dst := range []*int64{&r.PromptIndex, &r.Sample, &r.Len} {
			if err = p.expect(','); err != nil {
				return err
			}
			if *dst, err = p.int(); err != nil {
				return err
			}
		}
		if r.Len < -1 || r.Sample < -1<<31 || r.Sample >= 1<<31 || r.Len >= 1<<31 {
			return errors.New("row value out of range")
		}
		if err = p.expect(']'); err != nil {
			return err
		}
		l.Rows = append(l.Rows, r)
		p.ws()
		switch p.peek() {
		case ',':
			p.i++
		case ']':
			p.i++
			return nil
		default:
			return fmt.Errorf("%w: want ',' or ']' at byte %d", errSyntax, p.i)
		}
	}
}

// skip skips one JSON value of an unknown field.
func (p *jscan) skip() error {
	p.ws()
	dec := json.NewDecoder(bytes.NewReader([]byte(p.s[p.i:])))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("%w: %v", errSyntax, err)
	}
	p.i += int(dec.InputOffset())
	return nil
}
