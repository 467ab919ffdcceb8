package view

import (
	"strconv"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// toolFailures finds the tool results of a record line that failed, by the
// rule tool_stats counts them with (schemas.ToolResultSucceeded on each
// result's content), so the record page can show them apart from results
// that succeeded: tool turn index (as a string, a JSON object's key) → the
// positions, from 0, of its <tool_response> blocks that failed. A line
// that does not decode gives none. It reads the conversation once.
func toolFailures(line []byte) map[string][]int {
	var rec schemas.Record
	if schemas.DecodeMembers(line, &rec, schemas.MemberConversations) != nil {
		return nil
	}
	out := map[string][]int{}
	for k, t := range rec.Conversations {
		if t.From != "tool" {
			continue
		}
		var failed []int
		schemas.EachBlock(t.Value, "<tool_response>", "</tool_response>", func(n int, block string) bool {
			if !schemas.ToolResultSucceeded(responseContent(strings.TrimSpace(block))) {
				failed = append(failed, n)
			}
			return true
		})
		if failed != nil {
			out[strconv.Itoa(k)] = failed
		}
	}
	return out
}

// responseContent is the content of one <tool_response> block as the tool
// message held it: the "content" member of the block's JSON, decoded when
// it is a string and as written otherwise, or the whole block when it has
// none.
func responseContent(block string) string {
	if !strings.HasPrefix(block, "{") {
		return block
	}
	raw, _, ok := schemas.FirstMember(block, "content")
	if !ok {
		return block
	}
	return schemas.JSONText(raw)
}
