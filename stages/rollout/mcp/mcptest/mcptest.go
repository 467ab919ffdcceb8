// Package mcptest is a small real MCP server, built on the same SDK as the
// client, for tests of the MCP client, the agent loop and the CLI. It runs
// over stdio inside a test binary (MaybeServe, called from TestMain, turns
// the binary into the server when MCPTEST_SERVE is set) or over HTTP
// (Handler, for httptest). It must not import cmd.
//
// Its tools: echo (text), add (structuredContent), fail (isError), crash
// (the process exits mid-call), picture (an image part), env (the value
// of a variable, to check what a server sees), count (a per-process
// counter, to tell a fresh server from a shared one), pid, sleep, and
// ls (the names in the server's working folder or a path given).
package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// EnvServe names the variable that turns a test binary into the stdio
// server; its value is the server's name in initialize.
const EnvServe = "MCPTEST_SERVE"

// MaybeServe serves MCP over stdin/stdout and exits when EnvServe is set;
// otherwise it returns at once. Call it first thing in TestMain.
func MaybeServe() {
	name := os.Getenv(EnvServe)
	if name == "" {
		return
	}
	if os.Getenv("MCPTEST_FAIL_START") != "" {
		fmt.Fprintln(os.Stderr, "mcptest: refusing to start: "+os.Getenv("MCPTEST_FAIL_START"))
		os.Exit(3)
	}
	err := New(name).Run(context.Background(), &sdk.StdioTransport{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Handler serves a fresh server per HTTP session (Streamable HTTP).
func Handler(name string) http.Handler {
	srv := New(name)
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
}

// SSEHandler serves the server over the older HTTP+SSE transport.
func SSEHandler(name string) http.Handler {
	srv := New(name)
	return sdk.NewSSEHandler(func(*http.Request) *sdk.Server { return srv }, nil)
}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

// New builds the server and its tools.
func New(name string) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: name, Version: "1"}, nil)
	var counter atomic.Int64
	obj := func(props string, required ...string) json.RawMessage {
		r, _ := json.Marshal(required)
		if required == nil {
			r = []byte("[]")
		}
		return json.RawMessage(`{"type":"object","properties":` + props + `,"required":` + string(r) + `}`)
	}
	args := func(req *sdk.CallToolRequest) map[string]any {
		m := map[string]any{}
		_ = json.Unmarshal(req.Params.Arguments, &m)
		return m
	}
	s.AddTool(&sdk.Tool{Name: "echo", Description: "Echo the text back.", InputSchema: obj(`{"text":{"type":"string","description":"What to echo"}}`, "text")},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			t, _ := args(req)["text"].(string)
			return text(t), nil
		})
	s.AddTool(&sdk.Tool{Name: "add", Description: "Add two numbers.", InputSchema: obj(`{"a":{"type":"number"},"b":{"type":"number"}}`, "a", "b")},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			a := args(req)
			x, _ := a["a"].(float64)
			y, _ := a["b"].(float64)
			sum := x + y
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strconv.FormatFloat(sum, 'f', -1, 64)}},
				StructuredContent: map[string]any{"sum": sum}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "fail", Description: "Always fails.", InputSchema: obj(`{}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			r := text("this tool always fails")
			r.IsError = true
			return r, nil
		})
	s.AddTool(&sdk.Tool{Name: "crash", Description: "Exit the server process.", InputSchema: obj(`{}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			fmt.Fprintln(os.Stderr, "mcptest: crashing as asked")
			os.Exit(7)
			return nil, nil
		})
	s.AddTool(&sdk.Tool{Name: "picture", Description: "Return a tiny image.", InputSchema: obj(`{}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a picture:"},
				&sdk.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG....")}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "env", Description: "Read an environment variable.", InputSchema: obj(`{"name":{"type":"string"}}`, "name")},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			n, _ := args(req)["name"].(string)
			v, ok := os.LookupEnv(n)
			if !ok {
				return text("<unset>"), nil
			}
			return text(v), nil
		})
	s.AddTool(&sdk.Tool{Name: "count", Description: "Count calls in this server process.", InputSchema: obj(`{}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text(strconv.FormatInt(counter.Add(1), 10)), nil
		})
	s.AddTool(&sdk.Tool{Name: "pid", Description: "The server's process id.", InputSchema: obj(`{}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text(strconv.Itoa(os.Getpid())), nil
		})
	s.AddTool(&sdk.Tool{Name: "sleep", Description: "Sleep for some milliseconds.", InputSchema: obj(`{"ms":{"type":"integer"}}`, "ms")},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			ms, _ := args(req)["ms"].(float64)
			select {
			case <-time.After(time.Duration(ms) * time.Millisecond):
			case <-ctx.Done():
			}
			return text("slept"), nil
		})
	s.AddTool(&sdk.Tool{Name: "ls", Description: "List a folder (default: the server's working folder).", InputSchema: obj(`{"path":{"type":"string"}}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			p, _ := args(req)["path"].(string)
			if p == "" {
				p = "."
			}
			ents, err := os.ReadDir(p)
			if err != nil {
				r := text(err.Error())
				r.IsError = true
				return r, nil
			}
			names := []string{}
			for _, e := range ents {
				names = append(names, e.Name())
			}
			sort.Strings(names)
			b, _ := json.Marshal(names)
			return text(string(b)), nil
		})
	return s
}
