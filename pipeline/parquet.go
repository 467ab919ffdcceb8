package pipeline

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	pzstd "github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/format"
)

// FormatParquet writes shards as Parquet files (zstd; raw_json snappy), one
// record a row.
const FormatParquet = "parquet"

// parquetRowGroupBytes ends a row group once its records' JSON lines reach
// this size, so readers (Cat among them) never hold more than about this much
// text per row group; a shard is 64 MiB of lines by default. Tests lower it.
var parquetRowGroupBytes int64 = 8 << 20

const (
	parquetExt = ".parquet"
	// parquetSchemaKey names the key-value metadata entry that versions the
	// schema below.
	parquetSchemaKey = "hermes_pipe.schema"
	// parquetSchemaVersion is the version of parquetSchema; every earlier
	// one is still read (parquetSchemas, parquetAddedIn).
	parquetSchemaVersion = "3"
	// parquetLineColumn is the column holding each record's JSONL line.
	parquetLineColumn = "raw_json"
)

// parquetRecord is one row of a Parquet shard. The schema serves two kinds
// of reader:
//
//   - External readers (DuckDB, pyarrow, Hugging Face datasets) get every
//     record field as a column. conversations is a LIST of STRUCT<from:
//     string, value: string>. usage, reasoning_stats, timings and grade have
//     a fixed set of fields and are STRUCTs, logprobs a LIST of STRUCTs; reward
//     is a DOUBLE. tool_stats, tool_error_counts, metadata and
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
	Key             string
	ID              *string `parquet:",optional"`
	PromptIndex     int64
	Sample          int64
	Conversations   []parquetTurn     `parquet:",list,optional"`
	Outcome         string            `parquet:",dict"`
	Success         *bool             `parquet:",optional"`
	Completed       *bool             `parquet:",optional"`
	Partial         *bool             `parquet:",optional"`
	APICalls        *int64            `parquet:",optional"`
	Usage           *parquetUsage     `parquet:",optional"`
	CostUSD         *float64          `parquet:",optional"`
	ToolsetsUsed    []string          `parquet:",list,optional"`
	ToolStats       *string           `parquet:",optional"`
	ToolErrorCounts *string           `parquet:",optional"`
	ReasoningStats  *parquetReasoning `parquet:",optional"`
	Model           *string           `parquet:",optional,dict"`
	DurationMS      *int64            `parquet:",optional"`
	Timings         *parquetTimings   `parquet:",optional"`
	Reward          *float64          `parquet:",optional"`
	Grade           *parquetGrade     `parquet:",optional"`
	Error           *string           `parquet:",optional"`
	Metadata        *string           `parquet:",optional"`
	Extra           *string           `parquet:",optional"`
	Logprobs        []parquetLogprobs `parquet:",list,optional"`
	RawJSON         string            `parquet:"raw_json"`
}

// parquetAddedIn is the schema version that added each column of
// parquetRecord (by Go field name) after version 1; the schema of version v
// is parquetRecord without the columns added after v (parquetSchemaAt).
var parquetAddedIn = map[string]int{
	"Success": 2,
	"Timings": 3, "Reward": 3, "Grade": 3, "Logprobs": 3,
}

// parquetTurn is one ShareGPT turn (schemas.Turn).
type parquetTurn struct {
	From  string `parquet:",dict"`
	Value string
}

// parquetUsage mirrors schemas.Usage.
type parquetUsage struct {
	PromptTokens       int64
	CompletionTokens   int64
	TotalTokens        int64
	CachedPromptTokens int64
	ReasoningTokens    int64
}

// parquetTimings mirrors schemas.Timings.
type parquetTimings struct {
	ModelMS        int64
	ToolMS         int64
	SandboxStartMS int64
	SandboxCloseMS int64
	QueueMS        int64
	GraderMS       int64
}

// parquetGrade mirrors schemas.Grade: passed and value are null when the
// grader failed (or the line's member is not a boolean, a number); grader,
// output and error are "" when absent, the JSON text of another value.
type parquetGrade struct {
	Grader     string   `parquet:",dict"`
	Passed     *bool    `parquet:",optional"`
	Value      *float64 `parquet:",optional"`
	Output     string
	DurationMS int64
	Error      string
}

