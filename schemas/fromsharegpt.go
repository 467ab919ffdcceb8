package schemas

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/hermes-pipe/hermes-pipe/schemas/pyjson"
)

// ErrNotInvertible is returned by FromShareGPT when no chat transcript gives
// the record's turns back exactly.
var ErrNotInvertible = errors.New("conversation cannot be converted back to chat messages exactly")

// notInvertible is ErrNotInvertible naming turn i of the conversation and
// why it cannot be read back.
func notInvertible(i int, why string) error {
	return fmt.Errorf("conversations[%d]: %w: %s", i, ErrNotInvertible, why)
}

// Blocks of gpt and tool turns, as ToShareGPT writes them.
const (
	toolCallOpen      = "<tool_call>\n"
	toolCallClose     = "\n</tool_call>"
	toolResponseOpen  = "<tool_response>\n"
	toolResponseClose = "\n</tool_response>"
	thinkHead         = "<think>\n"
	thinkTail         = "\n</think>"
	// maxCallRetries bounds how many shorter readings of a gpt turn's
	// trailing <tool_call> blocks are tried (the first ones taken as
	// content) once the longest fails; it keeps adversarial turns linear.
	maxCallRetries = 8
	// maxPooledBuf bounds the scratch buffers kept between calls.
	maxPooledBuf = 1 << 20
)

// readerBufs holds *readerScratch between FromShareGPT calls.
var readerBufs sync.Pool

// readerScratch is a reader's scratch space, kept for the next call.
type readerScratch struct {
	buf    []byte
	blocks []callBlock
}

// FromShareGPT converts a record's conversations (Hermes' ShareGPT form, the
// system turn first) back to the chat messages and the offered tools they
// were made from, so that ToShareGPTWithSystem(turns[0].Value, msgs) gives
// every turn after the system turn back byte for byte, and
// HermesSystemPrompt(tools) the system turn.
//
// The messages are user, assistant and tool messages (the system turn is
// represented by the tools). A human turn becomes a user message; a gpt turn
// an assistant message whose Reasoning is the text of a leading <think>
// block, Content the visible text and ToolCalls one call per trailing
// <tool_call> block (Type "function", Arguments the JSON text of the
// arguments as written in the turn, ID the tool_call_id of the tool
// response at the same position in the next turn, or "call_<turn>_<k>" when
// there is none or it is empty); a tool turn one tool message per
// <tool_response> block (ToolCallID, Name, and Content: a string result as
// the string, an object or array result as its JSON text).
//
// Each gpt turn is read the natural way first; when that does not give the
// turn back, other readings are tried (the whole text as content, fewer
// trailing blocks taken as calls), and the first one that does is kept. The
// whole result is checked by converting it forward once; when no reading
// gives the turns back, the error wraps ErrNotInvertible and names the turn.
//
// When turns[0] is not a system turn, tools is nil and the messages give
// back every turn (ToShareGPTWithSystem(s, msgs)[1:] equals turns for any
// s). With a system turn, tools is non-nil (empty for "[]"); see
// ToolsOfSystemPrompt. A system turn that is Hermes' template followed by
// other text (compress appends its notice there) gives the template's tools
// and a first message of role system holding that text, which the forward
// conversion skips: HermesSystemPrompt(tools) plus that text is the system
// turn.
//
// It is called once per record by export. The common case costs one scan
// of the turns and one forward conversion; strings of the result share
// memory with the turns' values.
func FromShareGPT(turns []Turn) (msgs []Message, tools []Tool, err error) {
	first := 0
	if len(turns) > 0 && turns[0].From == "system" {
		if turns[0].ValueJSON != "" {
			return nil, nil, notInvertible(0, "the system turn's value is not a string")
		}
		var extra string
		if tools, extra, err = systemTools(turns[0].Value); err != nil {
			return nil, nil, fmt.Errorf("conversations[0]: %w", err)
		}
		first = 1
		if extra != "" {
			defer func() {
				if err == nil {
					msgs = append([]Message{{Role: "system", Content: extra}}, msgs...)
				}
			}()
		}
	}
	r := reader{turns: turns, first: first}
	scratch, _ := readerBufs.Get().(*readerScratch)
	if scratch == nil {
		scratch = new(readerScratch)
	}
	r.buf, r.blocks = scratch.buf[:0], scratch.blocks[:0]
	defer func() {
		if cap(r.buf) <= maxPooledBuf && cap(r.blocks) <= maxPooledBuf/64 {
			clear(r.blocks[:cap(r.blocks)]) // pin no record's text
			scratch.buf, scratch.blocks = r.buf[:0], r.blocks[:0]
			readerBufs.Put(scratch)
		}
	}()
	msgs, err = r.read(false)
	if err != nil {
		return nil, nil, err
	}
	if i, _ := r.differs(msgs); i >= 0 {
		// Some turn needs a reading other than the natural one: read again,
		// checking each gpt turn (and its tool turn) on its own.
		r.calls = nil
		msgs, err = r.read(true)
		if err != nil {
			return nil, nil, err
		}
		if i, why := r.differs(msgs); i >= 0 {
			return nil, nil, notInvertible(i, why)
		}
	}
	return msgs, tools, nil
}

