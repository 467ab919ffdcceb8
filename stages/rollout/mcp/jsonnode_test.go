package mcp

import (
	"strings"
	"testing"
)

// TestJSONConfigLongKeys: a JSON file is read as JSON, so a key over YAML's
// 1,024-character limit is accepted, anywhere in the file.
func TestJSONConfigLongKeys(t *testing.T) {
	long := strings.Repeat("K", 2000)
	c := mustParse(t, `{"`+long+`": 1,
 "mcpServers": {"fs": {"command": "node", "env": {"`+long+`": "v", "PORT": 8080, "F": 1.5, "B": true}}}}`, nil)
	s := c.Servers[0]
	if s.Env[long] != "v" || s.Env["PORT"] != "8080" || s.Env["F"] != "1.5" || s.Env["B"] != "true" {
		t.Fatalf("env: %v", s.Env)
	}
	// YAML's flow style, which is not JSON, still reads as YAML.
	y := mustParse(t, `{mcpServers: {fs: {command: node, args: [a, b]}}}`, nil)
	if s := y.Servers[0]; s.Command != "node" || len(s.Args) != 2 {
		t.Fatalf("flow yaml: %+v", s)
	}
}

// TestJSONConfigErrorsNameLines: errors in a JSON file name the line, as
// for YAML.
func TestJSONConfigErrorsNameLines(t *testing.T) {
	long := strings.Repeat("K", 2000)
	cases := []struct{ text, want string }{
		{"{\n\"" + long + "\": 1,\n \"mcpServers\": {\n  \"a\": {\n   \"command\": 3}}}", "cfg.json:5: mcpServers.a.command: must be a string"},
		{"{\"mcpServers\": {\n \"a\": {\"command\": \"x\"},\n \"a\": {\"command\": \"y\"}}}", `cfg.json:3: not valid JSON or YAML: key "a" already defined at line 2`},
		{"{\"mcpServers\": {\n \"a\": {\"command\": \"x\"},\n\n \"b\": {\"command\" \"y\"}}}", "cfg.json:4: not valid JSON or YAML"},
		{"{\"mcpServers\": {\"a\": {\"command\": \"x\"}}}\n{}", "cfg.json:2: not valid JSON or YAML: content after the top-level value"},
		{"{\"mcpServers\": {\"a\": {\"command\": \"x\", \"env\": {\"K\": null}}}}", "cfg.json:1: mcpServers.a.env.K: must be a string"},
	}
	for _, c := range cases {
		_, err := parse(t, c.text, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.80s:\n got %v\nwant %q", c.text, err, c.want)
		}
	}
}
