package prompts

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// DefaultMaxLineBytes is the longest prompts line accepted before the row is
// rejected as over-long.
const DefaultMaxLineBytes = 4 << 20

// Options configures a Source. The zero value reads one sample per row.
type Options struct {
	Samples      int                            // samples per row; 0 = 1
	MaxLineBytes int                            // 0 = DefaultMaxLineBytes
	Reject       func(schemas.Reject)           // called for every bad line; may be nil
	Filter       func(rec *schemas.Record) bool // false = skip this unit (e.g. another shard's)
	// CheckCwd, when set, is called with every row's cwd (when it has one)
	// before the row becomes work; an error rejects the row (field "cwd",
	// the error's text as the reason, so it should say what to do). The
	// local and ssh sandboxes set it to sandbox.CwdRule.Check: a prompts
	// file is untrusted input and may not bind any folder of the host.
	CheckCwd func(dir string) error
	// NeedImage rejects rows that name no image (image or docker_image),
	// field "image" with ReasonNoImage: set for a sandbox that runs every
	// row in an image (docker) when no default image is given, so such a
	// row goes to rejects.jsonl when it is read, not to a failed record.
	NeedImage bool
}

// ReasonNoImage is the reason of a row rejected by Options.NeedImage.
const ReasonNoImage = "the row names no image (image or docker_image) and no default image is set (--docker-image); --sandbox docker runs every row in an image"

// Source streams records from a prompts file in file order. It is not safe for
// concurrent use: the runtime calls Next from one goroutine.
type Source struct {
	path    string
	f       *os.File
	r       *bufio.Reader
	opts    Options
	line    int
	index   int
	pending []*schemas.Record // records of the last line, from head on
	head    int
	ids     map[string]int // explicit id -> first line
	rows    int
	done    func() func(key string) bool // set by SkipDone
	isDone  func(key string) bool        // Next's predicate, from done
	// keyBuf, keys, keyEnds, scratch and scratchPtr are reused by doneLine.
	keyBuf     []byte
	keys       []byte
	keyEnds    []int
	scratch    []schemas.Record
	scratchPtr []*schemas.Record
}

// Open opens the prompts file. The caller must Close the source.
func Open(path string, opts Options) (*Source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open prompts: %w", err)
	}
	if fi, err := f.Stat(); err != nil || fi.IsDir() {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%s is a folder; give the JSONL file", path)
		}
		return nil, fmt.Errorf("open prompts: %w", err)
	}
	if opts.Samples <= 0 {
		opts.Samples = 1
	}
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultMaxLineBytes
	}
	return &Source{path: path, f: f, r: bufio.NewReaderSize(f, 256<<10), opts: opts, ids: map[string]int{}}, nil
}

// Close releases the file.
func (s *Source) Close() error { return s.f.Close() }

// Total counts the records the source will yield (pipeline.Sizer), so
// progress shows a total, an ETA and a projected spend from the first row:
// one streamed pass over the file with the same options (samples, filter,
// line limit, cwd check; bad lines are not counted and not reported twice),
// holding one line at a time. It returns -1 when the file cannot be read.
// It may run while Next reads (it has its own file and predicate).
func (s *Source) Total() int { return s.TotalContext(context.Background()) }

