package pipeline

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// FormatParquet writes shards as Parquet files (zstd), one record a row.
const FormatParquet = "parquet"

// parquetRowGroupBytes ends a row group once its records' JSON lines reach
// this size, so readers (Cat among them) never hold more than about this much
// text per row group; a shard is 64 MiB of lines by default. Tests lower it.
var parquetRowGroupBytes int64 = 8 << 20

const (
	parquetExt = ".parquet"
	// parquetSchemaKey names the key-value metadata entry that versions the
	// schema below.
	parquetSchemaKey     = "hermes_pipe.schema"
	parquetSchemaVersion = "1"
	// parquetLineColumn is the column holding each record's JSONL line.
	parquetLineColumn = "raw_json"
)

// parquetRecord is one row of a Parquet shard. The schema serves two kinds
// of reader:
//
//   - External readers (DuckDB, pyarrow, Hugging Face datasets) get every
//     record field as a column. conversations is a LIST of STRUCT<from:
//     string, value: string>. usage and reasoning_stats have a fixed set of
//     fields and are STRUCTs. tool_stats, tool_error_counts, metadata and
//     extra have no fixed keys (tool names vary from run to run, metadata is
//     the user's), so they are JSON text in STRING columns: a STRUCT would
//     give shards of one dataset different schemas, and Hugging Face
//     datasets has no MAP feature.
//   - hermes-pipe itself (Cat, Stats, Verify, resume) reads raw_json, which
//     holds exactly the line the JSONL format writes for the record
//     (EncodeRecord output), so every field of a verbatim record (compress
//     keeps all of its input's fields, in order) survives and Cat prints the
//     same bytes for both formats.
//
// Every typed column is a projection of raw_json: it holds the value of the
// field of the same name in the line, null when the field is absent, null or
// of another JSON type (a conversations turn whose from or value is not a
// string holds that value's JSON text). key, prompt_index, sample and outcome
// are the runtime's values, never null; for records of plain fields they equal
// the line's. Strings in the line are valid UTF-8 (see EncodeRecord); JSON
// escapes decode as encoding/json decodes them, so a lone UTF-16 surrogate
// escape in a verbatim record reads back as U+FFFD.
type parquetRecord struct {
	Key             string            `parquet:"key"`
	ID              *string           `parquet:"id,optional"`
	PromptIndex     int64             `parquet:"prompt_index"`
	Sample          int64             `parquet:"sample"`
	Conversations   []parquetTurn     `parquet:"conversations,list,optional"`
	Outcome         string            `parquet:"outcome,dict"`
	Completed       *bool             `parquet:"completed,optional"`
	Partial         *bool             `parquet:"partial,optional"`
	APICalls        *int64            `parquet:"api_calls,optional"`
	Usage           *parquetUsage     `parquet:"usage,optional"`
	CostUSD         *float64          `parquet:"cost_usd,optional"`
	ToolsetsUsed    []string          `parquet:"toolsets_used,list,optional"`
	ToolStats       *string           `parquet:"tool_stats,optional"`
	ToolErrorCounts *string           `parquet:"tool_error_counts,optional"`
	ReasoningStats  *parquetReasoning `parquet:"reasoning_stats,optional"`
	Model           *string           `parquet:"model,optional,dict"`
	DurationMS      *int64            `parquet:"duration_ms,optional"`
	Error           *string           `parquet:"error,optional"`
	Metadata        *string           `parquet:"metadata,optional"`
	Extra           *string           `parquet:"extra,optional"`
	RawJSON         string            `parquet:"raw_json"`
}

// parquetTurn is one ShareGPT turn.
type parquetTurn struct {
	From  string `parquet:"from,dict"`
	Value string `parquet:"value"`
}

// parquetUsage mirrors schemas.Usage.
type parquetUsage struct {
	PromptTokens       int64 `parquet:"prompt_tokens"`
	CompletionTokens   int64 `parquet:"completion_tokens"`
	TotalTokens        int64 `parquet:"total_tokens"`
	CachedPromptTokens int64 `parquet:"cached_prompt_tokens"`
	ReasoningTokens    int64 `parquet:"reasoning_tokens"`
}

// parquetReasoning mirrors schemas.ReasoningStats.
type parquetReasoning struct {
	TotalAssistantTurns   int64 `parquet:"total_assistant_turns"`
	TurnsWithReasoning    int64 `parquet:"turns_with_reasoning"`
	TurnsWithoutReasoning int64 `parquet:"turns_without_reasoning"`
	HasAnyReasoning       bool  `parquet:"has_any_reasoning"`
}

