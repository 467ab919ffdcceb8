package schemas

import "encoding/json"

// Message is one OpenAI chat-completions message as the agent loop keeps it.
// Reasoning holds the model's reasoning captured from the `reasoning` or
// `reasoning_content` response fields (or a leading <think> block in content).
//
// ContentJSON, when not empty, says the content was not a string: it holds
// the content as Hermes keeps it for a trajectory (a list of content parts,
// image parts replaced by Hermes' {"type": "text", "text": "[screenshot]"}
// part), as Python's json.dumps writes it. Content then holds the same
// parts flattened to text. The agent loop's messages never set it.
type Message struct {
	Role        string     `json:"role"`
	Content     string     `json:"content"`
	ContentJSON string     `json:"-"`
	Reasoning   string     `json:"reasoning,omitempty"`
	ToolCalls   []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID  string     `json:"tool_call_id,omitempty"`
	Name        string     `json:"name,omitempty"`
}

// ToolCall is one function call requested by the assistant. Arguments is the
// raw JSON text the model produced, which may be invalid.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its raw arguments text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is one OpenAI tool definition ({"type":"function","function":{...}}).
type Tool struct {
	Type     string       `json:"type"`
	Function FunctionSpec `json:"function"`
}

// FunctionSpec describes a callable function. Parameters is a JSON Schema
// object kept as raw JSON so its key order survives into the system prompt.
type FunctionSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}