// parquetLogprobs mirrors schemas.TurnLogprobs. A list is null when the
// line's member is absent or not an array, and logprobs or token_ids is also
// null when one of its elements is not a number (an integer); a token that
// is not a string holds its JSON text.
type parquetLogprobs struct {
	Turn     int64
	Tokens   []string  `parquet:",list,optional"`
	Logprobs []float64 `parquet:",list,optional"`
	TokenIDs []int64   `parquet:",list,optional"`
}

// parquetReasoning mirrors schemas.ReasoningStats.
type parquetReasoning struct {
	TotalAssistantTurns int64
	TurnsWithReasoning  int64
	TurnsWithoutReason  int64
	HasAnyReasoning     bool
}

// The column names are not spelled here: each is the JSON name (schemas'
// tag) of the field of the same Go name in the schemas type the row type
// mirrors (parquetRecord: schemas.Record, parquetTurn: schemas.Turn, ...),
// so a record's shape is declared once. A field the schemas type lacks
// keeps its own tag (raw_json). The ...Columns hold the names of the
// nested types in field order, for the code that fills them.
var (
	turnColumns      = parquetColumns(reflect.TypeFor[parquetTurn](), reflect.TypeFor[schemas.Turn](), nil, nil)
	usageColumns     = parquetColumns(reflect.TypeFor[parquetUsage](), reflect.TypeFor[schemas.Usage](), nil, nil)
	reasoningColumns = parquetColumns(reflect.TypeFor[parquetReasoning](), reflect.TypeFor[schemas.ReasoningStats](), nil, nil)
	timingsColumns   = parquetColumns(reflect.TypeFor[parquetTimings](), reflect.TypeFor[schemas.Timings](), nil, nil)
	gradeColumns     = parquetColumns(reflect.TypeFor[parquetGrade](), reflect.TypeFor[schemas.Grade](), nil, nil)
	logprobsColumns  = parquetColumns(reflect.TypeFor[parquetLogprobs](), reflect.TypeFor[schemas.TurnLogprobs](), nil, nil)
)

// parquetSchemaConfig names the columns of parquetRecord (the tags
// parquetColumns derives); the writer and reader get it with the schema.
var parquetSchemaConfig = sync.OnceValue(func() *parquet.SchemaConfig {
	var tags []parquet.StructTagOption
	parquetColumns(reflect.TypeFor[parquetRecord](), reflect.TypeFor[schemas.Record](), nil, &tags)
	return &parquet.SchemaConfig{StructTags: tags}
})

// parquetSchema is the schema of every Parquet shard hermes-pipe writes.
var parquetSchema = sync.OnceValue(func() *parquet.Schema { return parquet.SchemaOf(new(parquetRecord), parquetSchemaConfig()) })

// parquetLineCodec compresses the raw_json column; nil leaves it to the
// writer's default (zstd).
var parquetLineCodec compress.Codec = snappyCodec{}

// parquetWriteSchema is parquetSchema with raw_json compressed by
// parquetLineCodec: the writer takes each column's codec from its schema
// node. Codecs are not part of a schema's identity (parquet.EqualNodes), so
// readers check shards against parquetSchema.
var parquetWriteSchema = sync.OnceValue(func() *parquet.Schema {
	if parquetLineCodec == nil {
		return parquetSchema()
	}
	fields := slices.Clone(parquetSchema().Fields())
	for i, f := range fields {
		if f.Name() == parquetLineColumn {
			fields[i] = codecField{f, parquetLineCodec}
		}
	}
	return parquet.NewSchema(parquetSchema().Name(), rootFields{parquetSchema(), fields})
})

// rootFields is a schema's root node with other fields.
type rootFields struct {
	parquet.Node
	fields []parquet.Field
}

func (r rootFields) Fields() []parquet.Field { return r.fields }

// codecField is a field compressed with codec.
type codecField struct {
	parquet.Field
	codec compress.Codec
}

func (f codecField) Compression() compress.Codec { return f.codec }

// snappyCodec is Parquet's SNAPPY codec at snappy's speed: parquet-go's own
// encodes with S2's "better" snappy-compatible mode, a few times slower for
// output a tenth smaller. Any snappy decoder reads it.
type snappyCodec struct{}

func (snappyCodec) String() string                            { return "SNAPPY" }
func (snappyCodec) CompressionCodec() format.CompressionCodec { return format.Snappy }

func (snappyCodec) Encode(dst, src []byte) ([]byte, error) {
	n := s2.MaxEncodedLen(len(src))
	if n < 0 {
		return nil, errors.New("snappy: page too large")
	}
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	return s2.EncodeSnappy(dst[:n], src), nil
}

