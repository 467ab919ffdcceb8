package export

import (
	"io"
	"reflect"
	"strings"
	"sync"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// The Parquet rows. Columns are typed: messages and tools are lists of
// structs; a tool's parameters are JSON text (JSON Schemas differ from tool
// to tool, and a Parquet column has one type), as are a call's arguments
// (the OpenAI form). The record's columns (key, id, prompt_index, sample,
// outcome, model, conversations and a turn's from and value) are named from
// schemas' tags through pqConfig; the others are named here.

// pqFunction is a tool call's function.
type pqFunction struct {
	Name      string `parquet:"name,dict"`
	Arguments string `parquet:"arguments"`
}

// pqToolCall is one tool call of an assistant message.
type pqToolCall struct {
	ID       string     `parquet:"id"`
	Type     string     `parquet:"type,dict"`
	Function pqFunction `parquet:"function"`
}

// pqMessage is one chat message.
type pqMessage struct {
	Role             string       `parquet:"role,dict"`
	Content          string       `parquet:"content"`
	ReasoningContent *string      `parquet:"reasoning_content,optional"`
	ToolCalls        []pqToolCall `parquet:"tool_calls,list,optional"`
	ToolCallID       *string      `parquet:"tool_call_id,optional"`
	Name             *string      `parquet:"name,optional,dict"`
}

// pqToolSpec is an offered tool's function; Parameters is its JSON Schema
// as JSON text.
type pqToolSpec struct {
	Name        string `parquet:"name,dict"`
	Description string `parquet:"description,dict"`
	Parameters  string `parquet:"parameters,dict"`
}

// pqTool is one offered tool.
type pqTool struct {
	Type     string     `parquet:"type,dict"`
	Function pqToolSpec `parquet:"function"`
}

// pqTurn is one ShareGPT turn (its columns named by pqConfig).
type pqTurn struct {
	From  string
	Value string
}

// messagesRow is a row of --format messages.
type messagesRow struct {
	Messages    []pqMessage `parquet:"messages,list"`
	Tools       []pqTool    `parquet:"tools,list"`
	Key         string
	ID          *string
	PromptIndex int64
	Sample      int64
	Outcome     string
	Model       *string
	Reward      *float64 `parquet:"reward,optional"`
	Source      string   `parquet:"source,dict"`
}

// shareGPTRow is a row of --format sharegpt.
type shareGPTRow struct {
	Conversations []pqTurn
	Tools         []pqTool `parquet:"tools,list,optional"`
	Key           string
	ID            *string
	PromptIndex   int64
	Sample        int64
	Outcome       string
	Model         *string
	Reward        *float64 `parquet:"reward,optional"`
	Source        string   `parquet:"source,dict"`
}

// recordColumns are the Parquet options of the columns named after a
// record member, by the Go field name they share with schemas.Record.
var recordColumns = []struct{ field, opts string }{
	{"Key", ""}, {"ID", ",optional"}, {"PromptIndex", ""}, {"Sample", ""},
	{"Outcome", ",dict"}, {"Model", ",optional,dict"},
}

// pqConfig names the record's columns of a row type from schemas' tags.
func pqConfig(conversations bool) *parquet.SchemaConfig {
	var tags []parquet.StructTagOption
	tag := func(name, opts string, path ...string) {
		tags = append(tags, parquet.StructTagOption{StructTag: reflect.StructTag(`parquet:"` + name + opts + `"`), ColumnPath: path})
	}
	for _, c := range recordColumns {
		tag(jsonName[schemas.Record](c.field), c.opts, c.field)
	}
	if conversations {
		conv := jsonName[schemas.Record]("Conversations")
		tag(conv, ",list", "Conversations")
		tag(schemas.TurnFrom, ",dict", conv, "list", "element", "From")
		tag(schemas.TurnValue, "", conv, "list", "element", "Value")
	}
	return &parquet.SchemaConfig{StructTags: tags}
}

// The export's Parquet configurations and schemas, built at first use
// rather than at the start of every command.
var (
	messagesConfig = sync.OnceValue(func() *parquet.SchemaConfig { return pqConfig(false) })
	shareGPTConfig = sync.OnceValue(func() *parquet.SchemaConfig { return pqConfig(true) })
	messagesSchema = sync.OnceValue(func() *parquet.Schema { return parquet.SchemaOf(new(messagesRow), messagesConfig()) })
	shareGPTSchema = sync.OnceValue(func() *parquet.Schema { return parquet.SchemaOf(new(shareGPTRow), shareGPTConfig()) })
)

// pqGroupBytes and pqGroupRows end a row group once its rows' text or
// its rows reach them, bounding the memory of the writer's buffers (which
// cost per row as well as per byte of text).
var (
	pqGroupBytes int64 = 8 << 20
	pqGroupRows        = 16384
)

// pqCodec compresses every data file's pages: one codec, so that its
// encoders (each with a history window of several MB) are shared by the
// files instead of allocated per file.
var pqCodec = &zstd.Codec{Level: zstd.SpeedFastest}

// pqWriter writes rows of type T.
type pqWriter[T any] struct {
	w     *parquet.GenericWriter[T]
	row   [1]T
	fill  func(dst *T, r *row) int64
	bytes int64
	rows  int
}

// writerOptions are the options of a data file's writer of the rows of
// schema; long are the paths of columns whose pages keep no bounds (long
// text).
func writerOptions(schema *parquet.Schema, cfg *parquet.SchemaConfig, long ...[]string) []parquet.WriterOption {
	o := []parquet.WriterOption{schema, cfg, parquet.Compression(pqCodec),
		parquet.DataPageStatistics(false), parquet.CreatedBy("hermes-pipe", "", "")}
	for _, path := range long {
		o = append(o, parquet.SkipPageBounds(path...))
	}
	return o
}

// shareGPTLong and messagesLong are the long text columns of the formats.
func shareGPTLong() [][]string {
	return [][]string{{jsonName[schemas.Record]("Conversations"), "list", "element", schemas.TurnValue}}
}

func messagesLong() [][]string {
	return [][]string{
		{"messages", "list", "element", "content"},
		{"messages", "list", "element", "reasoning_content"},
		{"messages", "list", "element", "tool_calls", "list", "element", "function", "arguments"},
	}
}

func newParquetWriter(w io.Writer, format string) rowWriter {
	if format == FormatShareGPT {
		return &pqWriter[shareGPTRow]{
			w:    parquet.NewGenericWriter[shareGPTRow](w, writerOptions(shareGPTSchema(), shareGPTConfig(), shareGPTLong()...)...),
			fill: fillShareGPT,
		}
	}
	return &pqWriter[messagesRow]{
		w:    parquet.NewGenericWriter[messagesRow](w, writerOptions(messagesSchema(), messagesConfig(), messagesLong()...)...),
		fill: fillMessages,
	}
}

func (p *pqWriter[T]) write(r *row) error {
	p.bytes += p.fill(&p.row[0], r)
	p.rows++
	if _, err := p.w.Write(p.row[:]); err != nil {
		return err
	}
	if p.bytes >= pqGroupBytes || p.rows >= pqGroupRows {
		p.bytes, p.rows = 0, 0
		return p.w.Flush()
	}
	return nil
}

func (p *pqWriter[T]) close() error { return p.w.Close() }

// optString is s, or nil when empty.
func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// fillColumns fills the record's columns shared by both row types.
func fillColumns(r *row, key *string, id **string, pi, sample *int64, outcome *string, model **string, reward **float64, source *string) {
	f := r.f
	*key, *id, *pi, *sample, *outcome, *model, *source = strings.Clone(f.key), optString(strings.Clone(f.id)), f.pi, f.sample,
		strings.Clone(f.outcome), optString(strings.Clone(f.model)), r.source
	*reward = nil
	if f.hasReward {
		v := f.reward
		*reward = &v
	}
}

func fillTools(dst []pqTool, tools []schemas.Tool) ([]pqTool, int64) {
	dst = dst[:0]
	var n int64
	for i := range tools {
		t := &tools[i]
		params := strings.TrimSpace(string(t.Function.Parameters))
		if params == "" {
			params = "{}"
		}
		dst = append(dst, pqTool{Type: callType(t.Type), Function: pqToolSpec{Name: t.Function.Name, Description: t.Function.Description, Parameters: params}})
		n += int64(len(t.Function.Description) + len(params))
	}
	return dst, n
}

func fillMessages(dst *messagesRow, r *row) int64 {
	fillColumns(r, &dst.Key, &dst.ID, &dst.PromptIndex, &dst.Sample, &dst.Outcome, &dst.Model, &dst.Reward, &dst.Source)
	var n int64
	dst.Tools, n = fillTools(dst.Tools, r.tools)
	msgs := dst.Messages[:0]
	for i := range r.msgs {
		m := &r.msgs[i]
		pm := pqMessage{Role: m.Role, Content: m.Content, ReasoningContent: optString(m.Reasoning)}
		if m.ContentJSON != "" {
			pm.Content = m.ContentJSON
		}
		for k := range m.ToolCalls {
			tc := &m.ToolCalls[k]
			pm.ToolCalls = append(pm.ToolCalls, pqToolCall{ID: tc.ID, Type: callType(tc.Type), Function: pqFunction{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
			n += int64(len(tc.Function.Arguments))
		}
		if m.Role == "tool" {
			id, name := m.ToolCallID, m.Name
			pm.ToolCallID, pm.Name = &id, &name
		}
		n += int64(len(m.Content) + len(m.Reasoning))
		msgs = append(msgs, pm)
	}
	dst.Messages = msgs
	return n
}

func fillShareGPT(dst *shareGPTRow, r *row) int64 {
	fillColumns(r, &dst.Key, &dst.ID, &dst.PromptIndex, &dst.Sample, &dst.Outcome, &dst.Model, &dst.Reward, &dst.Source)
	var n int64
	dst.Tools, n = fillTools(dst.Tools, r.tools)
	if !r.toolsOK {
		dst.Tools = nil
	}
	turns := dst.Conversations[:0]
	for _, t := range r.turns {
		turns = append(turns, pqTurn{From: t.From, Value: t.Value})
		n += int64(len(t.Value))
	}
	dst.Conversations = turns
	return n
}
