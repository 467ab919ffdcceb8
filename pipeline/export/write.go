package export

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// row is one exported row before it is encoded.
type row struct {
	f      *facts
	source string
	msgs   []schemas.Message
	tools  []schemas.Tool
	turns  []schemas.Turn
	conv   string // raw conversations (sharegpt JSONL copies it)
	// toolsOK is false when a sharegpt row's tool list could not be read.
	toolsOK bool
	// logprobs is the row's logprobs column (Options.Logprobs; logprobs.go).
	logprobs []lpEntry
}

// rowWriter writes the rows of one data file.
type rowWriter interface {
	write(r *row) error
	close() error
}

// splitFiles writes one split's data files, opening the next when one
// holds ShardRows rows.
type splitFiles struct {
	dir    string
	name   string
	total  int64 // rows pass 1 counted
	n      int   // files
	rows   int64 // rows written
	inFile int
	cur    rowWriter
	file   *os.File
	files  []string
	opts   *Options
}

func (s *splitFiles) write(r *row) error {
	if s.cur == nil || s.inFile == s.opts.ShardRows {
		if err := s.closeFile(); err != nil {
			return err
		}
		rel := fmt.Sprintf("%s/%s-%05d-of-%05d.%s", DataDir, s.name, len(s.files), s.n, s.opts.FileFormat)
		f, err := os.OpenFile(filepath.Join(s.dir, rel), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		s.file, s.files, s.inFile = f, append(s.files, rel), 0
		if s.opts.FileFormat == FileParquet {
			s.cur = newRowWriter(f, s.opts)
		} else {
			s.cur = &jsonlWriter{w: bufio.NewWriterSize(f, 1<<20), opts: s.opts}
		}
	}
	s.inFile++
	s.rows++
	return s.cur.write(r)
}

func (s *splitFiles) closeFile() error {
	if s.cur == nil {
		return nil
	}
	err := s.cur.close()
	if err == nil {
		err = s.file.Sync()
	}
	if cerr := s.file.Close(); err == nil {
		err = cerr
	}
	s.cur, s.file = nil, nil
	if err != nil {
		return fmt.Errorf("export: write %s: %w", s.files[len(s.files)-1], err)
	}
	return nil
}

// pass2 reads the sources again and writes the kept records into tmp.
func (p *plan) pass2(ctx context.Context, tmp string, man *Manifest) error {
	o := p.opts
	if err := os.Mkdir(filepath.Join(tmp, DataDir), 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	out := make([]*splitFiles, len(p.splits))
	for i, s := range p.splits {
		n := int((p.rows[i] + int64(o.ShardRows) - 1) / int64(o.ShardRows))
		out[i] = &splitFiles{dir: tmp, name: s.name, total: p.rows[i], n: n, opts: o}
	}
	defer func() {
		for _, s := range out {
			if s.file != nil {
				s.file.Close()
			}
		}
	}()
	outcomes, models, tools := make([]counts, len(p.splits)), counts{}, counts{}
	for i := range p.splits {
		outcomes[i] = counts{}
	}
	ord := 0
	kh := fnv.New64a()
	total := int64(len(p.state))
	for i := range o.Sources {
		source, base := man.Sources[i].runID(), ord
		each := func(fn func(line []byte) error) error { return eachLine(o.Sources[i], fn) }
		work := func(k int, line []byte, r *lineRow) {
			r.key, _ = schemas.JSONString(firstMember(line, schemas.MemberKey))
			r.keep, r.err = 0, nil
			if base+k < len(p.state) {
				r.keep = p.state[base+k]
			}
			if r.keep == 0 {
				return
			}
			readFacts(line, &r.f)
			r.err = p.fillRow(&r.row, &r.f, source)
			if r.err == nil && o.Logprobs {
				r.lpDropped, r.err = p.rowLogprobs(line, &r.row)
			}
		}
		err := pipelined(each, work, func(_ []byte, r *lineRow) error {
			if ord%progressEvery == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
				if o.Progress != nil {
					o.Progress(2, int64(ord), total)
				}
			}
			if ord >= len(p.state) {
				return errChanged
			}
			ord++
			kh.Write([]byte(r.key))
			kh.Write([]byte{0})
			if r.keep == 0 {
				return nil
			}
			if r.err != nil {
				return r.err
			}
			man.LogprobsDropped += r.lpDropped
			if !r.row.toolsOK && o.Format != FormatMessages {
				man.ToolsUnread++
			}
			addToolCalls(tools, r.f.toolStats)
			outcomes[r.keep-1].add(r.f.outcome, 1)
			if r.f.model != "" {
				models.add(r.f.model, 1)
			}
			man.Tokens += r.f.tokens
			return out[r.keep-1].write(&r.row)
		})
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	if ord != len(p.state) || kh.Sum64() != p.keys {
		return fmt.Errorf("export: %w", errChanged)
	}
	if o.Progress != nil {
		o.Progress(2, total, total)
	}
	man.Splits, man.Outcomes = map[string]Out{}, map[string]map[string]int64{}
	man.Models, man.Tools = models.plain(), tools.plain()
	for i, s := range p.splits {
		man.Outcomes[s.name] = outcomes[i].plain()
	}
	for _, s := range out {
		if err := s.closeFile(); err != nil {
			return err
		}
		if s.rows != s.total {
			return fmt.Errorf("export: %w", errChanged)
		}
		man.Splits[s.name] = Out{Rows: s.rows, Files: append([]string{}, s.files...)}
		man.Rows += s.rows
	}
	return syncDir(filepath.Join(tmp, DataDir))
}

// counts counts by a name that may share a record line's memory: a map
// assignment stores its key again even when the key is present, so the
// counts are pointers and a name is copied once, when it is new.
type counts map[string]*int64

func (c counts) add(k string, n int64) {
	if p := c[k]; p != nil {
		*p += n
		return
	}
	c[strings.Clone(k)] = &n
}

func (c counts) plain() map[string]int64 {
	m := make(map[string]int64, len(c))
	for k, v := range c {
		m[k] = *v
	}
	return m
}

// errChanged is pass 2 finding other records than pass 1 read.
var errChanged = fmt.Errorf("the sources changed between the two passes (a run still writing?): nothing was exported; try again")

func firstMember(line []byte, name string) string {
	v, _, _ := schemas.FirstMember(strings.TrimSpace(str(line)), name)
	return v
}

// fillRow converts the record whose facts are f into r.
// lineRow is what pass 2 makes of one record line on its own (in
// pipelined's workers): its key, its split (0: left out) and, when kept,
// its facts and row.
type lineRow struct {
	key  string
	keep uint8
	f    facts
	row  row
	err  error

	lpDropped int64 // logprobs entries left out (rowLogprobs)
}

func (p *plan) fillRow(r *row, f *facts, source string) error {
	var ok bool
	*r = row{f: f, source: source, conv: f.conv, turns: r.turns[:0], logprobs: r.logprobs[:0]}
	r.turns, ok = decodeTurns(f.conv, r.turns)
	if !ok {
		return fmt.Errorf("record %s: its conversations changed between the two passes", f.key)
	}
	if p.opts.Format == FormatMessages {
		msgs, tools, err := schemas.FromShareGPT(r.turns)
		if err != nil {
			return fmt.Errorf("record %s: %w (it converted in pass 1)", f.key, err)
		}
		r.msgs, r.tools, r.toolsOK = msgs, tools, true
		return nil
	}
	if len(r.turns) > 0 && r.turns[0].From == fromSystem {
		tools, err := schemas.ToolsOfSystemPrompt(r.turns[0].Value)
		r.tools, r.toolsOK = tools, err == nil
	}
	return nil
}

// appendString appends s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte { return schemas.AppendQuoted(b, s) }

// appendRawOrString appends raw when it is valid JSON, else raw as a
// string; empty raw is empty.
func appendRawOrString(b []byte, raw, empty string) []byte {
	switch {
	case strings.TrimSpace(raw) == "":
		return append(b, empty...)
	case json.Valid([]byte(raw)):
		return append(b, raw...)
	}
	return appendString(b, raw)
}

// jsonlWriter writes rows as JSON lines.
type jsonlWriter struct {
	w    *bufio.Writer
	opts *Options
	buf  []byte
}

func (j *jsonlWriter) write(r *row) error {
	b := j.buf[:0]
	b = append(b, '{')
	if j.opts.Format == FormatMessages {
		b = append(b, `"messages":`...)
		b = appendMessages(b, r.msgs, j.opts.Arguments == ArgumentsObject)
	} else {
		b = appendString(b, schemas.MemberConversations)
		b = append(b, ':')
		b = append(b, r.conv...)
	}
	b = append(b, `,"tools":`...)
	if r.toolsOK {
		b = appendTools(b, r.tools)
	} else {
		b = append(b, "null"...)
	}
	b = appendColumns(b, r)
	if j.opts.Logprobs {
		b = appendLogprobs(b, r, j.opts.Format)
	}
	b = append(b, '}', '\n')
	j.buf = b
	_, err := j.w.Write(b)
	return err
}

func (j *jsonlWriter) close() error { return j.w.Flush() }

func appendMessages(b []byte, msgs []schemas.Message, argsObject bool) []byte {
	b = append(b, '[')
	for i := range msgs {
		m := &msgs[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":`...)
		b = appendString(b, m.Role)
		b = append(b, `,"content":`...)
		if m.ContentJSON != "" {
			b = append(b, m.ContentJSON...)
		} else {
			b = appendString(b, m.Content)
		}
		if m.Reasoning != "" {
			b = append(b, `,"reasoning_content":`...)
			b = appendString(b, m.Reasoning)
		}
		if len(m.ToolCalls) > 0 {
			b = append(b, `,"tool_calls":[`...)
			for k := range m.ToolCalls {
				tc := &m.ToolCalls[k]
				if k > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"id":`...)
				b = appendString(b, tc.ID)
				b = append(b, `,"type":`...)
				b = appendString(b, callType(tc.Type))
				b = append(b, `,"function":{"name":`...)
				b = appendString(b, tc.Function.Name)
				b = append(b, `,"arguments":`...)
				if argsObject {
					b = appendRawOrString(b, tc.Function.Arguments, `""`)
				} else {
					b = appendString(b, tc.Function.Arguments)
				}
				b = append(b, "}}"...)
			}
			b = append(b, ']')
		}
		if m.Role == "tool" {
			b = append(b, `,"tool_call_id":`...)
			b = appendString(b, m.ToolCallID)
			b = append(b, `,"name":`...)
			b = appendString(b, m.Name)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// callType is a tool call's type, "function" when the message left it out.
func callType(t string) string {
	if t == "" {
		return "function"
	}
	return t
}

func appendTools(b []byte, tools []schemas.Tool) []byte {
	b = append(b, '[')
	for i := range tools {
		t := &tools[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":`...)
		b = appendString(b, callType(t.Type))
		b = append(b, `,"function":{"name":`...)
		b = appendString(b, t.Function.Name)
		b = append(b, `,"description":`...)
		b = appendString(b, t.Function.Description)
		b = append(b, `,"parameters":`...)
		b = appendRawOrString(b, string(t.Function.Parameters), "{}")
		b = append(b, "}}"...)
	}
	return append(b, ']')
}

// appendColumns appends the record's columns, each after a comma.
func appendColumns(b []byte, r *row) []byte {
	f := r.f
	col := func(name string) {
		b = append(b, ',')
		b = appendString(b, name)
		b = append(b, ':')
	}
	col(schemas.MemberKey)
	b = appendString(b, f.key)
	col(schemas.MemberID)
	b = appendOptString(b, f.id)
	col(schemas.MemberPromptIndex)
	b = fmt.Appendf(b, "%d", f.pi)
	col(schemas.MemberSample)
	b = fmt.Appendf(b, "%d", f.sample)
	col(schemas.MemberOutcome)
	b = appendString(b, f.outcome)
	col(schemas.MemberModel)
	b = appendOptString(b, f.model)
	col(columnReward)
	if f.hasReward {
		b = fmt.Appendf(b, "%v", f.reward)
	} else {
		b = append(b, "null"...)
	}
	col(columnSource)
	return appendString(b, r.source)
}

// Columns of an exported row that are not record members.
const (
	columnReward = "reward"
	columnSource = "source"
)

func appendOptString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendString(b, s)
}