func (snappyCodec) Decode(dst, src []byte) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return nil, err
	}
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	return s2.Decode(dst[:n], src)
}

// zstdCodec is Parquet's ZSTD codec at zstd's fastest level, compressing
// with parquetZstd, whose encoders live as long as the process.
// parquet-go's own codec keeps its encoders in a sync.Pool, which every
// garbage collection empties: each new encoder then allocates and zeroes an
// 8 MiB history, about two per shard in BenchmarkParquetWrite, and that
// garbage brings the next collection sooner.
type zstdCodec struct{}

// parquetZstd is the encoder of zstdCodec: one per row group in flight
// (more could not run at once), each with a history of twice its window,
// allocated on first use. The window (1 MiB, zstd's fastest level has 4)
// holds a whole page (parquet.PageBufferSize, 256 KiB, plus one row), so
// pages compress as with any larger window, into the same bytes.
var parquetZstd = sync.OnceValue(func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil,
		zstd.WithEncoderConcurrency(parquetGroupsInFlight),
		// The level before the window: it sets the level's block size,
		// which a window set first would keep from it.
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithWindowSize(1<<20),
		zstd.WithZeroFrames(true),
		zstd.WithEncoderCRC(false),
	)
	if err != nil {
		panic(err)
	}
	return e
})

func (zstdCodec) String() string                            { return "ZSTD" }
func (zstdCodec) CompressionCodec() format.CompressionCodec { return format.Zstd }

func (zstdCodec) Encode(dst, src []byte) ([]byte, error) {
	return parquetZstd().EncodeAll(src, dst[:0]), nil
}

// Decode is parquet-go's: the writer never decodes, and readers take the
// codec named in a file's metadata.
func (zstdCodec) Decode(dst, src []byte) ([]byte, error) {
	return zstdDecoder.Decode(dst, src)
}

var zstdDecoder pzstd.Codec

// parquetSchemas are the schemas of every version shards were written with,
// oldest first (index v-1 is version v; the last is parquetSchema). Readers
// accept each, so output folders of earlier versions stay readable and
// resumable: a column a version lacks reads as null, as the lines of its
// records lack the member (success before version 2; timings, reward, grade
// and logprobs before version 3).
var parquetSchemas = sync.OnceValue(func() []*parquet.Schema {
	n, err := strconv.Atoi(parquetSchemaVersion)
	if err != nil {
		panic(err)
	}
	var all []*parquet.Schema
	for v := 1; v < n; v++ {
		all = append(all, parquetSchemaAt(v))
	}
	return append(all, parquetSchema())
})

// parquetSchemaAt is the schema of version v: parquetRecord without the
// columns parquetAddedIn says came later.
func parquetSchemaAt(v int) *parquet.Schema {
	rt := reflect.TypeFor[parquetRecord]()
	var fields []reflect.StructField
	for i := range rt.NumField() {
		if f := rt.Field(i); parquetAddedIn[f.Name] <= v {
			fields = append(fields, f)
		}
	}
	t := reflect.StructOf(fields)
	var tags []parquet.StructTagOption
	parquetColumns(t, reflect.TypeFor[schemas.Record](), nil, &tags)
	return parquet.SchemaOf(reflect.New(t).Interface(), &parquet.SchemaConfig{StructTags: tags})
}

// parquetColumns returns the column names of the fields of the Parquet row
// type pt, in order: the JSON name of st's field of the same Go name, or ""
// where st has none (the field keeps its tag). With tags it adds the tag
// options naming them (the field's own tag holds its Parquet options) for
// the columns below path, and for those of the struct fields inside.
func parquetColumns(pt, st reflect.Type, path []string, tags *[]parquet.StructTagOption) []string {
	names := make([]string, pt.NumField())
	for i := range pt.NumField() {
		f := pt.Field(i)
		sf, ok := st.FieldByName(f.Name)
		if !ok {
			continue
		}
		names[i], _, _ = strings.Cut(sf.Tag.Get("json"), ",")
		if tags == nil {
			continue
		}
		opts := f.Tag.Get("parquet")
		*tags = append(*tags, parquet.StructTagOption{StructTag: reflect.StructTag(`parquet:"` + names[i] + opts + `"`), ColumnPath: append(slices.Clip(path), f.Name)})
		inner, sinner, below := f.Type, sf.Type, append(slices.Clip(path), names[i])
		if inner.Kind() == reflect.Slice {
			inner, sinner, below = inner.Elem(), sinner.Elem(), append(below, "list", "element")
		}
		for inner.Kind() == reflect.Pointer {
			inner = inner.Elem()
		}
		for sinner.Kind() == reflect.Pointer {
			sinner = sinner.Elem()
		}
		if inner.Kind() == reflect.Struct {
			parquetColumns(inner, sinner, below, tags)
		}
	}
	return names
}