// parquetSchema is the schema of every Parquet shard.
var parquetSchema = parquet.SchemaOf(new(parquetRecord))

// parquetWriter is the ShardWriter of the Parquet format. It keeps one row
// group in memory (column buffers, about twice the group's text) and
// compresses pages with zstd as they fill, at zstd's fastest level: the
// default level costs a fifth of the throughput (about 55 instead of 67 MB/s
// of JSON on one core) for files about 7% smaller. Each record's text is
// stored twice (typed columns and raw_json), so a shard is about 0.6 times
// the size of the JSONL lines of agent trajectories.
type parquetWriter struct {
	w          *parquet.GenericWriter[parquetRecord]
	rows       [1]parquetRecord
	scratch    parquetScratch
	groupBytes int64
}

func newParquetWriter(w io.Writer) ShardWriter {
	return &parquetWriter{w: parquet.NewGenericWriter[parquetRecord](w, parquetSchema,
		parquet.Compression(&zstd.Codec{Level: zstd.SpeedFastest}),
		parquet.DataPageStatistics(false),
		// Min/max bounds of long text are useless for filtering and cost a
		// comparison per value.
		parquet.SkipPageBounds(parquetLineColumn),
		parquet.SkipPageBounds("conversations", "list", "element", "value"),
		parquet.SkipPageBounds("tool_stats"), parquet.SkipPageBounds("tool_error_counts"),
		parquet.SkipPageBounds("metadata"), parquet.SkipPageBounds("extra"), parquet.SkipPageBounds("error"),
		parquet.KeyValueMetadata(parquetSchemaKey, parquetSchemaVersion),
	)}
}

// WriteRecord adds one row built from line and returns 1: Parquet records
// are addressed by row number. It ends the row group when the group's text
// reaches parquetRowGroupBytes.
func (p *parquetWriter) WriteRecord(rec *schemas.Record, line []byte) (int64, error) {
	// The row's strings point into line; Write copies them into the column
	// buffers before returning, and line is not modified meanwhile.
	s := unsafe.String(unsafe.SliceData(line), len(line))
	parquetRowOf(&p.rows[0], &p.scratch, rec.Key, string(rec.Outcome), int64(rec.PromptIndex), int64(rec.Sample), s)
	if _, err := p.w.Write(p.rows[:]); err != nil {
		return 0, fmt.Errorf("parquet row: %w", err)
	}
	p.groupBytes += int64(len(line))
	if p.groupBytes >= parquetRowGroupBytes {
		p.groupBytes = 0
		if err := p.w.Flush(); err != nil {
			return 0, fmt.Errorf("parquet row group: %w", err)
		}
	}
	return 1, nil
}

// Close writes the last row group and the footer.
func (p *parquetWriter) Close() error {
	if err := p.w.Close(); err != nil {
		return fmt.Errorf("parquet footer: %w", err)
	}
	return nil
}

// parquetScratch holds the values the optional columns of one row point at,
// so building a row allocates nothing but unescaped strings.
type parquetScratch struct {
	id, model, errStr                    string
	toolStats, toolErrs, metadata, extra string
	completed, partial                   bool
	apiCalls, duration                   int64
	cost                                 float64
	usage                                parquetUsage
	reasoning                            parquetReasoning
}