// reader reads the turns after the system turn back into messages.
type reader struct {
	turns  []Turn
	first  int         // index of the first turn after the system turn
	blocks []callBlock // scratch: the trailing <tool_call> blocks of a gpt turn
	calls  []ToolCall  // the messages' tool calls are carved from it
	buf    []byte      // scratch of the forward conversion
}

// read converts the turns to messages, each gpt turn by its natural reading
// or, when checked, by the first reading that gives its turns back.
func (r *reader) read(checked bool) ([]Message, error) {
	turns := r.turns
	if r.first == len(turns) {
		return nil, nil
	}
	// A message per turn, and a few more for tool turns of several results.
	msgs := make([]Message, 0, len(turns)-r.first+4)
	if r.calls == nil {
		r.calls = make([]ToolCall, 0, len(turns)-r.first)
	}
	for i := r.first; i < len(turns); i++ {
		t := &turns[i]
		if t.From != "human" && t.ValueJSON != "" {
			return nil, notInvertible(i, "only a human turn's value may be a list")
		}
		switch {
		case t.From == "human":
			msgs = append(msgs, Message{Role: "user", Content: t.Value, ContentJSON: t.ValueJSON})
		case i == r.first:
			return nil, notInvertible(i, `the first turn after the system turn must be "human", got "`+t.From+`"`)
		case t.From == "gpt":
			hasTool := i+1 < len(turns) && turns[i+1].From == "tool"
			var err error
			if msgs, err = r.readGPT(msgs, i, hasTool, checked); err != nil {
				return nil, err
			}
			if hasTool {
				i++
			}
		case t.From == "tool":
			return nil, notInvertible(i, "a tool turn must directly follow a gpt turn with tool calls")
		default:
			return nil, notInvertible(i, `turn "from" must be "human", "gpt" or "tool", got "`+t.From+`"`)
		}
	}
	return msgs, nil
}