// parquetWriter is the ShardWriter of the Parquet format. WriteRecord adds
// each record to the row group being filled; once the group's lines reach
// parquetRowGroupBytes it goes to a goroutine that builds its rows and
// compresses its pages (a parquet.ConcurrentRowGroupWriter) while the next
// group fills; a group's raw_json column fills and compresses in a goroutine
// of its own beside its typed columns (see build). Groups are committed to
// the file in order, at most parquetGroupsInFlight of them pending, so a
// shard is written on up to twice that many cores; the file is the one a
// serial writer makes. Memory is the
// column buffers and compressed pages of the groups in flight (about 0.6
// times their text each); the lines themselves are the caller's (see
// ShardWriter).
//
// Each record's text is stored twice, in the typed columns and in raw_json,
// and compressing both copies is most of the writer's CPU (about 85% with
// zstd on both, BenchmarkParquetWrite's profile; building rows is under
// 10%). The typed columns, which external readers use, are zstd at its
// fastest level (the default level costs a fifth of the throughput for
// files about 7% smaller). raw_json, the copy hermes-pipe itself reads (Cat,
// Stats, Verify, resume), is snappy (parquetLineCodec): it compresses
// several times faster and decodes several times faster than zstd. On
// BenchmarkParquetWrite's agent trajectories, measured back to back on a
// loaded 2-core machine: zstd on both copies makes shards of 0.595 times
// the lines; snappy raw_json makes them 0.698 times (17% larger) for about
// a quarter less CPU per MB written, and BenchmarkParquetCat reads them
// about 1.5 times as fast; snappy on every column would take about half the
// CPU of zstd on both for shards of 0.80 times the lines. As things are, the
// profile is zstd about half of the CPU, snappy a quarter, and building rows
// (reading the lines, parquet-go's rows and column buffers) the rest, spread
// thin; on one core the writer does about 83 MB of lines per CPU-second,
// and snappy on every column would do about 108.
type parquetWriter struct {
	w        *parquet.GenericWriter[parquetRecord]
	fill     parquetPending     // the group being filled
	inflight []*parquetGroupJob // in file order
	err      error              // the first failure; the writer is unusable after it
}

// parquetGroupsInFlight is how many row groups a writer builds and
// compresses at once. It is 4 whatever the number of cores, as more groups
// than cores keep every core busy to a shard's end: a group takes time in
// proportion to its size, and a shard's last group is partial, so with one
// group per core the cores that finish first idle while the last full group
// is still compressing; with more the scheduler shares the cores among them.
// Four bounds the memory (see parquetWriter).
const parquetGroupsInFlight = 4

// parquetPending is the records of one row group, as WriteRecord got them.
type parquetPending struct {
	recs  []*schemas.Record
	lines [][]byte
	bytes int64
}

// parquetGroupJob is a row group being built in its own goroutine; done
// receives the result once its pages are compressed.
type parquetGroupJob struct {
	rg   *parquet.ConcurrentRowGroupWriter
	g    parquetPending
	done chan error
}

func newParquetWriter(w io.Writer) ShardWriter {
	return &parquetWriter{w: parquet.NewGenericWriter[parquetRecord](w, parquetWriteSchema(), parquetSchemaConfig(),
		parquet.Compression(zstdCodec{}),
		parquet.DataPageStatistics(false),
		// Min/max bounds of long text are useless for filtering and cost a
		// comparison per value.
		parquet.SkipPageBounds(parquetLineColumn),
		parquet.SkipPageBounds(schemas.MemberConversations, "list", "element", schemas.TurnValue),
		parquet.SkipPageBounds(schemas.MemberToolStats), parquet.SkipPageBounds(schemas.MemberToolErrorCounts),
		parquet.SkipPageBounds(schemas.MemberMetadata), parquet.SkipPageBounds(schemas.MemberExtra), parquet.SkipPageBounds(schemas.MemberError),
		parquet.SkipPageBounds(schemas.MemberGrade, gradeColumns[3]), parquet.SkipPageBounds(schemas.MemberGrade, gradeColumns[5]),
		parquet.KeyValueMetadata(parquetSchemaKey, parquetSchemaVersion),
	)}
}

