package schemas

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/schemas/pyjson"
)

// Tags Hermes rewrites and writes in gpt turns.
const (
	scratchpadOpen  = "<REASONING_SCRATCHPAD>"
	scratchpadClose = "</REASONING_SCRATCHPAD>"
	thinkOpen       = "<think>"
	emptyThink      = "<think>\n</think>\n"
)

// Hermes' trajectory system prompt, split around the tool list. These are
// format strings that must stay byte-identical to Hermes'.
const (
	systemPromptHead = "You are a function calling AI model. You are provided with function signatures within <tools> </tools> XML tags. " +
		"You may call one or more functions to assist with the user query. If available tools are not relevant in assisting " +
		"with user query, just respond in natural conversational language. Don't make assumptions about what values to plug " +
		"into functions. After calling & executing the functions, you will be provided with function results within " +
		"<tool_response> </tool_response> XML tags. Here are the available tools:\n" +
		"<tools>\n"
	systemPromptTail = "\n</tools>\n" +
		"For each function call return a JSON object, with the following pydantic model json schema for each:\n" +
		"{'title': 'FunctionCall', 'type': 'object', 'properties': {'name': {'title': 'Name', 'type': 'string'}, " +
		"'arguments': {'title': 'Arguments', 'type': 'object'}}, 'required': ['name', 'arguments']}\n" +
		"Each function call should be enclosed within <tool_call> </tool_call> XML tags.\n" +
		"Example:\n<tool_call>\n{'name': <function-name>,'arguments': <args-dict>}\n</tool_call>"
)

// HermesSystemPrompt returns the system turn Hermes writes at the top of every
// trajectory: its function-calling template with the tool list rendered as
// json.dumps([{"name", "description", "parameters", "required": null}, ...],
// ensure_ascii=False). A missing description is ""; missing parameters are
// {}; parameters that are not valid JSON are also rendered as {} (Hermes
// always holds a parsed schema, so no byte-identical form exists).
//
// The result depends only on tools: callers converting many records with one
// tool set should compute it once and use ToShareGPTWithSystem. It costs one
// pass over the tool schemas.
func HermesSystemPrompt(tools []Tool) string {
	b := make([]byte, 0, len(systemPromptHead)+len(systemPromptTail)+256*len(tools)+2)
	b = append(b, systemPromptHead...)
	b = appendToolsJSON(b, tools)
	b = append(b, systemPromptTail...)
	return string(b)
}

func appendToolsJSON(b []byte, tools []Tool) []byte {
	b = append(b, '[')
	for i := range tools {
		f := &tools[i].Function
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, `{"name": `...)
		b = pyjson.AppendString(b, f.Name)
		b = append(b, `, "description": `...)
		b = pyjson.AppendString(b, f.Description)
		b = append(b, `, "parameters": `...)
		if len(f.Parameters) == 0 {
			b = append(b, "{}"...)
		} else {
			var err error
			b, err = pyjson.AppendJSON(b, string(f.Parameters))
			if err != nil {
				b = append(b, "{}"...)
			}
		}
		b = append(b, `, "required": null}`...)
	}
	return append(b, ']')
}

