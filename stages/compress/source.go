package compress

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/klauspost/compress/zstd"
	"github.com/tidwall/gjson"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// DefaultMaxLineBytes is the longest input line accepted; longer rows are
// rejected (and skipped without being held in memory).
const DefaultMaxLineBytes = 256 << 20

// Input kinds.
const (
	KindJSONL   = "jsonl"
	KindGzip    = "gzip"
	KindZstd    = "zstd"
	KindParquet = "parquet"
	KindRun     = "run" // a hermes-pipe output folder, read through pipeline.Cat
)

// Input is one file or output folder the source reads, in reading order.
type Input struct {
	Path string // as found
	Name string // the name used in keys and rejects: relative to the --in folder, or the base name
	Kind string
}

// ExpandInputs turns --in arguments into the inputs to read, in order (each
// as FindInputs lists it). A missing path or an argument that yields
// nothing is an error.
func ExpandInputs(args []string) ([]Input, error) {
	var out []Input
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", a, err)
		}
		ins, err := FindInputs(a, st.IsDir())
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", a, err)
		}
		if len(ins) == 0 {
			return nil, fmt.Errorf("input %s: no .jsonl, .json, .ndjson (optionally .gz or .zst) or .parquet file and no output folder in it", a)
		}
		out = append(out, ins...)
	}
	return out, nil
}

// FindInputs lists the inputs path p names, in reading order, as compress
// finds them (and `view` again, for the originals): a file is read as JSONL
// unless its name ends in .gz, .zst/.zstd or .parquet; a folder holding
// run.json is a hermes-pipe output folder (its live final records, in
// prompt order); any other folder is walked in name order for *.jsonl,
// *.ndjson, *.json (also .gz/.zst) and *.parquet files, taking output
// folders inside it whole, and named relative to it. Hidden entries are
// skipped. isDir says whether p is a folder; nil means a folder with none.
func FindInputs(p string, isDir bool) ([]Input, error) {
	if !isDir {
		return []Input{{Path: p, Name: filepath.Base(p), Kind: fileKind(p, true)}}, nil
	}
	if isRunDir(p) {
		return []Input{{Path: p, Name: filepath.Base(filepath.Clean(p)), Kind: KindRun}}, nil
	}
	var out []Input
	err := filepath.WalkDir(p, func(q string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if q != p && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(p, q)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if q != p && isRunDir(q) {
				out = append(out, Input{Path: q, Name: rel, Kind: KindRun})
				return filepath.SkipDir
			}
			return nil
		}
		if k := fileKind(q, false); k != "" {
			out = append(out, Input{Path: q, Name: rel, Kind: k})
		}
		return nil
	})
	return out, err
}

func isRunDir(p string) bool {
	_, err := os.Stat(filepath.Join(p, pipeline.ManifestFile))
	return err == nil
}

// fileKind names the reader of a file; with explicit (a file named on the
// command line) unknown names are read as JSONL, else they are skipped ("").
func fileKind(p string, explicit bool) string {
	n := strings.ToLower(filepath.Base(p))
	switch {
	case strings.HasSuffix(n, ".parquet"):
		return KindParquet
	case strings.HasSuffix(n, ".gz"):
		if explicit || isJSONName(strings.TrimSuffix(n, ".gz")) {
			return KindGzip
		}
	case strings.HasSuffix(n, ".zst") || strings.HasSuffix(n, ".zstd"):
		if explicit || isJSONName(strings.TrimSuffix(strings.TrimSuffix(n, ".zst"), ".zstd")) {
			return KindZstd
		}
	case explicit || isJSONName(n):
		return KindJSONL
	}
	return ""
}

func isJSONName(n string) bool {
	return strings.HasSuffix(n, ".jsonl") || strings.HasSuffix(n, ".ndjson") || strings.HasSuffix(n, ".json")
}

// SourceOptions configure a Source. Reject receives every bad row.
type SourceOptions struct {
	Inputs       []Input
	MaxLineBytes int // 0 = DefaultMaxLineBytes
	Reject       func(schemas.Reject)
	// Filter, when set, keeps only the records it accepts (a shard of a run
	// split across machines); the others are skipped silently.
	Filter func(rec *schemas.Record) bool

	// inflight, when set, is taken for each row handed out (not for rows
	// done says the output already holds: the runtime skips those); the
	// stage gives it back.
	inflight *rowBytes
	done     func(key string) bool
}