// readGPT appends the assistant message of gpt turn i and, when hasTool,
// the tool messages of the turn after it.
func (r *reader) readGPT(msgs []Message, i int, hasTool, checked bool) ([]Message, error) {
	v := r.turns[i].Value
	base := len(msgs)
	msgs = append(msgs, Message{Role: "assistant"})
	if hasTool {
		var ok bool
		if msgs, ok = appendToolTurn(msgs, r.turns[i+1].Value); !ok {
			return nil, notInvertible(i+1, "not a list of <tool_response> blocks as Hermes writes them")
		}
	}
	group := msgs[base:]
	r.blocks = appendTrailingCalls(r.blocks[:0], v)
	var natural reading
	tried := false
	for c := range gptReadings(v, r.blocks, hasTool) {
		r.setAssistant(group, i, v, c)
		if !checked {
			return msgs, nil
		}
		if j, _ := r.groupDiff(i, group); j < 0 {
			return msgs, nil
		}
		if !tried {
			natural, tried = c, true
		}
	}
	if hasTool && len(r.blocks) == 0 {
		return nil, notInvertible(i, "a tool turn follows but the turn holds no <tool_call> block")
	}
	if !tried {
		return nil, notInvertible(i, "no reading of the turn as reasoning, content and tool calls exists")
	}
	// Name the turn the natural reading gets wrong.
	r.setAssistant(group, i, v, natural)
	j, why := r.groupDiff(i, group)
	if j < 0 {
		j, why = i, "it is given back only by a reading that is not checked"
	}
	return nil, notInvertible(j, why+" (and no other reading of the gpt turn gives it back)")
}

// reading is one way of splitting a gpt turn: the last k of its trailing
// <tool_call> blocks are calls, the text before them (the head) is split by
// headSplit's choice.
type reading struct{ k, choice int }

// gptReadings yields the readings of a gpt turn, the natural one first:
// every trailing block a call (then fewer, up to maxCallRetries times), and
// no call at all unless a tool turn follows; for each, the head as a
// <think> block and content, then the head as content only.
func gptReadings(v string, calls []callBlock, needCalls bool) func(yield func(reading) bool) {
	return func(yield func(reading) bool) {
		n := len(calls)
		for k := n; k > 0 && k >= n-maxCallRetries; k-- {
			head := v[:calls[n-k].start]
			for choice := 0; choice < 2; choice++ {
				if _, _, ok := headSplit(head, true, choice); ok && !yield(reading{k, choice}) {
					return
				}
			}
		}
		if needCalls {
			return
		}
		for choice := 0; choice < 2; choice++ {
			if _, _, ok := headSplit(v, false, choice); ok && !yield(reading{0, choice}) {
				return
			}
		}
	}
}

// setAssistant sets group[0], the assistant message of gpt turn i (value
// v), as read by c; group[1:] are the tool messages of the next turn, whose
// tool_call_ids name the calls.
func (r *reader) setAssistant(group []Message, i int, v string, c reading) {
	calls := r.blocks
	n := len(calls)
	head := v
	if c.k > 0 {
		head = v[:calls[n-c.k].start]
	}
	reasoning, content, _ := headSplit(head, c.k > 0, c.choice)
	m := &group[0]
	*m = Message{Role: "assistant", Reasoning: reasoning, Content: content}
	if c.k == 0 {
		return
	}
	at := len(r.calls)
	for j := range c.k {
		b := &calls[n-c.k+j]
		id := ""
		if 1+j < len(group) {
			id = group[1+j].ToolCallID
		}
		if id == "" {
			id = "call_" + strconv.Itoa(i) + "_" + strconv.Itoa(j)
		}
		r.calls = append(r.calls, ToolCall{ID: id, Type: "function", Function: FunctionCall{Name: b.name, Arguments: b.args}})
	}
	m.ToolCalls = r.calls[at:len(r.calls):len(r.calls)]
}