// ToShareGPT converts one chat transcript to Hermes' ShareGPT trajectory,
// byte for byte as Hermes' convert_to_trajectory_format writes it:
//
//   - a system turn with HermesSystemPrompt(tools);
//   - a human turn with the first message's content (ContentJSON, a list of
//     parts, when set, as Hermes writes a list): like Hermes, the first
//     message is taken as the user's prompt whatever its role. System
//     messages before it are skipped (Hermes keeps its system prompt out of
//     the message list, so the trajectory's system turn is always the
//     function-calling template);
//   - for each later user message a human turn with its content, unchanged
//     (again ContentJSON when set);
//   - for each assistant message a gpt turn: a <think> block of the
//     reasoning (when not blank), the content with <REASONING_SCRATCHPAD>
//     tags turned into <think> tags, and one <tool_call> block per call
//     holding {"name", "arguments"} with the arguments parsed as JSON ({}
//     when they do not parse); an empty "<think>\n</think>\n" is prepended
//     when the turn holds no "<think>"; the value is right-trimmed (with tool
//     calls) or trimmed (without), Python whitespace;
//   - the tool messages that directly follow an assistant message with tool
//     calls become one tool turn of <tool_response> blocks joined by "\n",
//     each {"tool_call_id", "name", "content"}, where name comes from the
//     call at the same position and content is embedded as JSON when it
//     starts, after trimming, with "{" or "[" and parses, else as a string
//     (ContentJSON, when set, is embedded as it is, as Hermes embeds a list).
//
// An assistant message's content is always its text (Content): Hermes cannot
// convert an assistant message whose content is a non-empty list (it stops
// with a TypeError), so there is no Hermes form to follow.
//
// Later system messages and tool messages that do not follow an assistant
// tool call are dropped, as Hermes drops them. Invalid UTF-8 in any text is
// replaced by U+FFFD, so every value is valid UTF-8.
//
// It is called once per record; it allocates the turn slice and one string
// per turn, reusing a single scratch buffer while building them.
func ToShareGPT(messages []Message, tools []Tool) []Turn {
	return ToShareGPTWithSystem(HermesSystemPrompt(tools), messages)
}

// ToShareGPTWithSystem is ToShareGPT with the system turn's text given, as
// returned by HermesSystemPrompt for the record's tools.
func ToShareGPTWithSystem(system string, messages []Message) []Turn {
	turns := make([]Turn, 0, len(messages)+1)
	turns = append(turns, Turn{From: "system", Value: system})
	eachShareGPTTurn(nil, messages, func(from string, value []byte, valueJSON string) bool {
		turns = append(turns, Turn{From: from, Value: string(value), ValueJSON: valueJSON})
		return true
	})
	return turns
}

// eachShareGPTTurn builds the turns ToShareGPTWithSystem writes after the
// system turn, in order, calling yield with each turn's from, value and
// value JSON until yield returns false. value is built in buf and valid
// only during the call; the grown buf is returned for reuse. It is the one
// place the conversion groups messages into turns: ToShareGPTWithSystem
// keeps what it yields, FromShareGPT compares it with a record's turns.
func eachShareGPTTurn(buf []byte, messages []Message, yield func(from string, value []byte, valueJSON string) bool) []byte {
	k := 0
	for k < len(messages) && messages[k].Role == "system" {
		k++
	}
	if k == len(messages) {
		return buf
	}
	buf = pyjson.AppendValidUTF8(buf[:0], messages[k].Content)
	if !yield("human", buf, messages[k].ContentJSON) {
		return buf
	}
	for i := k + 1; i < len(messages); i++ {
		m := &messages[i]
		switch m.Role {
		case "user":
			buf = pyjson.AppendValidUTF8(buf[:0], m.Content)
			if !yield("human", buf, m.ContentJSON) {
				return buf
			}
		case "assistant":
			if len(m.ToolCalls) == 0 {
				buf = appendAnswerTurn(buf[:0], m)
				if !yield("gpt", pyStrip(buf), "") {
					return buf
				}
				continue
			}
			buf = appendToolCallTurn(buf[:0], m)
			if !yield("gpt", pyRStrip(buf), "") {
				return buf
			}
			j := i + 1
			buf = buf[:0]
			for ; j < len(messages) && messages[j].Role == "tool"; j++ {
				if j > i+1 {
					buf = append(buf, '\n')
				}
				buf = appendToolResponse(buf, &messages[j], m, j-i-1)
			}
			if j > i+1 {
				if !yield("tool", buf, "") {
					return buf
				}
				i = j - 1
			}
		}
	}
	return buf
}

// appendThinkPrefix appends Hermes' <think> block for native reasoning.
func appendThinkPrefix(b []byte, m *Message) []byte {
	if pyStrip(m.Reasoning) == "" {
		return b
	}
	b = append(b, "<think>\n"...)
	b = pyjson.AppendValidUTF8(b, m.Reasoning)
	return append(b, "\n</think>\n"...)
}

