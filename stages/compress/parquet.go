package compress

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/hermes-pipe/hermes-pipe/schemas/pyjson"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// rawJSONColumn is the column in which hermes-pipe Parquet shards keep each
// record's exact JSON line.
const rawJSONColumn = "raw_json"

// parquetReader yields the rows of a Parquet file as JSON lines: the
// raw_json column verbatim when the file has one (a hermes-pipe shard), else
// each row converted to a JSON object with its columns in schema order
// (lists as arrays, groups as objects, byte arrays as strings when they are
// text, else base64). Rows are read in batches of 64; memory is one batch.
type parquetReader struct {
	f      *os.File
	raw    *parquet.GenericReader[rawRow]
	rows   *parquet.GenericReader[map[string]any]
	maps   []map[string]any
	schema *parquet.Schema
	buf    []rawRow
	pend   []rawRow
	line   int
	out    []byte
}

type rawRow struct {
	RawJSON string `parquet:"raw_json"`
}

func openParquet(path string) (lineReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipBloomFilters(true))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("parquet: %w", err)
	}
	r := &parquetReader{f: f, schema: pf.Schema()}
	if col, ok := pf.Schema().Lookup(rawJSONColumn); ok && col.Node.Type().Kind() == parquet.ByteArray && col.Node.Leaf() {
		r.raw = parquet.NewGenericReader[rawRow](pf)
		r.buf = make([]rawRow, 64)
	} else {
		r.rows = parquet.NewGenericReader[map[string]any](pf, pf.Schema())
		r.maps = make([]map[string]any, 1)
	}
	return r, nil
}

func (r *parquetReader) next() ([]byte, int, error) {
	r.line++
	if r.raw != nil {
		if len(r.pend) == 0 {
			n, err := r.raw.Read(r.buf)
			if n == 0 {
				if err == nil {
					err = io.EOF
				}
				return nil, r.line, err
			}
			r.pend = r.buf[:n]
		}
		line := r.pend[0].RawJSON
		r.pend = r.pend[1:]
		return []byte(line), r.line, nil
	}
	r.maps[0] = map[string]any{}
	n, err := r.rows.Read(r.maps)
	if n == 0 {
		if err == nil {
			err = io.EOF
		}
		return nil, r.line, err
	}
	r.out = appendGroup(r.out[:0], r.schema, r.maps[0])
	return r.out, r.line, nil
}

func (r *parquetReader) close() error {
	var errs []error
	if r.raw != nil {
		errs = append(errs, r.raw.Close())
	}
	if r.rows != nil {
		errs = append(errs, r.rows.Close())
	}
	errs = append(errs, r.f.Close())
	return errors.Join(errs...)
}

// appendGroup writes the object of a group node, members in schema order.
func appendGroup(b []byte, n parquet.Node, v any) []byte {
	m, _ := v.(map[string]any)
	b = append(b, '{')
	for i, f := range n.Fields() {
		if i > 0 {
			b = append(b, ',')
		}
		b = pyjson.AppendString(b, f.Name())
		b = append(b, ':')
		b = appendNode(b, f, m[f.Name()])
	}
	return append(b, '}')
}

// appendNode writes the value v of node n as JSON.
func appendNode(b []byte, n parquet.Node, v any) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	if isLogical[*format.ListType](n) && !n.Leaf() {
		// LIST: group { repeated group list { element } }; reconstructed as
		// a slice of elements or of {"element": ...} maps.
		elem := n
		if fs := n.Fields(); len(fs) == 1 {
			elem = fs[0]
			if fs2 := elem.Fields(); len(fs2) == 1 && !elem.Leaf() {
				elem = fs2[0]
			}
		}
		items, _ := v.([]any)
		b = append(b, '[')
		for i, it := range items {
			if i > 0 {
				b = append(b, ',')
			}
			if m, ok := it.(map[string]any); ok && len(m) == 1 {
				if e, ok := m["element"]; ok {
					it = e
				}
			}
			b = appendNode(b, elem, it)
		}
		return append(b, ']')
	}
	if items, ok := v.([]any); ok && n.Repeated() {
		b = append(b, '[')
		for i, it := range items {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, n, it)
		}
		return append(b, ']')
	}
	return appendValue(b, n, v)
}

// appendValue writes one non-repeated value.
func appendValue(b []byte, n parquet.Node, v any) []byte {
	if !n.Leaf() {
		if _, ok := v.(map[string]any); ok {
			return appendGroup(b, n, v)
		}
	}
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case string:
		return appendText(b, x)
	case []byte:
		if isLogical[*format.StringType](n) || isLogical[*format.JsonType](n) || isLogical[*format.EnumType](n) || validText(x) {
			if isLogical[*format.JsonType](n) && json.Valid(x) {
				return append(b, x...)
			}
			return appendText(b, string(x))
		}
		return pyjson.AppendString(b, base64.StdEncoding.EncodeToString(x))
	case bool:
		return strconv.AppendBool(b, x)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case int32:
		return strconv.AppendInt(b, int64(x), 10)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case uint32:
		return strconv.AppendUint(b, uint64(x), 10)
	case uint64:
		return strconv.AppendUint(b, x, 10)
	case float32:
		return appendFloat(b, float64(x))
	case float64:
		return appendFloat(b, x)
	case time.Time:
		return pyjson.AppendString(b, x.Format(time.RFC3339Nano))
	case []any:
		b = append(b, '[')
		for i, it := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, n, it)
		}
		return append(b, ']')
	case map[string]any:
		keys := slices.Sorted(maps.Keys(x))
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = pyjson.AppendString(b, k)
			b = append(b, ':')
			b = appendValue(b, n, x[k])
		}
		return append(b, '}')
	}
	enc, err := json.Marshal(v)
	if err != nil {
		return pyjson.AppendString(b, fmt.Sprint(v))
	}
	return append(b, enc...)
}

// isLogical reports whether node n carries the logical type T.
func isLogical[T format.LogicalTypeValue](n parquet.Node) bool {
	lt := n.Type().LogicalType()
	if lt == nil {
		return false
	}
	_, ok := lt.Value.(T)
	return ok
}

func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// appendText writes s as a JSON string. Text that is not valid UTF-8 keeps
// its bytes (everything else escaped as usual) instead of becoming U+FFFD,
// so the source sees the row as it is and rejects it, naming the column,
// rather than passing on a silently changed row.
func appendText(b []byte, s string) []byte {
	if utf8.ValidString(s) {
		return pyjson.AppendString(b, s)
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, fmt.Sprintf(`\u%04x`, c)...)
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

func validText(x []byte) bool {
	for _, c := range x {
		if c < 0x20 && c != '\n' && c != '\r' && c != '\t' {
			return false
		}
	}
	return utf8.Valid(x)
}