// headSplit splits the text of a gpt turn before its tool calls (withCalls)
// or the whole turn into reasoning and content. choice 0 is the natural
// reading: a leading empty "<think>\n</think>\n" (which ToShareGPT adds) is
// dropped and a leading "<think>\nR\n</think>\n" block is reasoning R;
// choice 1 takes the whole text as content. With calls, non-empty content
// is followed by "\n" in the turn. ok is false when the choice does not
// apply.
func headSplit(head string, withCalls bool, choice int) (reasoning, content string, ok bool) {
	if choice == 1 {
		if !withCalls {
			return "", head, true
		}
		if c, ok := dropNewline(head); ok && c != "" {
			return "", c, true
		}
		return "", "", false
	}
	if !withCalls {
		return answerSplit(head)
	}
	switch {
	case head == "":
		return "", "", true
	case strings.HasPrefix(head, emptyThink):
		c, ok := dropNewline(head[len(emptyThink):])
		return "", c, ok
	case strings.HasPrefix(head, thinkHead):
		end := strings.Index(head[len(thinkHead):], thinkTail+"\n")
		if end < 0 {
			return "", "", false
		}
		end += len(thinkHead)
		c, ok := dropNewline(head[end+len(thinkTail)+1:])
		return head[len(thinkHead):end], c, ok
	}
	return "", "", false
}

// answerSplit is headSplit's natural reading of a turn without tool calls,
// whose trailing newline after "</think>" was trimmed when the content is
// empty.
func answerSplit(v string) (reasoning, content string, ok bool) {
	switch {
	case v == emptyThink[:len(emptyThink)-1]:
		return "", "", true
	case strings.HasPrefix(v, emptyThink):
		return "", v[len(emptyThink):], true
	case !strings.HasPrefix(v, thinkHead):
		return "", "", false
	}
	for from := len(thinkHead); ; {
		at := strings.Index(v[from:], thinkTail)
		if at < 0 {
			return "", "", false
		}
		end := from + at
		after := end + len(thinkTail)
		if after == len(v) {
			return v[len(thinkHead):end], "", true
		}
		if v[after] == '\n' {
			return v[len(thinkHead):end], v[after+1:], true
		}
		from = end + 1
	}
}

// dropNewline removes the "\n" that follows non-empty content in a turn
// with tool calls.
func dropNewline(s string) (string, bool) {
	if s == "" {
		return "", true
	}
	if s[len(s)-1] != '\n' {
		return "", false
	}
	return s[:len(s)-1], true
}

// callBlock is one <tool_call> block at the end of a gpt turn.
type callBlock struct {
	start      int // offset of "<tool_call>" in the turn
	name, args string
}

// appendTrailingCalls appends the <tool_call> blocks that end gpt turn v,
// in order: "<tool_call>\n{"name": N, "arguments": A}\n</tool_call>" joined
// by "\n", the first one at the start of the turn or after a "\n". A block
// whose JSON is not of that shape ends the search.
func appendTrailingCalls(blocks []callBlock, v string) []callBlock {
	at := len(blocks)
	end := len(v)
	for strings.HasSuffix(v[:end], toolCallClose) {
		jEnd := end - len(toolCallClose)
		jStart := strings.LastIndexByte(v[:jEnd], '\n') + 1
		if jStart == 0 || !strings.HasSuffix(v[:jStart], toolCallOpen) {
			break
		}
		start := jStart - len(toolCallOpen)
		if start > 0 && v[start-1] != '\n' {
			break
		}
		name, args, ok := parseCallJSON(v[jStart:jEnd])
		if !ok {
			break
		}
		blocks = append(blocks, callBlock{start: start, name: name, args: args})
		if start == 0 {
			break
		}
		end = start - 1
	}
	for a, b := at, len(blocks)-1; a < b; a, b = a+1, b-1 {
		blocks[a], blocks[b] = blocks[b], blocks[a]
	}
	return blocks
}

// parseCallJSON reads {"name": N, "arguments": A} as ToShareGPT writes it,
// returning N decoded and A as written. Whether A is the JSON ToShareGPT
// would write is left to the check that converts the result forward.
func parseCallJSON(j string) (name, args string, ok bool) {
	const pre, mid = `{"name": `, `, "arguments": `
	if !strings.HasPrefix(j, pre) || !strings.HasSuffix(j, "}") {
		return "", "", false
	}
	name, rest, ok := cutJSONString(j[len(pre):])
	if !ok || !strings.HasPrefix(rest, mid) || len(rest) < len(mid)+2 {
		return "", "", false
	}
	return name, rest[len(mid) : len(rest)-1], true
}