// appendScratchpadAsThink appends content with <REASONING_SCRATCHPAD> tags
// turned into <think> tags. Like Hermes, nothing (not even a closing tag) is
// rewritten unless an opening tag is present. Hermes replaces the opening
// tags and then the closing tags; the two tags cannot overlap each other or
// be formed by a replacement, so one left-to-right pass gives the same text.
func appendScratchpadAsThink(b []byte, content string) []byte {
	if !strings.Contains(content, scratchpadOpen) {
		return pyjson.AppendValidUTF8(b, content)
	}
	for {
		i := strings.Index(content, "REASONING_SCRATCHPAD>")
		if i < 0 {
			break
		}
		switch {
		case i >= 1 && content[i-1] == '<':
			b = pyjson.AppendValidUTF8(b, content[:i-1])
			b = append(b, "<think>"...)
		case i >= 2 && content[i-2] == '<' && content[i-1] == '/':
			b = pyjson.AppendValidUTF8(b, content[:i-2])
			b = append(b, "</think>"...)
		default:
			b = pyjson.AppendValidUTF8(b, content[:i+len("REASONING_SCRATCHPAD>")])
		}
		content = content[i+len("REASONING_SCRATCHPAD>"):]
	}
	return pyjson.AppendValidUTF8(b, content)
}

// appendAnswerTurn builds a gpt turn without tool calls (before trimming).
func appendAnswerTurn(b []byte, m *Message) []byte {
	b = appendThinkPrefix(b, m)
	b = appendScratchpadAsThink(b, m.Content)
	return ensureThink(b)
}

// appendToolCallTurn builds a gpt turn with tool calls (before trimming).
func appendToolCallTurn(b []byte, m *Message) []byte {
	b = appendThinkPrefix(b, m)
	if pyStrip(m.Content) != "" {
		b = appendScratchpadAsThink(b, m.Content)
		b = append(b, '\n')
	}
	for k := range m.ToolCalls {
		fn := &m.ToolCalls[k].Function
		b = append(b, "<tool_call>\n"...)
		b = append(b, `{"name": `...)
		b = pyjson.AppendString(b, fn.Name)
		b = append(b, `, "arguments": `...)
		var err error
		b, err = pyjson.AppendJSON(b, fn.Arguments)
		if err != nil {
			b = append(b, "{}"...)
		}
		b = append(b, "}\n</tool_call>\n"...)
	}
	return ensureThink(b)
}

// ensureThink prepends an empty <think> block when b holds none.
func ensureThink(b []byte) []byte {
	if bytes.Contains(b, []byte(thinkOpen)) {
		return b
	}
	n := len(emptyThink)
	b = append(b, emptyThink...) // grow by n
	copy(b[n:], b[:len(b)-n])
	copy(b, emptyThink)
	return b
}

// appendToolResponse appends one <tool_response> block for tool message t,
// the idx-th result after assistant message a.
func appendToolResponse(b []byte, t *Message, a *Message, idx int) []byte {
	b = append(b, "<tool_response>\n"...)
	b = append(b, `{"tool_call_id": `...)
	b = pyjson.AppendString(b, t.ToolCallID)
	b = append(b, `, "name": `...)
	if idx < len(a.ToolCalls) {
		b = pyjson.AppendString(b, a.ToolCalls[idx].Function.Name)
	} else {
		b = append(b, `"unknown"`...)
	}
	b = append(b, `, "content": `...)
	if t.ContentJSON != "" {
		// Hermes' strip() fails on a list, so the list is embedded as it is.
		b = append(b, t.ContentJSON...)
		return append(b, "}\n</tool_response>"...)
	}
	embedded := false
	if s := pyLStrip(t.Content); len(s) > 0 && (s[0] == '{' || s[0] == '[') {
		var err error
		if b, err = pyjson.AppendJSON(b, t.Content); err == nil {
			embedded = true
		}
	}
	if !embedded {
		b = pyjson.AppendString(b, t.Content)
	}
	return append(b, "}\n</tool_response>"...)
}

// ConvertOptions change how ConvertOpenAILineWith reads a transcript line.
// The zero value converts exactly as Hermes does.
type ConvertOptions struct {
	// FlattenContent writes message content that is a list of parts as one
	// string (text parts joined with "\n", image parts as "[screenshot]")
	// instead of the list Hermes writes, for trainers that need strings.
	FlattenContent bool
}