// TotalContext is Total, returning -1 once ctx is done
// (pipeline.SizerContext).
func (s *Source) TotalContext(ctx context.Context) int {
	opts := s.opts
	opts.Reject = nil
	c, err := Open(s.path, opts)
	if err != nil {
		return -1
	}
	defer c.Close()
	c.SkipDone(s.done)
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

// SkipDone (pipeline.DoneSkipper) gives the source a maker of the output
// folder's "this key is done" predicate (one for Next, one for each count of
// Total, which may run at the same time). A line that cannot hold an id (no `"id"` and
// no escape in its text) and whose every sample's key is done is then not
// parsed: its key is a hash of its text and position, so a done key means
// this very line was valid when it ran. Its records carry only Key,
// PromptIndex and Sample, which is all the runtime reads of a record it
// skips. Resuming a finished 1,000,000-row run reads the file this way.
func (s *Source) SkipDone(done func() func(key string) bool) {
	s.done, s.isDone = done, nil
	if done != nil {
		s.isDone = done()
	}
}

// doneLine returns the records of a line SkipDone lets pass unparsed, or
// false when the line must be parsed. Run keeps no reference to a record it
// skips nor to its key, so the records and their keys live in memory the
// next such line reuses: passing over a done line allocates nothing.
func (s *Source) doneLine(index int, trimmed []byte) ([]*schemas.Record, bool) {
	if s.isDone == nil || bytes.IndexByte(trimmed, '\\') >= 0 || bytes.Contains(trimmed, []byte(`"id"`)) {
		return nil, false
	}
	s.keyBuf = schemas.AppendRowKeyPrefix(s.keyBuf[:0], index, trimmed)
	prefix := len(s.keyBuf)
	s.keys, s.keyEnds = s.keys[:0], s.keyEnds[:0]
	for sample := range s.opts.Samples {
		s.keyBuf = strconv.AppendInt(s.keyBuf[:prefix], int64(sample), 10)
		if !s.isDone(bytesView(s.keyBuf)) {
			return nil, false
		}
		s.keys = append(s.keys, s.keyBuf...)
		s.keyEnds = append(s.keyEnds, len(s.keys))
	}
	if cap(s.scratch) < s.opts.Samples {
		s.scratch = make([]schemas.Record, s.opts.Samples)
	}
	recs := s.scratch[:s.opts.Samples]
	out := s.scratchPtr[:0]
	start := 0
	for sample, end := range s.keyEnds { // s.keys grows no more: its views stay valid
		recs[sample] = schemas.Record{Key: bytesView(s.keys[start:end]), PromptIndex: index, Sample: sample}
		start = end
		if s.opts.Filter == nil || s.opts.Filter(&recs[sample]) {
			out = append(out, &recs[sample])
		}
	}
	s.scratchPtr = out
	return out, true
}

// bytesView is b as a string without a copy; b must not change while the
// string is used.
func bytesView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// Rows is the number of valid rows read so far.
func (s *Source) Rows() int { return s.rows }

// Next returns the next (row, sample) record, or io.EOF after the last one.
// Bad lines are reported through Options.Reject and skipped. It blocks only on
// file reads.
func (s *Source) Next(ctx context.Context) (*schemas.Record, error) {
	for {
		if s.head < len(s.pending) {
			rec := s.pending[s.head]
			s.pending[s.head] = nil
			s.head++
			return rec, nil
		}
		s.pending, s.head = s.pending[:0], 0
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		line, long, err := s.readLine()
		if len(line) == 0 && long == nil && err != nil {
			if errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("read %s line %d: %w", s.path, s.line+1, err)
		}
		s.line++
		if long == nil && len(line) > s.opts.MaxLineBytes {
			// Over the limit but within the read buffer: already in memory.
			long = &overLong{head: line, size: len(line), blank: len(bytes.TrimSpace(line)) == 0}
		}
		if long != nil {
			if long.blank {
				continue
			}
			s.index++
			s.rejectLong(long)
			continue
		}
		if s.line == 1 { // a UTF-8 byte-order mark some editors write
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		}
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) == 0 {
			continue
		}
		index := s.index
		s.index++
		if recs, ok := s.doneLine(index, trimmed); ok {
			s.rows++
			s.pending = append(s.pending, recs...)
			continue
		}
		row, perr := schemas.ParseInputRow(trimmed)
		if perr != nil {
			var fe *schemas.FieldError
			field := ""
			if errors.As(perr, &fe) {
				field = fe.Field
			}
			s.reject(line, field, perr.Error())
			continue
		}
		if row.ID != "" {
			if first, dup := s.ids[row.ID]; dup {
				s.reject(line, "id", fmt.Sprintf("duplicate id %q (first on line %d)", row.ID, first))
				continue
			}
			s.ids[row.ID] = s.line
		}
		row.Line = s.line
		row.Index = index
		if row.Cwd != "" && s.opts.CheckCwd != nil {
			if err := s.opts.CheckCwd(row.Cwd); err != nil {
				s.reject(line, "cwd", err.Error())
				continue
			}
		}
		if row.Image == "" && s.opts.NeedImage {
			s.reject(line, "image", ReasonNoImage)
			continue
		}
		s.rows++
		for sample := 0; sample < s.opts.Samples; sample++ {
			r := row
			rec := &schemas.Record{
				Key:         schemas.RowKey(index, row.ID, trimmed, sample),
				ID:          row.ID,
				PromptIndex: index,
				Sample:      sample,
				Metadata:    row.Metadata,
				Input:       &r,
			}
			if s.opts.Filter != nil && !s.opts.Filter(rec) {
				continue
			}
			s.pending = append(s.pending, rec)
		}
	}
}

// RawHeadBytes is how much of an over-long line its reject keeps as raw.
const RawHeadBytes = 1 << 10

// overLong describes a line longer than Options.MaxLineBytes, read past
// without being held: its first bytes, its length without the newline, and
// whether it held only white space (then it is a blank line, not a row).
type overLong struct {
	head  []byte
	size  int
	blank bool
}

