package outdir

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
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
//
// A line whose records have a cost also carries "cost_usd": the sum of their
// cost_usd (written after "sha256", only when not zero, so a run without
// prices writes the same lines as before and readers that do not know the
// field skip it). The sum of every line's cost_usd, superseded lines
// included, is what the folder's runs have spent: the run budget
// (--max-cost) starts from it, so a crash cannot reset it.
//
// A line may also move committed records: the merge of small shards at the
// end of a run (pipeline/compact.go) writes one line per merged shard whose
// rows re-point their keys to it, the same records byte for byte. Such a
// line carries no cost_usd: the lines that first committed the records
// counted it.

// Row is one row of a ledger line.
type Row struct {
	Key         string
	Outcome     schemas.Outcome
	PromptIndex int64
	Sample      int64
	Len         int64 // bytes in the shard; 1 for a Parquet row; -1 for a marker
}

// Marker reports whether r names a key without a record of its own (its
// length is -1). It says how the row is written, not whether it is live: see
// Line.Record.
func (r *Row) Marker() bool { return r.Len < 0 }

// Line is one ledger line: a committed shard and its rows.
type Line struct {
	Shard  string // relative path (data/shard-00001.jsonl); "" for marker rows only
	Bytes  int64
	SHA256 string
	// CostUSD is what the line's records cost together (0 when unknown or
	// free).
	CostUSD float64
	Rows    []Row
}

// Record is the one live-row rule, with "the latest row of a key wins": a
// ledger's live records are, for each key, its latest row (a later line, or
// a later row of the same line, supersedes an earlier one) when Record says
// that row is a record, a line of its own in l's shard. A marker row, a row
// without length, and any row of a line that names no shard are no record.
// Readers keep the latest row per key in their own table (the runtime's
// ledger index, cluster's view, view's plan, verify) and ask Record of it.
func (l *Line) Record(r *Row) bool { return l.Shard != "" && r.Len > 0 }

// AppendLine encodes l as one ledger line ending in a newline.
func AppendLine(b []byte, l *Line) []byte {
	b = append(b, `{"shard":`...)
	b = appendJSONString(b, l.Shard)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, l.Bytes, 10)
	b = append(b, `,"sha256":`...)
	b = appendJSONString(b, l.SHA256)
	if l.CostUSD != 0 {
		b = append(b, `,"cost_usd":`...)
		b = strconv.AppendFloat(b, l.CostUSD, 'g', -1, 64)
	}
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

// Tail says how a ledger ends.
type Tail struct {
	Size     int64 // bytes scanned
	Good     int64 // bytes up to the end of the last good line
	Lines    int   // good lines
	Torn     bool  // the data ends with a torn or unparsable line, left out
	TornLine int   // its 1-based line number
}

// Scan calls fn with every line of the ledger data in order, reusing one
// Line (fn must copy what it keeps beyond the call, except strings, which
// share data's memory). This is the one rule for a torn end: a last line
// without a newline, or an unparsable last line (a crash mid-append), is
// reported in Tail and left out; an unparsable line before the last one is an
// error naming its line. A whole line naming a shard outside the folder
// (ErrShardPath) is never torn, wherever it is: a crash cannot write it, so
// it is an error (see TornEnd). An error from fn stops the scan and is returned.
// It costs one pass over data and no allocation per line beyond the rows.
func Scan(data string, fn func(n int, l *Line) error) (Tail, error) {
	t := Tail{Size: int64(len(data))}
	var l Line
	pos, n := 0, 0
	for pos < len(data) {
		n++
		i := strings.IndexByte(data[pos:], '\n')
		if i < 0 {
			t.Torn, t.TornLine = true, n
			break
		}
		end := pos + i
		if err := ParseLine(data[pos:end], &l); err != nil {
			if TornEnd(end+1 == len(data), err) {
				t.Torn, t.TornLine = true, n
				break
			}
			return t, fmt.Errorf("ledger line %d: %w", n, err)
		}
		if err := fn(n, &l); err != nil {
			return t, err
		}
		pos = end + 1
		t.Good = int64(pos)
		t.Lines++
	}
	return t, nil
}

// ScanSize is what a reader of the whole ledger knows of its longest line,
// in bytes (newline included) and rows: ScanReader then allocates its
// buffers once. Zero values are fine: the buffers grow.
type ScanSize struct {
	Line, Rows int
}