// WriteRecord adds one row built from line and returns 1: Parquet records
// are addressed by row number. It blocks only when parquetGroupsInFlight
// groups are being built, until the oldest is committed.
func (p *parquetWriter) WriteRecord(rec *schemas.Record, line []byte) (int64, error) {
	if p.err != nil {
		return 0, p.err
	}
	g := &p.fill
	g.recs = append(g.recs, rec)
	g.lines = append(g.lines, line)
	g.bytes += int64(len(line))
	if g.bytes >= parquetRowGroupBytes {
		if err := p.startGroup(); err != nil {
			return 0, err
		}
	}
	return 1, nil
}

// startGroup hands the group being filled to a goroutine, after committing
// the oldest group in flight when there are parquetGroupsInFlight of them.
func (p *parquetWriter) startGroup() error {
	if len(p.fill.recs) == 0 {
		return nil
	}
	if len(p.inflight) >= parquetGroupsInFlight {
		if err := p.commitOldest(); err != nil {
			return err
		}
	}
	job := &parquetGroupJob{rg: p.w.BeginRowGroup(), g: p.fill, done: make(chan error, 1)}
	p.fill = parquetPending{}
	p.inflight = append(p.inflight, job)
	go func() { job.done <- job.build() }()
	return nil
}

// commitOldest waits for the oldest group in flight and writes it to the
// file.
func (p *parquetWriter) commitOldest() error {
	job := p.inflight[0]
	p.inflight = p.inflight[1:]
	err := <-job.done
	if err == nil {
		if _, cerr := job.rg.Commit(); cerr != nil {
			err = fmt.Errorf("parquet row group: %w", cerr)
		}
	}
	if err != nil {
		p.fail(err)
	}
	return err
}

// fail keeps the first error and waits for the other groups in flight,
// dropping their results.
func (p *parquetWriter) fail(err error) {
	if p.err == nil {
		p.err = err
	}
	for _, job := range p.inflight {
		<-job.done
	}
	p.inflight = nil
}

// build writes the group's rows to its row group writer and compresses the
// last pages. It runs in its own goroutine and touches nothing else but the
// one it starts: the raw_json column, a third of the group's work, fills
// and compresses its pages there while this one builds the typed columns,
// so the last group of a shard, which nothing overlaps, takes two cores
// when there are two. Each column gets its values one row at a time, as
// ConcurrentRowGroupWriter.WriteRows gives them, so its pages end where
// that would end them.
func (j *parquetGroupJob) build() error {
	cols := j.rg.ColumnWriters()
	lines := make(chan error, 1)
	go func() { lines <- writeLines(cols[parquetLineIndex()], j.g.lines) }()
	err := j.buildTyped(cols)
	if lerr := <-lines; err == nil {
		err = lerr
	}
	if err != nil {
		return err
	}
	if err := j.rg.Flush(); err != nil {
		return fmt.Errorf("parquet row group: %w", err)
	}
	return nil
}

// parquetLineIndex is the index of the raw_json leaf in parquetWriteSchema.
var parquetLineIndex = sync.OnceValue(func() int {
	leaf, ok := parquetWriteSchema().Lookup(parquetLineColumn)
	if !ok {
		panic("no " + parquetLineColumn + " column")
	}
	return leaf.ColumnIndex
})

// buildTyped writes every column of the group's rows but raw_json.
func (j *parquetGroupJob) buildTyped(cols []*parquet.ColumnWriter) error {
	var rec parquetRecord
	var sc parquetScratch
	var row parquet.Row
	schema, lineIndex := parquetSchema(), parquetLineIndex()
	for i, r := range j.g.recs {
		// The row's strings point into the line (and sc); WriteRowValues
		// copies them into the column buffers before the next row reuses sc.
		line := j.g.lines[i]
		parquetRowOf(&rec, &sc, r.Key, string(r.Outcome), int64(r.PromptIndex), int64(r.Sample), unsafe.String(unsafe.SliceData(line), len(line)))
		row = schema.Deconstruct(row[:0], &rec)
		for c, vals := range row.Range {
			if c == lineIndex {
				continue
			}
			if _, err := cols[c].WriteRowValues(vals); err != nil {
				return fmt.Errorf("parquet row: %w", err)
			}
		}
	}
	return nil
}

