package schemas

import (
	"slices"
	"testing"
)

// TestGPTTurnsPointAtGPTTurns checks GPTTurns against ToShareGPT itself on
// conversations of every shape the grouping knows: each assistant message
// (and only one) points at a gpt turn, in order, and every gpt turn is
// pointed at.
func TestGPTTurnsPointAtGPTTurns(t *testing.T) {
	call := func(id string) []ToolCall {
		return []ToolCall{{ID: id, Type: "function", Function: FunctionCall{Name: "terminal", Arguments: `{"command":"ls"}`}}}
	}
	sys := Message{Role: "system", Content: "s"}
	user := Message{Role: "user", Content: "u"}
	ans := Message{Role: "assistant", Content: "a"}
	calls := Message{Role: "assistant", Content: "c", ToolCalls: call("x")}
	tool := Message{Role: "tool", Content: "r", ToolCallID: "x", Name: "terminal"}
	cases := []struct {
		name string
		msgs []Message
		want []int
	}{
		{"empty", nil, nil},
		{"only system", []Message{sys}, nil},
		{"answer", []Message{sys, user, ans}, []int{2}},
		{"tool loop", []Message{user, calls, tool, tool, calls, tool, ans}, []int{2, 4, 6}},
		{"calls without results", []Message{user, calls, calls, tool, ans}, []int{2, 3, 5}},
		{"second user", []Message{user, ans, user, calls, tool, ans}, []int{2, 4, 6}},
		{"stray tool and system", []Message{user, ans, tool, sys, ans}, []int{2, 3}},
		{"assistant first", []Message{sys, ans, ans}, []int{-1, 2}},
	}
	for _, c := range cases {
		got := GPTTurns(c.msgs)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
			continue
		}
		turns := ToShareGPT(c.msgs, nil)
		var gpt []int
		for i, tn := range turns {
			if tn.From == "gpt" {
				gpt = append(gpt, i)
			}
		}
		var pointed []int
		for _, i := range got {
			if i >= 0 {
				pointed = append(pointed, i)
			}
		}
		if !slices.Equal(pointed, gpt) {
			t.Errorf("%s: GPTTurns %v, ToShareGPT's gpt turns %v", c.name, got, gpt)
		}
	}
}