// readLine returns the next line without its newline. A line longer than
// MaxLineBytes is not returned: it is read to its end as a stream, keeping
// only its first RawHeadBytes, and described by the *overLong result, so
// memory stays within MaxLineBytes plus the read buffer whatever the input.
func (s *Source) readLine() ([]byte, *overLong, error) {
	line, err := s.r.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return bytes.TrimRight(line, "\r\n"), nil, err
	}
	buf := append([]byte(nil), line...)
	for len(buf) <= s.opts.MaxLineBytes {
		line, err = s.r.ReadSlice('\n')
		buf = append(buf, line...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return bytes.TrimRight(buf, "\r\n"), nil, err
		}
	}
	long := &overLong{size: len(buf), blank: len(bytes.TrimSpace(buf)) == 0}
	long.head = append([]byte(nil), buf[:RawHeadBytes]...)
	buf = nil
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = s.r.ReadSlice('\n')
		long.size += len(bytes.TrimRight(line, "\r\n"))
		long.blank = long.blank && len(bytes.TrimSpace(line)) == 0
	}
	if errors.Is(err, io.EOF) {
		err = nil // the line is complete; the next read reports the end
	}
	return nil, long, err
}

// rejectLong reports an over-long line with the first RawHeadBytes of its
// text (cut at a character boundary) as raw.
func (s *Source) rejectLong(long *overLong) {
	head := long.head
	if s.line == 1 {
		head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	}
	if len(head) > RawHeadBytes {
		head = head[:RawHeadBytes]
	}
	// Do not split a character: drop an incomplete UTF-8 sequence at the end.
	for i := 1; i <= utf8.UTFMax && i <= len(head); i++ {
		if c := head[len(head)-i]; c < utf8.RuneSelf || utf8.RuneStart(c) {
			if !utf8.FullRune(head[len(head)-i:]) {
				head = head[:len(head)-i]
			}
			break
		}
	}
	s.reject(head, "", fmt.Sprintf("%s line %d is %d bytes, over the %d-byte limit (--max-line-bytes); raw holds its first %d bytes",
		s.path, s.line, long.size, s.opts.MaxLineBytes, len(head)))
}

func (s *Source) reject(line []byte, field, reason string) {
	if s.opts.Reject == nil {
		return
	}
	rj := schemas.Reject{File: s.path, Line: s.line, Field: field, Reason: reason}
	if utf8.Valid(line) {
		rj.Raw = string(line)
	} else {
		rj.Raw = string(bytes.ToValidUTF8(line, []byte("\uFFFD")))
		rj.RawBase64 = base64.StdEncoding.EncodeToString(line)
	}
	s.opts.Reject(rj)
}

// Images scans a prompts file and returns the distinct images its valid rows
// name, in first-seen order. It reads the file once and holds only the image
// set in memory; called before any LLM call so pre-flight can check them all.
// opts checks the rows as a run's source would (NeedImage, CheckCwd, ...),
// its Reject seeing the bad ones; Samples and Filter are ignored.
func Images(path string, opts Options) ([]string, error) {
	opts.Samples, opts.Filter = 1, nil
	src, err := Open(path, opts)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	seen := map[string]bool{}
	var out []string
	for {
		rec, err := src.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if img := rec.Input.Image; img != "" && !seen[img] {
			seen[img] = true
			out = append(out, img)
		}
	}
}

// EachKey calls fn with every key the generate source yields for the prompts
// file at path with the given samples per row and line limit; bad lines are
// rejects, not keys. It reads the whole file and blocks until done; merge
// uses it (as a cluster.KeyLister) to check that shards cover the input.
func EachKey(ctx context.Context, path string, samples, maxLine int, fn func(key string)) error {
	src, err := Open(path, Options{Samples: samples, MaxLineBytes: maxLine})
	if err != nil {
		return fmt.Errorf("check input: %w", err)
	}
	defer src.Close()
	for {
		rec, err := src.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("check input: %w", err)
		}
		fn(rec.Key)
	}
}

// FirstValid reads the prompts file at path until its first valid row, with
// the line limit, cwd and image checks of a run (Options.MaxLineBytes,
// CheckCwd, NeedImage). ok
// is whether there is one; bad is how many bad lines come before it and
// rejects the first keep of them, so a caller can refuse, before it makes anything, a file
// whose every row is bad. An empty file has no valid row and no reject.
func FirstValid(ctx context.Context, path string, opts Options, keep int) (ok bool, bad int, rejects []schemas.Reject, err error) {
	opts.Samples, opts.Filter = 1, nil
	opts.Reject = func(rj schemas.Reject) {
		bad++
		if len(rejects) < keep {
			rejects = append(rejects, rj)
		}
	}
	src, err := Open(path, opts)
	if err != nil {
		return false, 0, nil, err
	}
	defer src.Close()
	_, err = src.Next(ctx)
	if errors.Is(err, io.EOF) {
		return false, bad, rejects, nil
	}
	return err == nil, bad, rejects, err
}