// writeLines writes lines to the raw_json column writer col, one row each,
// and compresses its last page.
func writeLines(col *parquet.ColumnWriter, lines [][]byte) error {
	var v [1]parquet.Value
	lineIndex := parquetLineIndex()
	for _, line := range lines {
		v[0] = parquet.ByteArrayValue(line).Level(0, 0, lineIndex)
		if _, err := col.WriteRowValues(v[:]); err != nil {
			return fmt.Errorf("parquet row: %w", err)
		}
	}
	if err := col.Flush(); err != nil {
		return fmt.Errorf("parquet row group: %w", err)
	}
	return nil
}

// Close writes the remaining row groups and the footer.
func (p *parquetWriter) Close() error {
	if p.err == nil {
		p.err = p.startGroup()
	}
	for p.err == nil && len(p.inflight) > 0 {
		_ = p.commitOldest()
	}
	if p.err != nil {
		p.fail(p.err)
		return p.err
	}
	if err := p.w.Close(); err != nil {
		return fmt.Errorf("parquet footer: %w", err)
	}
	return nil
}

// parquetScratch holds the values the optional columns of one row point at,
// and the decoded text of the row's strings that had escapes, so building a
// row allocates nothing once the scratch has grown to the largest row.
type parquetScratch struct {
	text                                 []byte
	id, model, errStr                    string
	toolStats, toolErrs, metadata, extra string
	success, completed, partial          bool
	apiCalls, duration                   int64
	cost                                 float64
	usage                                parquetUsage
	reasoning                            parquetReasoning
	graded                               parquetGraded
}

// parquetGraded holds what the columns of a graded record (reward, grade,
// timings, logprobs) point at.
type parquetGraded struct {
	reward, value float64
	passed        bool
	timings       parquetTimings
	grade         parquetGrade
}