// Source streams the rows of its inputs as records, in input order. Each
// record carries its line in Raw, a resume key (the row's own "key", else
// input name, line and a hash of the line), and its position: the row's own
// prompt_index and sample when it carries a key (hermes-pipe records), else
// the global position of the row and sample 0, so the output is in input
// order. Bad rows (not JSON, not UTF-8, no conversations array, over-long, a repeated
// key, a retryable outcome) go to Reject. Memory is one line plus a set of
// 8-byte key hashes. Next is called from one goroutine.
type Source struct {
	opts  SourceOptions
	i     int        // current input
	cur   lineReader // open reader of inputs[i]
	pos   int        // rows seen across inputs (blank lines excluded)
	seen  map[uint64]struct{}
	seed  maphash.Seed
	rows  int
	drops int
}

// OpenSource returns a source over opts.Inputs; files are opened one at a
// time as reading reaches them. The caller must Close it.
func OpenSource(opts SourceOptions) *Source {
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultMaxLineBytes
	}
	if opts.Reject == nil {
		opts.Reject = func(schemas.Reject) {}
	}
	return &Source{opts: opts, seen: map[uint64]struct{}{}, seed: maphash.MakeSeed()}
}

// Total counts the records the source will yield (pipeline.Sizer), so
// progress shows a total, an ETA and a projected spend from the first row.
// Only plain JSONL inputs are counted, in one streamed pass with the same
// options (bad rows and another shard's rows left out, no reject reported
// twice); with any compressed, Parquet or run-folder input the count would
// cost a second full decode, so it returns -1 (unknown) and the total comes
// when the inputs are exhausted. It may run while Next reads (it opens the
// inputs apart).
func (s *Source) Total() int { return s.TotalContext(context.Background()) }

// TotalContext is Total, returning -1 once ctx is done
// (pipeline.SizerContext).
func (s *Source) TotalContext(ctx context.Context) int {
	for _, in := range s.opts.Inputs {
		if in.Kind != KindJSONL {
			return -1
		}
	}
	c := OpenSource(SourceOptions{Inputs: s.opts.Inputs, MaxLineBytes: s.opts.MaxLineBytes, Filter: s.opts.Filter})
	defer c.Close()
	n := 0
	for {
		_, err := c.Next(ctx)
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			return -1
		}
		n++
	}
}

// Rows is how many records Next has returned; Rejected how many rows it
// reported bad.
func (s *Source) Rows() int     { return s.rows }
func (s *Source) Rejected() int { return s.drops }

// Close releases the open input, if any.
func (s *Source) Close() error {
	if s.cur != nil {
		err := s.cur.close()
		s.cur = nil
		return err
	}
	return nil
}

// Next returns the next good row, or io.EOF after the last input. It blocks
// on reads only; an unreadable input is an error that stops the run.
func (s *Source) Next(ctx context.Context) (*schemas.Record, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if s.cur == nil {
			if s.i >= len(s.opts.Inputs) {
				return nil, io.EOF
			}
			r, err := openInput(s.opts.Inputs[s.i], s.opts.MaxLineBytes)
			if err != nil {
				return nil, err
			}
			s.cur = r
		}
		in := s.opts.Inputs[s.i]
		line, n, err := s.cur.next()
		if errors.Is(err, io.EOF) {
			cerr := s.cur.close()
			s.cur = nil
			s.i++
			if cerr != nil {
				return nil, fmt.Errorf("read %s: %w", in.Path, cerr)
			}
			continue
		}
		var long *lineTooLong
		if errors.As(err, &long) {
			s.pos++
			s.reject(in, n, "", fmt.Sprintf("line longer than %d bytes", s.opts.MaxLineBytes), long.head)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", in.Path, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		pos := s.pos
		s.pos++
		o, _ := s.cur.(interface{ owned() bool })
		if rec := s.record(in, n, pos, line, o != nil && o.owned()); rec != nil {
			if s.opts.Filter != nil && !s.opts.Filter(rec) {
				continue
			}
			if s.opts.inflight != nil && (s.opts.done == nil || !s.opts.done(rec.Key)) {
				if err := s.opts.inflight.acquire(ctx, len(rec.Raw)); err != nil {
					return nil, err
				}
			}
			s.rows++
			return rec, nil
		}
	}
}