// appendToolTurn appends the tool messages of tool turn v: <tool_response>
// blocks joined by "\n", each "<tool_response>\n{"tool_call_id": I,
// "name": N, "content": C}\n</tool_response>" with C a string (decoded) or
// JSON (as written).
func appendToolTurn(msgs []Message, v string) ([]Message, bool) {
	for {
		if !strings.HasPrefix(v, toolResponseOpen) {
			return msgs, false
		}
		v = v[len(toolResponseOpen):]
		nl := strings.IndexByte(v, '\n')
		if nl < 0 || !strings.HasPrefix(v[nl:], toolResponseClose) {
			return msgs, false
		}
		m, ok := parseResponseJSON(v[:nl])
		if !ok {
			return msgs, false
		}
		msgs = append(msgs, m)
		v = v[nl+len(toolResponseClose):]
		if v == "" {
			return msgs, true
		}
		if v[0] != '\n' {
			return msgs, false
		}
		v = v[1:]
	}
}

// parseResponseJSON reads {"tool_call_id": I, "name": N, "content": C}.
func parseResponseJSON(j string) (Message, bool) {
	const pre, mid1, mid2 = `{"tool_call_id": `, `, "name": `, `, "content": `
	if !strings.HasPrefix(j, pre) || !strings.HasSuffix(j, "}") {
		return Message{}, false
	}
	id, rest, ok := cutJSONString(j[len(pre):])
	if !ok || !strings.HasPrefix(rest, mid1) {
		return Message{}, false
	}
	name, rest, ok := cutJSONString(rest[len(mid1):])
	if !ok || !strings.HasPrefix(rest, mid2) {
		return Message{}, false
	}
	c := rest[len(mid2) : len(rest)-1]
	if c == "" {
		return Message{}, false
	}
	if c[0] == '"' {
		s, tail, ok := cutJSONString(c)
		if !ok || tail != "" {
			return Message{}, false
		}
		c = s
	}
	return Message{Role: "tool", ToolCallID: id, Name: name, Content: c}, true
}

// cutJSONString decodes the JSON string at the start of s, written as
// json.dumps(ensure_ascii=False) writes strings, and returns it and the
// text after it. Only the escapes json.dumps writes are read (\" \\ \b \f
// \n \r \t and \u00XX for other control characters): the conversion
// writes no other, so a string holding another cannot be given back. A
// string without escapes shares memory with s.
func cutJSONString(s string) (str, rest string, ok bool) {
	if s == "" || s[0] != '"' {
		return "", "", false
	}
	i := 1
	for i < len(s) && s[i] != '"' && s[i] != '\\' && s[i] >= 0x20 {
		i++
	}
	if i < len(s) && s[i] == '"' {
		return s[1:i], s[i+1:], true
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[1:i]...)
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			return string(b), s[i+1:], true
		case c < 0x20:
			return "", "", false
		case c != '\\':
			b = append(b, c)
			i++
			continue
		}
		if i+1 >= len(s) {
			return "", "", false
		}
		switch e := s[i+1]; e {
		case '"', '\\':
			b = append(b, e)
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
			if i+6 > len(s) || s[i+2:i+4] != "00" {
				return "", "", false
			}
			hi, lo := unhex(s[i+4]), unhex(s[i+5])
			if hi > 1 || lo > 15 {
				return "", "", false
			}
			b = append(b, hi<<4|lo)
			i += 4
		default:
			return "", "", false
		}
		i += 2
	}
	return "", "", false
}

// unhex is the value of lowercase hex digit c, 255 for another byte.
func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return 255
}