// ConvertOpenAILine converts one line of an OpenAI-format transcript file,
// {"messages": [...], "tools": [...]}, to Hermes' ShareGPT turns; it backs the
// `hermes-pipe sharegpt` command. See ParseOpenAILine for what a line may
// hold; a bad line yields a *FieldError naming the field (for example
// "messages[3].tool_calls[0].function.arguments"). It is called once per
// line and costs one parse of the line plus the conversion.
func ConvertOpenAILine(line []byte) ([]Turn, error) {
	return ConvertOpenAILineWith(line, ConvertOptions{})
}

// ConvertOpenAILineWith is ConvertOpenAILine with options.
func ConvertOpenAILineWith(line []byte, opts ConvertOptions) ([]Turn, error) {
	msgs, tools, err := ParseOpenAILineWith(line, opts)
	if err != nil {
		return nil, err
	}
	return ToShareGPT(msgs, tools), nil
}

// ParseOpenAILine validates one OpenAI-format transcript line and returns its
// messages and tools. The line is parsed as Python's json.loads would parse it
// (so a repeated key keeps its last value). Accepted shapes:
//
//   - "messages" (required, non-empty array): objects with "role" one of
//     system, developer (treated as system), user, assistant, tool; the first
//     message that is not a system message must be a user message;
//   - "content": a string, null (""), an array of parts, or Hermes'
//     multimodal tool result {"_multimodal": true, "content": [...],
//     "text_summary": ...}. The multimodal result becomes text as Hermes
//     saves it in trajectories: its text_summary when not empty, else its
//     text parts ({"type": "text"}) joined with "\n" (image parts left out),
//     else "[multimodal tool result]". An array of parts is kept as Hermes
//     keeps it (Message.ContentJSON): every part as it is, except image parts
//     (image_url, image, input_image), which become {"type": "text", "text":
//     "[screenshot]"}. Its text form (Message.Content) joins text parts
//     ("text", "input_text", "output_text") with "\n", an image part being
//     "[screenshot]"; it is used for assistant messages and with
//     FlattenContent, where any other part is an error;
//   - "reasoning" or "reasoning_content": a string or null; "reasoning" wins
//     when both are non-empty;
//   - "tool_calls": null or an array of {"id", "type", "function": {"name",
//     "arguments"}}; arguments may be a string (kept as is, parsed during
//     conversion), an object or array (re-encoded), or null/absent (treated
//     as unparseable, so {} in the trajectory);
//   - "tool_call_id", "name": strings or null;
//   - "tools" (optional): null or an array of {"type": "function",
//     "function": {"name", "description", "parameters"}}; "parameters" may
//     be the schema or a string holding the schema's JSON text.
//
// Where it reads more than Hermes' converter, deliberately: "reasoning_content"
// (Hermes reads only "reasoning"; the OpenAI-compatible servers that return
// reasoning name it so), the "developer" role, assistant content given as
// parts (Hermes fails on it), and "parameters" given as JSON text (Hermes
// would write the string itself; Parquet files and Hugging Face datasets
// hold schemas so). What export writes (schemas.FromShareGPT's messages)
// reads back to the record's turns. Unknown fields are ignored. A line that is not
// valid UTF-8 is an error naming the field that holds the bad bytes. It
// allocates the messages and tools.
func ParseOpenAILine(line []byte) ([]Message, []Tool, error) {
	return ParseOpenAILineWith(line, ConvertOptions{})
}