// parquetRowOf fills row from the runtime's key, outcome and position and
// from line, a record's JSONL line (a JSON object in valid UTF-8). Strings in
// row share line's memory unless they had escapes. It never fails: a field
// that does not parse as its column's type is null.
func parquetRowOf(row *parquetRecord, sc *parquetScratch, key, outcome string, pi, sample int64, line string) {
	convs, tools := row.Conversations[:0], row.ToolsetsUsed[:0]
	*row = parquetRecord{Key: key, Outcome: outcome, PromptIndex: pi, Sample: sample, RawJSON: line}
	str := func(dst *string, raw string) *string {
		v, ok := jsonString(raw)
		if !ok {
			return nil
		}
		*dst = v
		return dst
	}
	integer := func(dst *int64, raw string) *int64 {
		v, ok := jsonInt(raw)
		if !ok {
			return nil
		}
		*dst = v
		return dst
	}
	boolean := func(dst *bool, raw string) *bool {
		switch raw {
		case "true":
			*dst = true
		case "false":
			*dst = false
		default:
			return nil
		}
		return dst
	}
	object := func(dst *string, raw string) *string {
		if raw == "" || raw[0] != '{' {
			return nil
		}
		*dst = raw
		return dst
	}
	jsonMembers(line, func(name, raw string) {
		switch name {
		case "id":
			row.ID = str(&sc.id, raw)
		case "conversations":
			row.Conversations = jsonList(convs, raw, parquetTurnOf)
		case "completed":
			row.Completed = boolean(&sc.completed, raw)
		case "partial":
			row.Partial = boolean(&sc.partial, raw)
		case "api_calls":
			row.APICalls = integer(&sc.apiCalls, raw)
		case "usage":
			row.Usage = jsonStruct(&sc.usage, raw)
		case "cost_usd":
			row.CostUSD = nil
			if v, err := strconv.ParseFloat(raw, 64); err == nil {
				sc.cost = v
				row.CostUSD = &sc.cost
			}
		case "toolsets_used":
			row.ToolsetsUsed = jsonList(tools, raw, textOf)
		case "tool_stats":
			row.ToolStats = object(&sc.toolStats, raw)
		case "tool_error_counts":
			row.ToolErrorCounts = object(&sc.toolErrs, raw)
		case "reasoning_stats":
			row.ReasoningStats = jsonStruct(&sc.reasoning, raw)
		case "model":
			row.Model = str(&sc.model, raw)
		case "duration_ms":
			row.DurationMS = integer(&sc.duration, raw)
		case "error":
			row.Error = str(&sc.errStr, raw)
		case "metadata":
			row.Metadata = nil
			if raw != "null" {
				sc.metadata = raw
				row.Metadata = &sc.metadata
			}
		case "extra":
			row.Extra = object(&sc.extra, raw)
		}
	})
}

// jsonList returns the elements of the JSON array raw, each converted by
// elem, in buf's memory; an empty array gives an empty slice, and any other
// JSON value gives nil (a null column).
func jsonList[T any](buf []T, raw string, elem func(raw string) T) []T {
	if raw[0] != '[' {
		return nil
	}
	buf = buf[:0]
	jsonElements(raw, func(v string) { buf = append(buf, elem(v)) })
	if buf == nil {
		buf = []T{}
	}
	return buf
}

// jsonFields is a STRUCT column of fixed fields read from a JSON object.
type jsonFields[T any] interface {
	*T
	// setField stores the raw JSON value of the member name, if it is a field.
	setField(name, raw string)
}

// jsonStruct fills *dst from the members of the JSON object raw (fields it
// does not name stay zero) and returns dst, or nil (a null column) when raw
// is another JSON value.
func jsonStruct[T any, P jsonFields[T]](dst P, raw string) P {
	if raw[0] != '{' {
		return nil
	}
	*dst = *new(T)
	jsonMembers(raw, dst.setField)
	return dst
}

func (u *parquetUsage) setField(name, raw string) {
	n, _ := jsonInt(raw)
	switch name {
	case "prompt_tokens":
		u.PromptTokens = n
	case "completion_tokens":
		u.CompletionTokens = n
	case "total_tokens":
		u.TotalTokens = n
	case "cached_prompt_tokens":
		u.CachedPromptTokens = n
	case "reasoning_tokens":
		u.ReasoningTokens = n
	}
}

func (r *parquetReasoning) setField(name, raw string) {
	n, _ := jsonInt(raw)
	switch name {
	case "total_assistant_turns":
		r.TotalAssistantTurns = n
	case "turns_with_reasoning":
		r.TurnsWithReasoning = n
	case "turns_without_reasoning":
		r.TurnsWithoutReasoning = n
	case "has_any_reasoning":
		r.HasAnyReasoning = raw == "true"
	}
}

// parquetTurnOf returns the from and value of a conversations element; a
// member that is not a string holds its JSON text, and an element that is
// not an object gives an empty turn.
func parquetTurnOf(raw string) parquetTurn {
	var t parquetTurn
	if raw[0] == '{' {
		jsonMembers(raw, func(k, v string) {
			switch k {
			case "from":
				t.From = textOf(v)
			case "value":
				t.Value = textOf(v)
			}
		})
	}
	return t
}

// textOf returns a JSON string's value, or the JSON text of any other value.
func textOf(raw string) string {
	if s, ok := jsonString(raw); ok {
		return s
	}
	return raw
}