// head is the raw key, prompt_index, sample and outcome members of a line
// (the first of each name), "" when absent.
type head struct{ key, promptIndex, sample, outcome string }

// headOf reads the head of the JSON object line in one walk over its
// members.
func headOf(line []byte) head {
	var h head
	schemas.EachMember(view(line), func(name, raw string) {
		var dst *string
		switch name {
		case schemas.MemberKey:
			dst = &h.key
		case schemas.MemberPromptIndex:
			dst = &h.promptIndex
		case schemas.MemberSample:
			dst = &h.sample
		case schemas.MemberOutcome:
			dst = &h.outcome
		default:
			return
		}
		if *dst == "" {
			*dst = raw
		}
	})
	return h
}

// record checks one line and builds its record; nil when it was rejected.
// An owned line becomes the record's Raw as it is; another is copied.
func (s *Source) record(in Input, lineNo, pos int, line []byte, owned bool) *schemas.Record {
	line = bytes.TrimSpace(line)
	if !gjson.ValidBytes(line) || line[0] != '{' {
		s.reject(in, lineNo, "", "not a JSON object", line)
		return nil
	}
	if field, bad := schemas.InvalidUTF8Field(line); bad {
		// Every string is written as valid UTF-8, so this row could not pass
		// through byte-identical; the reject keeps its exact bytes.
		s.reject(in, lineNo, field, "invalid UTF-8: rows are written as UTF-8 text and this one would change; fix its bytes (raw_base64 holds them)", line)
		return nil
	}
	f := headOf(line)
	if err := checkRow(line); err != nil {
		s.reject(in, lineNo, schemas.MemberConversations, err.Error(), line)
		return nil
	}
	raw := line
	if !owned {
		raw = append([]byte(nil), line...)
	}
	rec := &schemas.Record{PromptIndex: pos, Raw: raw}
	if key, _ := schemas.JSONString(f.key); key != "" {
		rec.Key = strings.Clone(key) // key may point into the reader's buffer
		if schemas.IsJSONNumber(f.promptIndex) {
			rec.PromptIndex = int(schemas.LooseInt(f.promptIndex))
		}
		if schemas.IsJSONNumber(f.sample) {
			rec.Sample = int(schemas.LooseInt(f.sample))
		}
		if oc, ok := schemas.JSONString(f.outcome); ok && schemas.Outcome(oc).Retryable() {
			s.reject(in, lineNo, schemas.MemberOutcome, fmt.Sprintf("record %s has outcome %s: it is waiting for a retry, not a finished trajectory", rec.Key, oc), line)
			return nil
		}
	} else {
		rec.Key = FileKey(in.Name, lineNo, line)
	}
	h := maphash.String(s.seed, rec.Key)
	if _, dup := s.seen[h]; dup {
		s.reject(in, lineNo, schemas.MemberKey, fmt.Sprintf("key %s was already read: the same record is given twice", rec.Key), line)
		return nil
	}
	s.seen[h] = struct{}{}
	return rec
}

func (s *Source) reject(in Input, line int, field, reason string, raw []byte) {
	s.drops++
	r := schemas.Reject{File: in.Path, Line: line, Field: field, Reason: reason}
	const keep = 64 << 10
	if len(raw) > keep {
		raw = raw[:keep]
		r.Reason += fmt.Sprintf(" (raw text cut to its first %d bytes)", keep)
	}
	if utf8.Valid(raw) {
		r.Raw = string(raw)
	} else {
		r.Raw = strings.ToValidUTF8(string(raw), "\uFFFD")
		r.RawBase64 = base64.StdEncoding.EncodeToString(raw)
	}
	s.opts.Reject(r)
}

// lineReader yields the lines of one input. next returns a line without its
// newline (valid until the next call) and its 1-based number, a
// *lineTooLong error for an over-long line (already skipped), or io.EOF.
type lineReader interface {
	next() ([]byte, int, error)
	close() error
}

type lineTooLong struct{ head []byte }

func (e *lineTooLong) Error() string { return "line too long" }

func openInput(in Input, maxLine int) (lineReader, error) {
	switch in.Kind {
	case KindRun:
		return openRun(in.Path, maxLine), nil
	case KindParquet:
		r, err := openParquet(in.Path)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", in.Path, err)
		}
		return r, nil
	}
	r, err := openStream(in.Path, in.Kind)
	if err != nil {
		return nil, err
	}
	return newJSONLReader(r, maxLine, r), nil
}