// ParseOpenAILineWith is ParseOpenAILine with options.
func ParseOpenAILineWith(line []byte, opts ConvertOptions) ([]Message, []Tool, error) {
	if field, bad := InvalidUTF8Field(line); bad {
		// Hermes reads transcripts as UTF-8 and would stop here; replacing
		// the bytes would silently change the trajectory.
		return nil, nil, &FieldError{Field: field, Reason: "invalid UTF-8: the line must be UTF-8 text"}
	}
	root, err := pyjson.Loads(line)
	if err != nil {
		return nil, nil, &FieldError{Reason: err.Error()}
	}
	if root.Kind() != pyjson.Dict {
		return nil, nil, &FieldError{Reason: "line must be a JSON object, got " + pyKindName(root)}
	}
	mv, ok := root.Get("messages")
	if !ok {
		return nil, nil, &FieldError{Field: "messages", Reason: "required"}
	}
	if mv.Kind() != pyjson.List {
		return nil, nil, &FieldError{Field: "messages", Reason: "must be an array, got " + pyKindName(mv)}
	}
	if len(mv.List()) == 0 {
		return nil, nil, &FieldError{Field: "messages", Reason: "must hold at least one message"}
	}
	msgs := make([]Message, len(mv.List()))
	first := -1
	for i, item := range mv.List() {
		path := "messages[" + itoa(i) + "]"
		if err := parseOpenAIMessage(item, path, &msgs[i], opts); err != nil {
			return nil, nil, err
		}
		if first < 0 && msgs[i].Role != "system" {
			first = i
			if msgs[i].Role != "user" {
				return nil, nil, &FieldError{Field: path + ".role", Reason: `the first message after system messages must be "user", got "` + msgs[i].Role + `"`}
			}
		}
	}
	if first < 0 {
		return nil, nil, &FieldError{Field: "messages", Reason: "holds no user message"}
	}
	var tools []Tool
	if tv, ok := root.Get("tools"); ok && !tv.IsNone() {
		if tv.Kind() != pyjson.List {
			return nil, nil, &FieldError{Field: "tools", Reason: "must be an array, got " + pyKindName(tv)}
		}
		tools = make([]Tool, len(tv.List()))
		for i, item := range tv.List() {
			if err := parseOpenAITool(item, "tools["+itoa(i)+"]", &tools[i]); err != nil {
				return nil, nil, err
			}
		}
	}
	return msgs, tools, nil
}

func parseOpenAIMessage(v pyjson.Value, path string, m *Message, opts ConvertOptions) error {
	if v.Kind() != pyjson.Dict {
		return &FieldError{Field: path, Reason: "must be an object, got " + pyKindName(v)}
	}
	role, err := optString(v, "role", path)
	if err != nil {
		return err
	}
	switch role {
	case "system", "user", "assistant", "tool":
	case "developer":
		role = "system"
	case "":
		return &FieldError{Field: path + ".role", Reason: "required"}
	default:
		return &FieldError{Field: path + ".role", Reason: `must be one of system, developer, user, assistant, tool; got "` + role + `"`}
	}
	m.Role = role
	if err = openAIContent(v, path, m, opts); err != nil {
		return err
	}
	if m.Reasoning, err = optString(v, "reasoning", path); err != nil {
		return err
	}
	rc, err := optString(v, "reasoning_content", path)
	if err != nil {
		return err
	}
	if m.Reasoning == "" {
		m.Reasoning = rc
	}
	if m.ToolCallID, err = optString(v, "tool_call_id", path); err != nil {
		return err
	}
	if m.Name, err = optString(v, "name", path); err != nil {
		return err
	}
	tcv, ok := v.Get("tool_calls")
	if !ok || tcv.IsNone() {
		return nil
	}
	if tcv.Kind() != pyjson.List {
		return &FieldError{Field: path + ".tool_calls", Reason: "must be an array, got " + pyKindName(tcv)}
	}
	if len(tcv.List()) > 0 {
		m.ToolCalls = make([]ToolCall, len(tcv.List()))
	}
	for j, item := range tcv.List() {
		tp := path + ".tool_calls[" + itoa(j) + "]"
		tc := &m.ToolCalls[j]
		if item.Kind() != pyjson.Dict {
			return &FieldError{Field: tp, Reason: "must be an object, got " + pyKindName(item)}
		}
		if tc.ID, err = optString(item, "id", tp); err != nil {
			return err
		}
		if tc.Type, err = optString(item, "type", tp); err != nil {
			return err
		}
		fn, ok := item.Get("function")
		if !ok {
			return &FieldError{Field: tp + ".function", Reason: "required"}
		}
		if fn.Kind() != pyjson.Dict {
			return &FieldError{Field: tp + ".function", Reason: "must be an object, got " + pyKindName(fn)}
		}
		fp := tp + ".function"
		if tc.Function.Name, err = requiredString(fn, "name", fp); err != nil {
			return err
		}
		args, _ := fn.Get("arguments")
		switch args.Kind() {
		case pyjson.None:
		case pyjson.Str:
			tc.Function.Arguments = args.Str()
		case pyjson.Dict, pyjson.List:
			tc.Function.Arguments = pyjson.Dumps(args)
		default:
			return &FieldError{Field: fp + ".arguments", Reason: "must be a string or an object, got " + pyKindName(args)}
		}
	}
	return nil
}