// parquetRowOf fills row from the runtime's key, outcome and position and
// from line, a record's JSONL line (a JSON object in valid UTF-8). Strings in
// row share line's memory unless they had escapes. It never fails: a field
// that does not parse as its column's type is null.
func parquetRowOf(row *parquetRecord, sc *parquetScratch, key, outcome string, pi, sample int64, line string) {
	convs, tools, lps := row.Conversations[:0], row.ToolsetsUsed[:0], row.Logprobs[:0]
	*row = parquetRecord{Key: key, Outcome: outcome, PromptIndex: pi, Sample: sample, RawJSON: line}
	sc.text = sc.text[:0]
	str := func(dst *string, raw string) *string {
		v, ok := sc.jsonString(raw)
		if !ok {
			return nil
		}
		*dst = v
		return dst
	}
	integer := func(dst *int64, raw string) *int64 {
		v, ok := schemas.JSONInt(raw)
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
	schemas.EachMember(line, func(name, raw string) {
		switch name {
		case schemas.MemberID:
			row.ID = str(&sc.id, raw)
		case schemas.MemberConversations:
			row.Conversations = jsonList(convs, raw, sc.turn)
		case schemas.MemberSuccess:
			row.Success = boolean(&sc.success, raw)
		case schemas.MemberCompleted:
			row.Completed = boolean(&sc.completed, raw)
		case schemas.MemberPartial:
			row.Partial = boolean(&sc.partial, raw)
		case schemas.MemberAPICalls:
			row.APICalls = integer(&sc.apiCalls, raw)
		case schemas.MemberUsage:
			row.Usage = jsonStruct(&sc.usage, raw)
		case schemas.MemberCostUSD:
			row.CostUSD = nil
			if raw == "null" { // an unpriced record: no ParseFloat error to allocate
				break
			}
			if v, err := strconv.ParseFloat(raw, 64); err == nil {
				sc.cost = v
				row.CostUSD = &sc.cost
			}
		case schemas.MemberToolsetsUsed:
			row.ToolsetsUsed = jsonList(tools, raw, sc.jsonText)
		case schemas.MemberToolStats:
			row.ToolStats = object(&sc.toolStats, raw)
		case schemas.MemberToolErrorCounts:
			row.ToolErrorCounts = object(&sc.toolErrs, raw)
		case schemas.MemberReasoningStats:
			row.ReasoningStats = jsonStruct(&sc.reasoning, raw)
		case schemas.MemberModel:
			row.Model = str(&sc.model, raw)
		case schemas.MemberDurationMS:
			row.DurationMS = integer(&sc.duration, raw)
		case schemas.MemberError:
			row.Error = str(&sc.errStr, raw)
		case schemas.MemberMetadata:
			row.Metadata = nil
			if raw != "null" {
				sc.metadata = raw
				row.Metadata = &sc.metadata
			}
		case schemas.MemberExtra:
			row.Extra = object(&sc.extra, raw)
		default:
			sc.gradedColumn(row, lps, name, raw)
		}
	})
}

// gradedColumn fills the column of row of the member name when it is one of
// a graded record's (timings, reward, grade, logprobs); lps is the memory of
// the logprobs list.
func (sc *parquetScratch) gradedColumn(row *parquetRecord, lps []parquetLogprobs, name, raw string) {
	switch name {
	case schemas.MemberTimings:
		row.Timings = jsonStruct(&sc.graded.timings, raw)
	case schemas.MemberReward:
		row.Reward = jsonNumber(&sc.graded.reward, raw)
	case schemas.MemberGrade:
		row.Grade = sc.grade(raw)
	case schemas.MemberLogprobs:
		row.Logprobs = jsonList(lps, raw, sc.turnLogprobs)
	}
}

// jsonNumber stores the JSON number raw in *dst and returns dst, or nil (a
// null column) when raw is another JSON value.
func jsonNumber(dst *float64, raw string) *float64 {
	v, ok := jsonFloat(raw)
	if !ok {
		return nil
	}
	*dst = v
	return dst
}

// jsonFloat reads the JSON number raw.
func jsonFloat(raw string) (float64, bool) {
	if !schemas.IsJSONNumber(raw) { // null and the rest: no ParseFloat error to allocate
		return 0, false
	}
	v, err := strconv.ParseFloat(raw, 64)
	return v, err == nil
}

// setField sets the field whose column is name (see timingsColumns).
func (t *parquetTimings) setField(name, raw string) {
	n, _ := schemas.JSONInt(raw)
	for i, f := range [...]*int64{&t.ModelMS, &t.ToolMS, &t.SandboxStartMS, &t.SandboxCloseMS, &t.QueueMS, &t.GraderMS} {
		if timingsColumns[i] == name {
			*f = n
		}
	}
}

// grade returns the grade column of the JSON value raw, or nil (null) when
// raw is no object; see parquetGrade.
func (sc *parquetScratch) grade(raw string) *parquetGrade {
	if raw[0] != '{' {
		return nil
	}
	g := &sc.graded.grade
	*g = parquetGrade{}
	schemas.EachMember(raw, func(name, v string) {
		switch name {
		case gradeColumns[0]:
			g.Grader = sc.jsonText(v)
		case gradeColumns[1]:
			g.Passed = nil
			if v == "true" || v == "false" {
				sc.graded.passed = v == "true"
				g.Passed = &sc.graded.passed
			}
		case gradeColumns[2]:
			g.Value = jsonNumber(&sc.graded.value, v)
		case gradeColumns[3]:
			g.Output = sc.jsonText(v)
		case gradeColumns[4]:
			g.DurationMS, _ = schemas.JSONInt(v)
		case gradeColumns[5]:
			g.Error = sc.jsonText(v)
		}
	})
	return g
}

// turnLogprobs returns one element of the logprobs column from the JSON
// value raw (an empty element when raw is no object); its lists are new
// memory, as --logprobs records are the rare ones.
func (sc *parquetScratch) turnLogprobs(raw string) parquetLogprobs {
	var t parquetLogprobs
	if raw[0] != '{' {
		return t
	}
	schemas.EachMember(raw, func(name, v string) {
		switch name {
		case logprobsColumns[0]:
			t.Turn, _ = schemas.JSONInt(v)
		case logprobsColumns[1]:
			t.Tokens = jsonList(nil, v, sc.jsonText)
		case logprobsColumns[2]:
			t.Logprobs = jsonNumbers(v, jsonFloat)
		case logprobsColumns[3]:
			t.TokenIDs = jsonNumbers(v, schemas.JSONInt)
		}
	})
	return t
}

// jsonNumbers returns the elements of the JSON array raw read by num, or nil
// (a null list) when raw is no array or an element does not read.
func jsonNumbers[T any](raw string, num func(string) (T, bool)) []T {
	ok := true
	l := jsonList[T](nil, raw, func(v string) T {
		n, good := num(v)
		ok = ok && good
		return n
	})
	if !ok {
		return nil
	}
	return l
}

// jsonList returns the elements of the JSON array raw, each converted by
// elem, in buf's memory; an empty array gives an empty slice, and any other
// JSON value gives nil (a null column).
func jsonList[T any](buf []T, raw string, elem func(raw string) T) []T {
	if raw[0] != '[' {
		return nil
	}
	buf = buf[:0]
	schemas.EachElement(raw, func(v string) { buf = append(buf, elem(v)) })
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
	schemas.EachMember(raw, dst.setField)
	return dst
}

// setField sets the field whose column is name (see usageColumns).
func (u *parquetUsage) setField(name, raw string) {
	n, _ := schemas.JSONInt(raw)
	for i, f := range [...]*int64{&u.PromptTokens, &u.CompletionTokens, &u.TotalTokens, &u.CachedPromptTokens, &u.ReasoningTokens} {
		if usageColumns[i] == name {
			*f = n
		}
	}
}

// setField sets the field whose column is name (see reasoningColumns).
func (r *parquetReasoning) setField(name, raw string) {
	n, _ := schemas.JSONInt(raw)
	for i, f := range [...]*int64{&r.TotalAssistantTurns, &r.TurnsWithReasoning, &r.TurnsWithoutReason} {
		if reasoningColumns[i] == name {
			*f = n
		}
	}
	if reasoningColumns[3] == name {
		r.HasAnyReasoning = raw == "true"
	}
}

// turn returns the from and value of a conversations element; a member that
// is not a string holds its JSON text, and an element that is not an object
// gives an empty turn.
func (sc *parquetScratch) turn(raw string) parquetTurn {
	var t parquetTurn
	if raw[0] == '{' {
		schemas.EachMember(raw, func(k, v string) {
			switch k {
			case turnColumns[0]:
				t.From = sc.jsonText(v)
			case turnColumns[1]:
				t.Value = sc.jsonText(v)
			}
		})
	}
	return t
}

// jsonString is schemas.JSONString, decoding a string with escapes into
// sc.text instead of new memory; the result is valid until the scratch's
// next row.
func (sc *parquetScratch) jsonString(raw string) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || strings.IndexByte(raw, '\\') < 0 {
		return schemas.JSONString(raw) // no escapes: a substring of raw
	}
	start := len(sc.text)
	b, ok := schemas.AppendJSONString(sc.text, raw)
	if !ok {
		return "", false
	}
	// Growing sc.text moves later strings to a new array; the earlier ones
	// keep the old one alive.
	sc.text = b
	return unsafe.String(unsafe.SliceData(b[start:]), len(b)-start), true
}