// ScanReader is Scan over a stream: it reads the ledger from r one line at
// a time, so memory holds one line, not the file. Its strings share a buffer
// the next line overwrites: fn must copy every string it keeps. The torn-end
// rule, the errors and Tail are Scan's.
func ScanReader(r io.Reader, size ScanSize, fn func(n int, l *Line) error) (Tail, error) {
	br := bufio.NewReaderSize(r, min(max(size.Line+1, 4096), 64<<20))
	var t Tail
	l := Line{Rows: make([]Row, 0, size.Rows)}
	var long []byte // a line longer than br's buffer, gathered
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		t.Size += int64(len(line))
		if err != nil && !errors.Is(err, io.EOF) {
			return t, fmt.Errorf("read ledger: %w", err)
		}
		if err != nil { // io.EOF: no newline ends what is left
			if len(line) > 0 {
				t.Torn, t.TornLine = true, n
			}
			return t, nil
		}
		text := unsafe.String(unsafe.SliceData(line), len(line)-1)
		if perr := ParseLine(text, &l); perr != nil {
			_, peek := br.Peek(1)
			if TornEnd(errors.Is(peek, io.EOF), perr) {
				t.Torn, t.TornLine = true, n
				return t, nil
			}
			return t, fmt.Errorf("ledger line %d: %w", n, perr)
		}
		if err := fn(n, &l); err != nil {
			return t, err
		}
		t.Good = t.Size
		t.Lines++
	}
}

// TornEnd is the one torn-end rule for a line the data holds whole (with its
// newline): it reports whether err, from ParseLine on that line, makes it a
// torn end (a crash mid-append: left out) rather than corruption (an error
// naming the line). It is torn when it is the data's last line (last) and
// err is any parse error but ErrShardPath. The data's remainder after its
// last newline is always a torn end. Scan applies it; readers that split a
// ledger their own way (view's plan, verify) call it.
func TornEnd(last bool, err error) bool {
	return last && err != nil && !errors.Is(err, ErrShardPath)
}

// ReadLedger reads the ledger file at path for Scan. Its strings share one
// buffer that is never written afterwards, so keys kept from Scan cost no
// copy. A missing file yields empty data and ok false.
func ReadLedger(path string) (data string, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read ledger: %w", err)
	}
	return unsafe.String(unsafe.SliceData(b), len(b)), true, nil
}

// ParseLine parses one ledger line (without its newline) into l, reusing
// l.Rows. A line whose shard fails ValidShard is an error wrapping
// ErrShardPath; l then holds the whole line as read, so repair can keep its
// rows without the shard. It is a small hand-written JSON reader: encoding/json costs several
// times more, and the ledger is read on every resume. Keys and strings
// without escapes share the line's memory.
func ParseLine(line string, l *Line) error {
	*l = Line{Rows: l.Rows[:0]}
	p := jscan{s: line}
	if err := p.expect('{'); err != nil {
		return err
	}
	first := true
	sawRows := false
	var shardErr error // reported once the rest of the line parsed
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
			if l.Shard, err = p.str(); err == nil && l.Shard != "" {
				shardErr = ValidShard(l.Shard)
			}
		case "bytes":
			l.Bytes, err = p.int()
		case "sha256":
			l.SHA256, err = p.str()
		case "cost_usd":
			l.CostUSD, err = p.float()
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
	return shardErr
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

// float reads a JSON number that must be finite and not negative.
func (p *jscan) float() (float64, error) {
	p.ws()
	start := p.i
	for p.i < len(p.s) && strings.IndexByte("+-.0123456789eE", p.s[p.i]) >= 0 {
		p.i++
	}
	v, err := strconv.ParseFloat(p.s[start:p.i], 64)
	if err != nil || v < 0 || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%w: bad number at byte %d", errSyntax, start)
	}
	return v, nil
}

func (p *jscan) rows(l *Line) error {
	if err := p.expect('['); err != nil {
		return err
	}
	p.ws()
	if p.peek() == ']' {
		p.i++
		return nil
	}
	// Each row starts `["` (a key's quotes are escaped): sized once, not
	// grown by doubling, for the long lines of a big run.
	if n := len(l.Rows) + strings.Count(p.s[p.i:], `["`); cap(l.Rows) < n {
		l.Rows = append(make([]Row, 0, n), l.Rows...)
	}
	for {
		var r Row
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