// jsonMembers calls fn with the name and raw value of each member of the
// JSON object s, in order. s must be valid JSON; the raw values share its
// memory.
func jsonMembers(s string, fn func(name, raw string)) {
	i := jsonSpace(s, 1)
	for i < len(s) && s[i] == '"' {
		end := jsonSkip(s, i)
		name, _ := jsonString(s[i:end])
		i = jsonSpace(s, end)
		i = jsonSpace(s, i+1) // ':'
		end = jsonSkip(s, i)
		fn(name, s[i:end])
		i = jsonSpace(s, end)
		if i < len(s) && s[i] == ',' {
			i = jsonSpace(s, i+1)
		}
	}
}

// jsonElements calls fn with each raw element of the JSON array s.
func jsonElements(s string, fn func(raw string)) {
	i := jsonSpace(s, 1)
	for i < len(s) && s[i] != ']' {
		end := jsonSkip(s, i)
		fn(s[i:end])
		i = jsonSpace(s, end)
		if i < len(s) && s[i] == ',' {
			i = jsonSpace(s, i+1)
		}
	}
}

func jsonSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// jsonSkip returns the end of the JSON value starting at s[i].
func jsonSkip(s string, i int) int {
	switch s[i] {
	case '"':
		return jsonStringEnd(s, i)
	case '{', '[':
		depth := 0
		for i < len(s) {
			switch s[i] {
			case '"':
				i = jsonStringEnd(s, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(s)
	}
	for i < len(s) {
		switch s[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// jsonStringEnd returns the index after the closing quote of the string
// starting at s[i]: the first quote not escaped by an odd run of
// backslashes.
func jsonStringEnd(s string, i int) int {
	i++
	for {
		j := strings.IndexByte(s[i:], '"')
		if j < 0 {
			return len(s)
		}
		i += j
		k := i
		for k > 0 && s[k-1] == '\\' {
			k--
		}
		i++
		if (i-1-k)%2 == 0 {
			return i
		}
	}
}

// jsonString decodes the JSON string raw as encoding/json does (an invalid
// or unpaired surrogate escape becomes U+FFFD). Without escapes it returns a
// substring of raw.
func jsonString(raw string) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	s := raw[1 : len(raw)-1]
	first := strings.IndexByte(s, '\\')
	if first < 0 {
		return s, true
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[:first]...)
	for i := first; i < len(s); {
		c := s[i]
		if c != '\\' {
			j := strings.IndexByte(s[i:], '\\')
			if j < 0 {
				j = len(s) - i
			}
			b = append(b, s[i:i+j]...)
			i += j
			continue
		}
		if i+1 >= len(s) {
			return "", false
		}
		switch s[i+1] {
		case '"', '\\', '/':
			b = append(b, s[i+1])
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r := hex4(s, i+2)
			if r < 0 {
				return "", false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				if r2 := hex4u(s, i); r2 >= 0 {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						i += 6
						b = utf8.AppendRune(b, d)
						continue
					}
				}
				r = utf8.RuneError
			}
			b = utf8.AppendRune(b, r)
			continue
		default:
			return "", false
		}
		i += 2
	}
	return unsafe.String(unsafe.SliceData(b), len(b)), true
}

// hex4u returns the rune of a \uXXXX escape at s[i], or -1.
func hex4u(s string, i int) rune {
	if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
		return hex4(s, i+2)
	}
	return -1
}

// hex4 parses four hex digits at s[i], or returns -1.
func hex4(s string, i int) rune {
	if i+4 > len(s) {
		return -1
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// jsonInt returns the JSON number raw as an int64 when it is integral and in
// range (1e3 and 2.0 count), else false.
func jsonInt(raw string) (int64, bool) {
	if v, err := strconv.ParseInt(raw, 10, 64); err == nil {
		return v, true
	}
	if raw == "" || !(raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		return 0, false
	}
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

// openParquet opens the Parquet shard rel of the folder dir (through
// outdir.OpenShard) and checks its schema. The caller closes the returned
// file.
func openParquet(dir, rel string) (*os.File, *parquet.File, error) {
	path := rel
	f, err := outdir.OpenShard(dir, rel)
	if err != nil {
		return nil, nil, fmt.Errorf("open shard: %w", err)
	}
	fi, err := f.Stat()
	if err == nil {
		var pf *parquet.File
		if pf, err = parquetOpen(f, fi.Size(), parquet.SkipPageIndex(true)); err == nil {
			return f, pf, nil
		}
	}
	f.Close()
	return nil, nil, fmt.Errorf("read parquet shard %s: %w", path, err)
}

// parquetOpen reads the footer of the Parquet shard of size bytes behind r
// and checks that its schema is the record schema; opts add to skipping the
// bloom filters.
func parquetOpen(r io.ReaderAt, size int64, opts ...parquet.FileOption) (*parquet.File, error) {
	pf, err := parquet.OpenFile(r, size, append(opts, parquet.SkipBloomFilters(true))...)
	if err != nil {
		return nil, fmt.Errorf("not a whole parquet file: %w", err)
	}
	if !parquet.EqualNodes(pf.Schema(), parquetSchema) {
		return nil, errors.New("schema is not the hermes-pipe record schema")
	}
	return pf, nil
}

// readParquetRows calls fn with every row of pf in order; the row and its
// strings are valid during the call only. It reads every column, 256 rows at
// a time.
func readParquetRows(pf *parquet.File, fn func(i int, row *parquetRecord) error) error {
	r := parquet.NewGenericReader[parquetRecord](pf, parquetSchema)
	defer r.Close()
	buf := make([]parquetRecord, 256)
	i := 0
	for {
		n, err := r.Read(buf)
		for k := range buf[:n] {
			if ferr := fn(i, &buf[k]); ferr != nil {
				return ferr
			}
			i++
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("row %d: %w", i+1, err)
		}
	}
}

// scanParquetOrphan validates the Parquet shard at dir/rel and builds its
// ledger line from its key, outcome and position columns; see scanOrphan.
func scanParquetOrphan(dir, rel string) (*ledgerLine, error) {
	data, err := readShard(dir, rel)
	if err != nil {
		return nil, err
	}
	pf, err := parquetOpen(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	l := &ledgerLine{Shard: rel, Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	failed := strings.HasPrefix(rel, FailedDir+"/")
	err = readParquetRows(pf, func(i int, row *parquetRecord) error {
		oc := schemas.Outcome(row.Outcome)
		if row.Key == "" || oc == "" {
			return fmt.Errorf("row %d: no key or outcome", i+1)
		}
		if oc.Retryable() != failed {
			return fmt.Errorf("row %d: outcome %s does not belong in %s", i+1, oc, rel)
		}
		l.Rows = append(l.Rows, ledgerRow{Key: strings.Clone(row.Key), Outcome: schemas.Outcome(strings.Clone(row.Outcome)), PromptIndex: row.PromptIndex, Sample: row.Sample, Len: 1})
		if row.CostUSD != nil {
			l.CostUSD += *row.CostUSD
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// verifyParquet checks the rows of a Parquet shard against the ledger rows
// that committed it (record rows only): one row per ledger row with the same
// key, outcome and position, length 1, a raw_json line that passes the
// record checks, and typed columns that equal what the line projects to.
func (v *verifier) verifyParquet(n int, shard, sub string, data []byte, rows []ledgerRow) {
	pf, err := parquetOpen(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		v.add(shard, 0, "%v", err)
		return
	}
	if got := pf.NumRows(); got != int64(len(rows)) {
		v.add(shard, 0, "has %d rows, ledger line %d lists %d records", got, n, len(rows))
	}
	var want parquetRecord
	var sc parquetScratch
	err = readParquetRows(pf, func(i int, row *parquetRecord) error {
		rowNo := i + 1
		v.rep.Records++
		var lr *ledgerRow
		if i < len(rows) {
			lr = &rows[i]
			if lr.Len != 1 {
				v.add(shard, rowNo, "ledger line %d gives the row length %d, want 1", n, lr.Len)
			}
			if row.Key != lr.Key || row.Outcome != string(lr.Outcome) || row.PromptIndex != lr.PromptIndex || row.Sample != lr.Sample {
				v.add(shard, rowNo, "row is %s %s (%d, %d), ledger line %d says %s %s (%d, %d)",
					row.Key, row.Outcome, row.PromptIndex, row.Sample, n, lr.Key, lr.Outcome, lr.PromptIndex, lr.Sample)
			}
		} else {
			v.add(shard, rowNo, "row not listed in ledger line %d", n)
		}
		line := []byte(row.RawJSON)
		if !utf8.Valid(line) {
			v.add(shard, rowNo, "raw_json is not valid UTF-8")
		}
		v.record(shard, sub, rowNo, line, lr)
		if len(line) > 0 && line[0] == '{' && json.Valid(line) {
			parquetRowOf(&want, &sc, row.Key, row.Outcome, row.PromptIndex, row.Sample, row.RawJSON)
			if !reflect.DeepEqual(&want, row) {
				v.add(shard, rowNo, "typed columns differ from raw_json")
			}
		}
		return nil
	})
	if err != nil {
		v.add(shard, 0, "unreadable: %v", err)
	}
}

// parquetLines serves Cat the raw_json line of a row of a Parquet shard. It
// decodes the raw_json column of one row group at a time and keeps the last
// four, so records read in an order that alternates between a few shards (as
// after resumes) decode each group once. Memory is about four row groups of
// text (parquetRowGroupBytes each).
type parquetLines struct {
	dir    string
	files  map[string]*parquetShard
	groups []*parquetGroup // most recent last
}

type parquetShard struct {
	f     *os.File
	pf    *parquet.File
	col   int
	start []int64 // first row of each row group
}

type parquetGroup struct {
	shard string
	first int64
	text  []byte
	ends  []int // end of each row's line in text
}

func newParquetLines(dir string) *parquetLines {
	return &parquetLines{dir: dir, files: map[string]*parquetShard{}}
}

func (p *parquetLines) close() {
	for _, s := range p.files {
		s.f.Close()
	}
}

// line returns the raw_json of row of shard (a path relative to the output
// folder) followed by a newline. The slice is valid until the next call.
func (p *parquetLines) line(shard string, row int64) ([]byte, error) {
	for k := len(p.groups) - 1; k >= 0; k-- {
		g := p.groups[k]
		if g.shard == shard && row >= g.first && row < g.first+int64(len(g.ends)) {
			return g.row(row), nil
		}
	}
	s, err := p.shard(shard)
	if err != nil {
		return nil, err
	}
	gi := len(s.start) - 1
	for gi >= 0 && s.start[gi] > row {
		gi--
	}
	rgs := s.pf.RowGroups()
	if gi < 0 || row >= s.start[gi]+rgs[gi].NumRows() {
		return nil, fmt.Errorf("%s: no row %d: the ledger and the shard disagree (run verify)", shard, row)
	}
	g := &parquetGroup{shard: shard, first: s.start[gi]}
	if len(p.groups) == 4 {
		g.text, g.ends = p.groups[0].text[:0], p.groups[0].ends[:0]
		p.groups = append(p.groups[:0], p.groups[1:]...)
	}
	if err := g.load(rgs[gi], s.col); err != nil {
		return nil, fmt.Errorf("read %s row group %d: %w", shard, gi, err)
	}
	p.groups = append(p.groups, g)
	return g.row(row), nil
}

func (p *parquetLines) shard(name string) (*parquetShard, error) {
	if s, ok := p.files[name]; ok {
		return s, nil
	}
	if len(p.files) >= 64 {
		for k, s := range p.files {
			s.f.Close()
			delete(p.files, k)
			break
		}
	}
	f, pf, err := openParquet(p.dir, name)
	if err != nil {
		return nil, err
	}
	leaf, _ := parquetSchema.Lookup(parquetLineColumn)
	s := &parquetShard{f: f, pf: pf, col: leaf.ColumnIndex}
	var start int64
	for _, rg := range pf.RowGroups() {
		s.start = append(s.start, start)
		start += rg.NumRows()
	}
	p.files[name] = s
	return s, nil
}

func (g *parquetGroup) row(row int64) []byte {
	i := int(row - g.first)
	start := 0
	if i > 0 {
		start = g.ends[i-1]
	}
	return g.text[start:g.ends[i]]
}

// load decodes the raw_json column of rg, appending a newline to each line.
func (g *parquetGroup) load(rg parquet.RowGroup, col int) error {
	pages := rg.ColumnChunks()[col].Pages()
	defer pages.Close()
	vals := make([]parquet.Value, 64)
	for {
		page, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		r := page.Values()
		for {
			n, err := r.ReadValues(vals)
			for _, v := range vals[:n] {
				g.text = append(g.text, v.ByteArray()...)
				g.text = append(g.text, '\n')
				g.ends = append(g.ends, len(g.text))
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				parquet.Release(page)
				return err
			}
		}
		parquet.Release(page)
	}
	if int64(len(g.ends)) != rg.NumRows() {
		return fmt.Errorf("%d values for %d rows", len(g.ends), rg.NumRows())
	}
	return nil
}