// groupDiff converts group (the assistant message of gpt turn i and its
// tool messages) forward on its own and returns the first of its turns it
// does not give back, and why; -1 when all match.
func (r *reader) groupDiff(i int, group []Message) (int, string) {
	n := 1
	if len(group) > 1 {
		n = 2 // the tool turn
	}
	conv := make([]Message, 0, len(group)+1)
	conv = append(conv, Message{Role: "user"})
	conv = append(conv, group...)
	want := make([]Turn, 0, 3)
	want = append(want, Turn{From: "human"})
	want = append(want, r.turns[i:i+n]...)
	if j, why := r.diff(conv, want); j >= 0 {
		return i + j - 1, r.reason(i+j-1, why)
	}
	return -1, ""
}

// differs converts msgs forward and returns the first turn after the
// system turn they do not give back, and why; -1 when all match.
func (r *reader) differs(msgs []Message) (int, string) {
	if j, why := r.diff(msgs, r.turns[r.first:]); j >= 0 {
		return r.first + j, r.reason(r.first+j, why)
	}
	return -1, ""
}

// reason is why for turn i, or that its value is not valid UTF-8 (which
// the conversion never writes; the readers leave that check to the
// comparison).
func (r *reader) reason(i int, why string) string {
	if i < len(r.turns) && !utf8.ValidString(r.turns[i].Value) {
		return "value is not valid UTF-8"
	}
	return why
}

// diff converts msgs forward and returns the index of the first turn of
// want it does not give back, and how they differ; -1 when equal. It
// builds each turn in the reader's scratch buffer and allocates nothing.
func (r *reader) diff(msgs []Message, want []Turn) (at int, why string) {
	at = -1
	j := 0
	r.buf = eachShareGPTTurn(r.buf, msgs, func(from string, value []byte, valueJSON string) bool {
		if j == len(want) {
			at, why = j, "converting the messages back gives an extra turn"
			return false
		}
		w := &want[j]
		switch {
		case from != w.From:
			at, why = j, `converting the messages back gives a "`+from+`" turn here`
		case valueJSON != w.ValueJSON:
			at, why = j, "converting the messages back gives another list value"
		case string(value) != w.Value:
			n := 0
			for n < len(value) && n < len(w.Value) && value[n] == w.Value[n] {
				n++
			}
			at, why = j, "converting the messages back gives a value that differs from byte "+strconv.Itoa(n)
		default:
			j++
			return true
		}
		return false
	})
	if at < 0 && j < len(want) {
		at, why = j, "the messages read back give no such turn"
	}
	return at, why
}

// toolsCache keeps the tools read from recent system turns: records of one
// folder share a handful of tool sets, and reading one costs far more than
// the rest of a record.
var toolsCache struct {
	sync.Mutex
	m map[string]toolsOfSystem
}

type toolsOfSystem struct {
	tools []Tool
	err   error
}

// toolsCacheMax bounds toolsCache; it is emptied when full.
const toolsCacheMax = 64

// ToolsOfSystemPrompt reads the tool list back out of Hermes' system turn
// (HermesSystemPrompt's output): the text between Hermes' template head and
// tail must be the JSON list [{"name", "description", "parameters",
// "required": null}, ...] as HermesSystemPrompt writes it, and
// HermesSystemPrompt of the result must give system back exactly;
// otherwise the error wraps ErrNotInvertible. Each tool has Type
// "function" and Parameters the schema's JSON text. A schema that is a
// JSON string is refused: OpenAI-form readers take a string there as the
// schema's JSON text, so it would not come back as the same string.
//
// The result is a fresh slice the caller may change. Results for recent
// system turns are remembered, so a record costs a map look-up and a copy.
func ToolsOfSystemPrompt(system string) ([]Tool, error) {
	toolsCache.Lock()
	e, ok := toolsCache.m[system]
	toolsCache.Unlock()
	if !ok {
		e.tools, e.err = parseSystemTools(system)
		toolsCache.Lock()
		if toolsCache.m == nil || len(toolsCache.m) >= toolsCacheMax {
			toolsCache.m = make(map[string]toolsOfSystem, toolsCacheMax)
		}
		// The key must not pin the memory of a whole record line.
		toolsCache.m[strings.Clone(system)] = e
		toolsCache.Unlock()
	}
	if e.err != nil {
		return nil, e.err
	}
	return copyTools(e.tools), nil
}

