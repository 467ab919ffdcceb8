package schemas

// GPTTurns returns, for each assistant message of messages in order, the
// index of the gpt turn ToShareGPT (and ToShareGPTWithSystem) makes of it
// in the record's conversations, or -1 when it makes none (an assistant
// message before any other, which the conversion writes as the human turn).
// It follows eachShareGPTTurn's grouping: the system turn first, leading
// system messages left out, a human turn per user message, a gpt turn per
// assistant message, one tool turn for the tool results after an assistant
// message with tool calls, and any other message left out. The rollout
// places each turn's logprobs (TurnLogprobs.Turn) with it.
func GPTTurns(messages []Message) []int {
	var out []int
	k := 0
	for k < len(messages) && messages[k].Role == "system" {
		k++
	}
	if k == len(messages) {
		return out
	}
	if messages[k].Role == "assistant" {
		out = append(out, -1)
	}
	turn := 1 // the system turn is 0, messages[k]'s human turn 1
	for i := k + 1; i < len(messages); i++ {
		m := &messages[i]
		switch m.Role {
		case "user":
			turn++
		case "assistant":
			turn++
			out = append(out, turn)
			if len(m.ToolCalls) == 0 {
				continue
			}
			j := i + 1
			for j < len(messages) && messages[j].Role == "tool" {
				j++
			}
			if j > i+1 {
				turn++
				i = j - 1
			}
		}
	}
	return out
}