// openStream opens a file and its decompressor, if any.
func openStream(path, kind string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open input: %w", err)
	}
	switch kind {
	case KindGzip:
		zr, err := gzip.NewReader(bufio.NewReaderSize(f, 256<<10))
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("open %s: gzip: %w", path, err)
		}
		return &stream{Reader: zr, closers: []io.Closer{zr, f}}, nil
	case KindZstd:
		zr, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("open %s: zstd: %w", path, err)
		}
		return &stream{Reader: zr, closers: []io.Closer{zstdCloser{zr}, f}}, nil
	}
	return f, nil
}

// stream is a decompressing reader that closes its layers in order.
type stream struct {
	io.Reader
	closers []io.Closer
}

func (s *stream) Close() error {
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

type zstdCloser struct{ d *zstd.Decoder }

func (z zstdCloser) Close() error { z.d.Close(); return nil }

// jsonlReader splits a stream into lines with one reusable buffer. A line
// longer than the read buffer is gathered chunk by chunk and copied once
// into a slice of its exact size, which the caller may keep (owned): a
// long row is held once, not in a growing buffer and a copy of it.
type jsonlReader struct {
	r       *bufio.Reader
	max     int
	line    int
	buf     []byte
	chunks  [][]byte
	own     bool // the last line returned is a fresh slice the caller may keep
	closers []io.Closer
}

// owned reports whether the last line next returned may be kept as is.
func (j *jsonlReader) owned() bool { return j.own }

// gather returns the line made of j.chunks and last, in a slice of its own.
func (j *jsonlReader) gather(last []byte) []byte {
	n := len(last)
	for _, c := range j.chunks {
		n += len(c)
	}
	out := make([]byte, 0, n)
	for _, c := range j.chunks {
		out = append(out, c...)
	}
	out = append(out, last...)
	j.chunks, j.own = nil, true
	return out
}

func newJSONLReader(r io.Reader, max int, closers ...io.Closer) *jsonlReader {
	return &jsonlReader{r: bufio.NewReaderSize(r, 256<<10), max: max, closers: closers}
}

func (j *jsonlReader) next() ([]byte, int, error) {
	j.buf, j.chunks, j.own = j.buf[:0], nil, false
	j.line++
	size := 0
	for {
		chunk, err := j.r.ReadSlice('\n')
		if size+len(chunk) > j.max {
			var head []byte
			for _, c := range append(j.chunks, chunk) {
				head = append(head, c[:min(len(c), 64<<10-len(head))]...)
				if len(head) >= 64<<10 {
					break
				}
			}
			j.chunks = nil
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = j.r.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, j.line, err
			}
			return nil, j.line, &lineTooLong{head: head}
		}
		size += len(chunk)
		switch {
		case err == nil:
			if j.chunks != nil {
				return bytes.TrimRight(j.gather(chunk), "\r\n"), j.line, nil
			}
			j.buf = append(j.buf, chunk...)
			return bytes.TrimRight(j.buf, "\r\n"), j.line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			j.chunks = append(j.chunks, append([]byte(nil), chunk...))
			continue
		case errors.Is(err, io.EOF):
			if size == 0 {
				return nil, j.line, io.EOF
			}
			if j.chunks != nil {
				return j.gather(chunk), j.line, nil
			}
			j.buf = append(j.buf, chunk...)
			return j.buf, j.line, nil
		default:
			j.chunks = nil
			return nil, j.line, err
		}
	}
}

func (j *jsonlReader) close() error {
	var errs []error
	for _, c := range j.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// openRun streams the live final records of an output folder through
// pipeline.CatWith in a goroutine; close stops it.
func openRun(dir string, maxLine int) lineReader {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := pipeline.CatWith(dir, pw, pipeline.CatOptions{Final: true})
		pw.CloseWithError(err)
		done <- err
	}()
	return &runReader{jsonlReader: newJSONLReader(pr, maxLine), pr: pr, done: done}
}

type runReader struct {
	*jsonlReader
	pr   *io.PipeReader
	done chan error
}

func (r *runReader) close() error {
	r.pr.CloseWithError(errors.New("input closed"))
	err := <-r.done
	if err != nil && strings.Contains(err.Error(), "input closed") {
		err = nil
	}
	return err
}