// copyTools copies tools, their parameters in one buffer.
// systemTools is ToolsOfSystemPrompt that also reads a system turn holding
// text after Hermes' template (compress appends its notice there): the
// tools of the template, and the text after it.
func systemTools(system string) (tools []Tool, extra string, err error) {
	tools, err = ToolsOfSystemPrompt(system)
	if err == nil || !strings.HasPrefix(system, systemPromptHead) {
		return tools, "", err
	}
	for at := len(systemPromptHead); ; {
		i := strings.Index(system[at:], systemPromptTail)
		if i < 0 {
			return nil, "", err
		}
		end := at + i + len(systemPromptTail)
		if t, terr := ToolsOfSystemPrompt(system[:end]); terr == nil {
			return t, system[end:], nil
		}
		at = end
	}
}

func copyTools(tools []Tool) []Tool {
	out := make([]Tool, len(tools))
	n := 0
	for i := range tools {
		n += len(tools[i].Function.Parameters)
	}
	buf := make([]byte, 0, n)
	for i := range tools {
		out[i] = tools[i]
		p := tools[i].Function.Parameters
		at := len(buf)
		buf = append(buf, p...)
		out[i].Function.Parameters = buf[at:len(buf):len(buf)]
	}
	return out
}

func parseSystemTools(system string) ([]Tool, error) {
	bad := func(why string) error { return fmt.Errorf("%w: %s", ErrNotInvertible, why) }
	if !strings.HasPrefix(system, systemPromptHead) {
		return nil, bad("the system turn is not Hermes' function-calling template")
	}
	if len(system) < len(systemPromptHead)+len(systemPromptTail) || !strings.HasSuffix(system, systemPromptTail) {
		if strings.Contains(system[len(systemPromptHead):], systemPromptTail) {
			return nil, bad("the system turn is Hermes' function-calling template followed by other text (as compress appends its notice)")
		}
		return nil, bad("the system turn is not Hermes' function-calling template")
	}
	list, err := pyjson.LoadsString(system[len(systemPromptHead) : len(system)-len(systemPromptTail)])
	if err != nil {
		return nil, bad("the tool list is not JSON: " + err.Error())
	}
	if list.Kind() != pyjson.List {
		return nil, bad("the tool list is not a JSON array")
	}
	tools := make([]Tool, len(list.List()))
	for i, item := range list.List() {
		at := "tools[" + strconv.Itoa(i) + "]"
		mem := item.Members()
		if item.Kind() != pyjson.Dict || len(mem) != 4 || mem[0].Key != "name" || mem[1].Key != "description" ||
			mem[2].Key != "parameters" || mem[3].Key != "required" {
			return nil, bad(at + ` is not {"name", "description", "parameters", "required"}`)
		}
		switch {
		case mem[0].Value.Kind() != pyjson.Str:
			return nil, bad(at + ".name is not a string")
		case mem[1].Value.Kind() != pyjson.Str:
			return nil, bad(at + ".description is not a string")
		case mem[2].Value.Kind() == pyjson.Str:
			return nil, bad(at + ".parameters is a string, not a schema")
		case !mem[3].Value.IsNone():
			return nil, bad(at + ".required is not null")
		}
		tools[i] = Tool{Type: "function", Function: FunctionSpec{
			Name:        mem[0].Value.Str(),
			Description: mem[1].Value.Str(),
			Parameters:  pyjson.Append(nil, mem[2].Value),
		}}
	}
	if HermesSystemPrompt(tools) != system {
		return nil, bad("the tool list is not written as HermesSystemPrompt writes it")
	}
	return tools, nil
}
