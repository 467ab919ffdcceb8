package view

import (
	"reflect"
	"testing"
)

// TestToolFailures: the failed results of each tool turn, by position,
// judged as tool_stats counts them (an "error" member, "Error:" text, an
// empty result); results that succeeded and other turns are not listed.
func TestToolFailures(t *testing.T) {
	line := `{"key":"k","conversations":[` +
		`{"from":"human","value":"<tool_response>\n{\"content\": \"error: not a tool turn\"}\n</tool_response>"},` +
		`{"from":"gpt","value":"<tool_call>\n{}\n</tool_call>"},` +
		`{"from":"tool","value":"<tool_response>\n{\"tool_call_id\": \"1\", \"name\": \"terminal\", \"content\": \"{\\\"output\\\": \\\"fine\\\", \\\"exit_code\\\": 0, \\\"error\\\": null}\"}\n</tool_response>\n` +
		`<tool_response>\n{\"tool_call_id\": \"2\", \"name\": \"x\", \"content\": {\"error\": \"unknown tool\"}}\n</tool_response>"},` +
		`{"from":"gpt","value":"again"},` +
		`{"from":"tool","value":"<tool_response>\n{\"tool_call_id\": \"3\", \"name\": \"read_file\", \"content\": \"Error: no such file\"}\n</tool_response>\n` +
		`<tool_response>\n{\"tool_call_id\": \"4\", \"name\": \"read_file\", \"content\": \"\"}\n</tool_response>\n` +
		`<tool_response>\n{\"tool_call_id\": \"5\", \"name\": \"read_file\", \"content\": \"text\"}\n</tool_response>"}]}`
	want := map[string][]int{"2": {1}, "4": {0, 1}}
	if got := toolFailures([]byte(line)); !reflect.DeepEqual(got, want) {
		t.Fatalf("toolFailures = %v, want %v", got, want)
	}
	if got := toolFailures([]byte(`not json`)); len(got) != 0 {
		t.Fatalf("a line that does not decode: %v", got)
	}
}
