package mcp

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestOfferedSchemaIsTheServersSchema: the parameters offered to the model
// for a tool are the inputSchema the server sent, every member and value
// kept. The SDK hands the client a schema decoded into a map (its Tool
// .InputSchema, "the default JSON marshaling of the server's input schema")
// and no raw form, so the server's member order cannot be kept: members
// come out sorted, the same bytes for the same schema in every run.
func TestOfferedSchemaIsTheServersSchema(t *testing.T) {
	m := start(t, `{"mcpServers": {`+stdioConfig(t, "s", "")+`}}`)
	// As mcptest sends it, members out of order.
	sent := `{"type":"object","properties":{"text":{"type":"string","description":"What to echo"}},"required":["text"]}`
	sorted := `{"properties":{"text":{"description":"What to echo","type":"string"}},"required":["text"],"type":"object"}`
	for _, tl := range m.Tools("mcp-s") {
		if tl.Function.Name != "mcp_s_echo" {
			continue
		}
		got := string(tl.Function.Parameters)
		var a, b any
		if err := json.Unmarshal([]byte(got), &a); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal([]byte(sent), &b)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("offered %s, the server sent %s", got, sent)
		}
		if got != sorted {
			t.Fatalf("offered %s, want the sorted form %s", got, sorted)
		}
		return
	}
	t.Fatal("no mcp_s_echo")
}
