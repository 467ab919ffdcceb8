package pipeline

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// FormatJSONL is the default shard format: one JSON object per line.
const FormatJSONL = outdir.FormatJSONL

// ShardWriter writes the records of one shard to a file. Run creates one per
// shard commit, calls WriteRecord for each record in shard order and Close
// once; it never calls them concurrently. A Parquet writer plugs in here.
type ShardWriter interface {
	// WriteRecord appends rec, whose EncodeRecord form is line (no newline),
	// and returns the record's length in the ledger: the number of bytes it
	// occupies in the file (JSONL), or 1 for a format addressed by row
	// (Parquet), so that the ledger offset of a record is its row number.
	// rec and line must not change until Close returns: the Parquet writer
	// builds row groups from them in the background.
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
	case FormatParquet:
		return shardFormat{name: FormatParquet, ext: parquetExt, newWriter: newParquetWriter}, nil
	}
	return shardFormat{}, fmt.Errorf("unknown output format %q (supported: %s, %s)", name, FormatJSONL, FormatParquet)
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
//
// The line is always valid UTF-8: every byte that does not start a valid
// UTF-8 sequence becomes U+FFFD, the rule encoding/json applies to Go
// strings, here applied also to raw JSON (Raw, Metadata, Extra) that
// encoding/json copies through unchecked. Every shard format stores strings
// taken from this line, so JSONL and Parquet agree byte for byte.
func EncodeRecord(rec *schemas.Record) ([]byte, error) {
	line, err := encodeRecord(rec)
	if err != nil {
		return nil, err
	}
	return validUTF8(line), nil
}

// validUTF8 returns s with every byte that does not start a valid UTF-8
// sequence replaced by U+FFFD; when s is valid it returns s itself without
// copying. Validation runs at several GB/s.
func validUTF8(s []byte) []byte {
	if utf8.Valid(s) {
		return s
	}
	dst := make([]byte, 0, len(s)+32)
	for len(s) > 0 {
		r, n := utf8.DecodeRune(s)
		if r == utf8.RuneError && n == 1 {
			dst = utf8.AppendRune(dst, utf8.RuneError)
		} else {
			dst = append(dst, s[:n]...)
		}
		s = s[n:]
	}
	return dst
}

func encodeRecord(rec *schemas.Record) ([]byte, error) {
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
	return fmt.Sprintf("%s%05d%s", outdir.ShardPrefix, n, ext)
}

// shardNumber parses the number out of a shard path such as
// data/shard-00012.jsonl.
func shardNumber(p string) (int, bool) {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[i+1:]
	}
	p, ok := strings.CutPrefix(p, outdir.ShardPrefix)
	if !ok {
		return 0, false
	}
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