// jsonText is schemas.JSONText through jsonString.
func (sc *parquetScratch) jsonText(raw string) string {
	if s, ok := sc.jsonString(raw); ok {
		return s
	}
	return raw
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
	if !slices.ContainsFunc(parquetSchemas(), func(s *parquet.Schema) bool { return parquet.EqualNodes(pf.Schema(), s) }) {
		return nil, errors.New("schema is not the hermes-pipe record schema")
	}
	return pf, nil
}

// readParquetRows calls fn with every row of pf in order; the row and its
// strings are valid during the call only. It reads every column, 256 rows at
// a time. The columns a shard of an earlier schema version lacks are null
// in its rows (parquet-go would give an empty list).
func readParquetRows(pf *parquet.File, fn func(i int, row *parquetRecord) error) error {
	r := parquet.NewGenericReader[parquetRecord](pf, parquetSchema(), parquetSchemaConfig())
	defer r.Close()
	missing := parquetMissing(pf.Schema())
	buf := make([]parquetRecord, 256)
	i := 0
	for {
		n, err := r.Read(buf)
		for k := range buf[:n] {
			for _, f := range missing {
				reflect.ValueOf(&buf[k]).Elem().Field(f).SetZero()
			}
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

// parquetMissing returns the indexes of parquetRecord's fields whose column
// the schema s lacks (none for the current version).
func parquetMissing(s *parquet.Schema) []int {
	var missing []int
	for i, f := range parquetSchema().Fields() {
		if !slices.ContainsFunc(s.Fields(), func(g parquet.Field) bool { return g.Name() == f.Name() }) {
			missing = append(missing, i)
		}
	}
	return missing
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
	leaf, _ := pf.Schema().Lookup(parquetLineColumn) // its place differs between schema versions
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