// imagePart reports whether part is an image part, as Hermes' trajectory
// normaliser recognises one.
func imagePart(part pyjson.Value) bool {
	if part.Kind() != pyjson.Dict {
		return false
	}
	t, _ := part.Get("type")
	if t.Kind() != pyjson.Str {
		return false
	}
	switch t.Str() {
	case "image_url", "image", "input_image":
		return true
	}
	return false
}

// screenshotPart is the part Hermes puts in place of an image part.
const screenshotPart = `{"type": "text", "text": "[screenshot]"}`

// openAIContent sets m.Content (and m.ContentJSON for a list of parts) from
// a message's content.
func openAIContent(v pyjson.Value, path string, m *Message, opts ConvertOptions) error {
	c, ok := v.Get("content")
	if !ok {
		return nil
	}
	switch c.Kind() {
	case pyjson.None:
		return nil
	case pyjson.Str:
		m.Content = c.Str()
		return nil
	case pyjson.Dict:
		if mm, _ := c.Get("_multimodal"); mm.Bool() {
			if parts, _ := c.Get("content"); parts.Kind() == pyjson.List {
				var err error
				m.Content, err = multimodalSummary(c, parts, path+".content")
				return err
			}
		}
		return &FieldError{Field: path + ".content", Reason: `an object must be a multimodal tool result {"_multimodal": true, "content": [...]}`}
	case pyjson.List:
	default:
		return &FieldError{Field: path + ".content", Reason: "must be a string, an array of parts or null, got " + pyKindName(c)}
	}
	text, flatErr := flattenParts(c, path)
	if opts.FlattenContent || m.Role == "assistant" {
		if flatErr != nil {
			return flatErr
		}
		m.Content = text
		return nil
	}
	m.Content = text // best effort: the written form is ContentJSON
	b := []byte{'['}
	for k, part := range c.List() {
		if k > 0 {
			b = append(b, ", "...)
		}
		if imagePart(part) {
			b = append(b, screenshotPart...)
		} else {
			b = pyjson.Append(b, part)
		}
	}
	m.ContentJSON = string(append(b, ']'))
	return nil
}

// flattenParts joins the text of content parts with "\n", an image part
// being "[screenshot]".
func flattenParts(c pyjson.Value, path string) (string, error) {
	var b strings.Builder
	for k, part := range c.List() {
		pp := path + ".content[" + itoa(k) + "]"
		if part.Kind() != pyjson.Dict {
			return "", &FieldError{Field: pp, Reason: "must be an object, got " + pyKindName(part)}
		}
		typ, err := requiredString(part, "type", pp)
		if err != nil {
			return "", err
		}
		var text string
		switch typ {
		case "text", "input_text", "output_text":
			if text, err = requiredString(part, "text", pp); err != nil {
				return "", err
			}
		case "image_url", "image", "input_image":
			text = "[screenshot]"
		default:
			return "", &FieldError{Field: pp + ".type", Reason: `must be "text" or an image part, got "` + typ + `"`}
		}
		if k > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(text)
	}
	return b.String(), nil
}

// multimodalSummary is the text Hermes saves for a multimodal tool result:
// text_summary when not empty, else the text parts joined with "\n", else
// "[multimodal tool result]".
func multimodalSummary(c, parts pyjson.Value, path string) (string, error) {
	if ts, ok := c.Get("text_summary"); ok {
		switch {
		case ts.Kind() == pyjson.Str && ts.Str() != "":
			return ts.Str(), nil
		case ts.Kind() != pyjson.Str && !ts.IsNone():
			return "", &FieldError{Field: path + ".text_summary", Reason: "must be a string or null, got " + pyKindName(ts)}
		}
	}
	var texts []string
	for k, part := range parts.List() {
		if part.Kind() != pyjson.Dict {
			continue
		}
		if t, _ := part.Get("type"); t.Kind() != pyjson.Str || t.Str() != "text" {
			continue
		}
		text, err := optString(part, "text", path+".content["+itoa(k)+"]")
		if err != nil {
			return "", err
		}
		if tv, ok := part.Get("text"); ok && tv.IsNone() {
			text = "None" // Hermes' str(None)
		}
		texts = append(texts, text)
	}
	if len(texts) == 0 {
		return "[multimodal tool result]", nil
	}
	return strings.Join(texts, "\n"), nil
}

