package pipeline

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// FormatJSONL is the default shard format: one JSON object per line.
const FormatJSONL = "jsonl"

// ShardWriter writes the records of one shard to a file. Run creates one per
// shard commit, calls WriteRecord for each record in shard order and Close
// once; it never calls them concurrently. A Parquet writer plugs in here.
type ShardWriter interface {
	// WriteRecord appends rec, whose EncodeRecord form is line (no newline),
	// and returns the number of bytes the record occupies in the file, or 0
	// when the format has no per-record byte ranges.
	WriteRecord(rec *schemas.Record, line []byte) (int64, error)
	// Close flushes everything to the underlying writer; it does not close it.
	Close() error
}

// shardFormat describes one output format.
type shardFormat struct {
	name      string
	ext       string
	newWriter func(w io.Writer) ShardWriter
}

// formatByName returns the format called name; "" means JSONL.
func formatByName(name string) (shardFormat, error) {
	switch name {
	case "", FormatJSONL:
		return shardFormat{name: FormatJSONL, ext: ".jsonl", newWriter: newJSONLWriter}, nil
	}
	return shardFormat{}, fmt.Errorf("unknown output format %q (supported: %s)", name, FormatJSONL)
}

type jsonlWriter struct{ w *bufio.Writer }

func newJSONLWriter(w io.Writer) ShardWriter { return &jsonlWriter{w: bufio.NewWriterSize(w, 256<<10)} }

func (j *jsonlWriter) WriteRecord(_ *schemas.Record, line []byte) (int64, error) {
	if _, err := j.w.Write(line); err != nil {
		return 0, err
	}
	if err := j.w.WriteByte('\n'); err != nil {
		return 0, err
	}
	return int64(len(line)) + 1, nil
}

func (j *jsonlWriter) Close() error { return j.w.Flush() }

// EncodeRecord returns the output line of rec without a trailing newline:
// rec.Raw verbatim when set (compacted only if it spans several lines), else
// the JSON of the record's fields with <, > and & left unescaped, as Hermes
// writes them. Workers call it once per finished record.
func EncodeRecord(rec *schemas.Record) ([]byte, error) {
	if len(rec.Raw) > 0 {
		if !json.Valid(rec.Raw) {
			return nil, fmt.Errorf("encode record %s: raw is not valid JSON", rec.Key)
		}
		raw := bytes.TrimSpace(rec.Raw)
		if raw[0] != '{' {
			return nil, fmt.Errorf("encode record %s: raw is not a JSON object", rec.Key)
		}
		if bytes.ContainsAny(raw, "\r\n") {
			var b bytes.Buffer
			if err := json.Compact(&b, raw); err != nil {
				return nil, fmt.Errorf("encode record %s: %w", rec.Key, err)
			}
			raw = b.Bytes()
		}
		return append([]byte(nil), raw...), nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rec); err != nil {
		return nil, fmt.Errorf("encode record %s: %w", rec.Key, err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

// shardName returns the file name of shard number n.
func shardName(n int, ext string) string {
	return fmt.Sprintf("shard-%05d%s", n, ext)
}

// shardNumber parses the number out of a shard path such as
// data/shard-00012.jsonl.
func shardNumber(p string) (int, bool) {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[i+1:]
	}
	if !strings.HasPrefix(p, "shard-") {
		return 0, false
	}
	p = p[len("shard-"):]
	dot := strings.IndexByte(p, '.')
	if dot < 1 {
		return 0, false
	}
	n, err := strconv.Atoi(p[:dot])
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