// AppendTurnValue appends the JSON of t's value as Python's json.dumps
// writes it: ValueJSON when set, else Value as a string.
func AppendTurnValue(b []byte, t *Turn) []byte {
	if t.ValueJSON != "" {
		return append(b, t.ValueJSON...)
	}
	return pyjson.AppendString(b, t.Value)
}

func parseOpenAITool(v pyjson.Value, path string, t *Tool) error {
	if v.Kind() != pyjson.Dict {
		return &FieldError{Field: path, Reason: "must be an object, got " + pyKindName(v)}
	}
	var err error
	if t.Type, err = optString(v, "type", path); err != nil {
		return err
	}
	fn, ok := v.Get("function")
	if !ok {
		return &FieldError{Field: path + ".function", Reason: "required"}
	}
	fp := path + ".function"
	if fn.Kind() != pyjson.Dict {
		return &FieldError{Field: fp, Reason: "must be an object, got " + pyKindName(fn)}
	}
	if t.Function.Name, err = requiredString(fn, "name", fp); err != nil {
		return err
	}
	if t.Function.Description, err = optString(fn, "description", fp); err != nil {
		return err
	}
	if p, ok := fn.Get("parameters"); ok {
		if p.Kind() == pyjson.Str {
			// The schema as JSON text, as Parquet files of mixed tool
			// schemas hold it.
			schema, err := pyjson.LoadsString(p.Str())
			if err != nil || schema.Kind() != pyjson.Dict {
				return &FieldError{Field: fp + ".parameters", Reason: "a string must hold a JSON object (the schema)"}
			}
			p = schema
		}
		t.Function.Parameters = pyjson.Append(nil, p)
	}
	return nil
}

// optString returns the string member key of v, "" when absent or null.
func optString(v pyjson.Value, key, path string) (string, error) {
	s, ok := v.Get(key)
	switch {
	case !ok || s.IsNone():
		return "", nil
	case s.Kind() == pyjson.Str:
		return s.Str(), nil
	}
	return "", &FieldError{Field: path + "." + key, Reason: "must be a string, got " + pyKindName(s)}
}

// requiredString returns the string member key of v or an error.
func requiredString(v pyjson.Value, key, path string) (string, error) {
	s, ok := v.Get(key)
	if !ok || s.IsNone() {
		return "", &FieldError{Field: path + "." + key, Reason: "required"}
	}
	if s.Kind() != pyjson.Str {
		return "", &FieldError{Field: path + "." + key, Reason: "must be a string, got " + pyKindName(s)}
	}
	return s.Str(), nil
}

func pyKindName(v pyjson.Value) string {
	switch v.Kind() {
	case pyjson.None:
		return "null"
	case pyjson.Bool:
		return "a boolean"
	case pyjson.Int, pyjson.Float:
		return "a number"
	case pyjson.Str:
		return "a string"
	case pyjson.List:
		return "an array"
	}
	return "an object"
}

func itoa(i int) string { return strconv.Itoa(i) }

// EachBlock calls fn with the text between each open tag and the close tag
// after it in a turn's value (v), in order, n counting from 0, until fn
// returns false or a block has no close tag: the <tool_call> blocks of a
// gpt turn, the <tool_response> blocks of a tool turn.
func EachBlock(v, open, close string, fn func(n int, inner string) bool) {
	for n := 0; ; n++ {
		i := strings.Index(v, open)
		if i < 0 {
			return
		}
		v = v[i+len(open):]
		j := strings.Index(v, close)
		if j < 0 || !fn(n, v[:j]) {
			return
		}
		v = v[j+len(close):]
	}
}
