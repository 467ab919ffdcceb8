package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// Tool is one server tool as offered to the model.
type Tool struct {
	Server *Server
	Name   string       // the server's own name for it
	Spec   schemas.Tool // offered as mcp_<server>_<tool>
}

// Manager owns a run's MCP servers: it checked every server before the
// first model call (Start), keeps the run-scoped ones connected, and hands
// each rollout a Session. It is safe for concurrent use.
type Manager struct {
	cfg       *Config
	tools     []*Tool
	byName    map[string]*Tool
	byToolset map[string][]*Tool
	shared    map[*Server]*shared
}

// shared is a run-scoped server's connection, redialled after a crash.
type shared struct {
	mu sync.Mutex
	c  *conn
}

// Start is the pre-flight: it starts (or connects to) every configured
// server at once, initialises it and reads its tool list, then stops the
// rollout-scoped ones again (each rollout starts its own) and keeps the
// run-scoped ones. Rollout-scoped servers are started with ${workdir} set
// to an empty temporary folder. It fails, naming every server that failed
// with the end of its stderr, when a server cannot start, initialise or
// list its tools, when tools.include names a tool the server lacks, or
// when two tools get the same offered name. It blocks for at most the
// longest connect timeout; it spends no model tokens.
func Start(ctx context.Context, cfg *Config) (*Manager, error) {
	m := &Manager{cfg: cfg, byName: map[string]*Tool{}, byToolset: map[string][]*Tool{}, shared: map[*Server]*shared{}}
	if cfg == nil || len(cfg.Servers) == 0 {
		return m, nil
	}
	tmp, err := os.MkdirTemp("", "hermes-pipe-mcp-preflight-*")
	if err != nil {
		return nil, fmt.Errorf("mcp pre-flight: %w", err)
	}
	defer os.RemoveAll(tmp)
	type answer struct {
		c     *conn
		tools []*sdk.Tool
		err   error
	}
	answers := make([]answer, len(cfg.Servers))
	var wg sync.WaitGroup
	for i, s := range cfg.Servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dial(ctx, s, tmp)
			if err != nil {
				answers[i].err = err
				return
			}
			lctx, cancel := context.WithTimeout(ctx, s.ConnectTimeout)
			defer cancel()
			var tools []*sdk.Tool
			for t, err := range c.cs.Tools(lctx, nil) {
				if err != nil {
					c.close()
					answers[i].err = c.describe(fmt.Errorf("tools/list: %w", err))
					return
				}
				tools = append(tools, t)
			}
			answers[i] = answer{c: c, tools: tools}
		}()
	}
	wg.Wait()
	var errs []string
	for i, s := range cfg.Servers {
		a := answers[i]
		if a.err != nil {
			errs = append(errs, a.err.Error())
			continue
		}
		if s.Scope == ScopeRun {
			m.shared[s] = &shared{c: a.c}
		} else {
			a.c.close()
		}
		if err := m.addTools(s, a.tools); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) == 0 {
		errs = m.collisions()
	}
	if len(errs) > 0 {
		m.Close()
		return nil, fmt.Errorf("mcp pre-flight (%s) failed:\n  %s", cfg.File, strings.Join(errs, "\n  "))
	}
	return m, nil
}

func (m *Manager) addTools(s *Server, tools []*sdk.Tool) error {
	offered := map[string]bool{}
	for _, t := range tools {
		offered[t.Name] = true
	}
	for _, n := range s.Include {
		if !offered[n] {
			names := make([]string, 0, len(tools))
			for _, t := range tools {
				names = append(names, t.Name)
			}
			return fmt.Errorf("%s.tools.include: server %q has no tool %q (it offers: %s)", s.where, s.Name, n, strings.Join(names, ", "))
		}
	}
	include := map[string]bool{}
	for _, n := range s.Include {
		include[n] = true
	}
	exclude := map[string]bool{}
	for _, n := range s.Exclude {
		exclude[n] = true
	}
	for _, t := range tools {
		if (len(include) > 0 && !include[t.Name]) || exclude[t.Name] {
			continue
		}
		params := json.RawMessage(`{"type": "object", "properties": {}}`)
		// The SDK gives the client the server's inputSchema decoded into
		// a map[string]any and keeps no raw form (a connection wrapper
		// could see the raw result, but it would hide the Streamable HTTP
		// connection's session hook, which the SDK finds by an unexported
		// interface), so the schema is offered with every member and
		// value as sent but its members in sorted order: the same bytes
		// for the same schema in every run.
		if t.InputSchema != nil {
			b, err := json.Marshal(t.InputSchema)
			if err != nil {
				return fmt.Errorf("mcp server %q: tool %q: input schema: %v", s.Name, t.Name, err)
			}
			params = b
		}
		tool := &Tool{Server: s, Name: t.Name, Spec: schemas.Tool{Type: "function", Function: schemas.FunctionSpec{
			Name: ToolName(s.Name, t.Name), Description: t.Description, Parameters: params}}}
		m.tools = append(m.tools, tool)
		m.byToolset[s.Toolset] = append(m.byToolset[s.Toolset], tool)
	}
	return nil
}

// collisions fills byName and reports every offered name two tools share.
func (m *Manager) collisions() []string {
	var errs []string
	for _, t := range m.tools {
		n := t.Spec.Function.Name
		if o, dup := m.byName[n]; dup {
			errs = append(errs, fmt.Sprintf("tool %q of server %q and tool %q of server %q are both offered as %s; exclude one (tools.exclude) or rename a server",
				o.Name, o.Server.Name, t.Name, t.Server.Name, n))
			continue
		}
		m.byName[n] = t
	}
	return errs
}

// Toolsets lists the toolset of every server ("mcp-<server>"), sorted.
func (m *Manager) Toolsets() []string {
	if m == nil {
		return nil
	}
	return m.cfg.Toolsets()
}

// HasToolset reports whether ts is one of the servers' toolsets.
func (m *Manager) HasToolset(ts string) bool {
	if m == nil {
		return false
	}
	for _, s := range m.cfg.Servers {
		if s.Toolset == ts {
			return true
		}
	}
	return false
}

// Tools returns the tool definitions of one toolset, in the server's order.
func (m *Manager) Tools(toolset string) []schemas.Tool {
	if m == nil {
		return nil
	}
	var out []schemas.Tool
	for _, t := range m.byToolset[toolset] {
		out = append(out, t.Spec)
	}
	return out
}

// ToolNames lists every offered tool name of every server, sorted.
func (m *Manager) ToolNames() []string {
	if m == nil {
		return nil
	}
	out := make([]string, 0, len(m.tools))
	for _, t := range m.tools {
		out = append(out, t.Spec.Function.Name)
	}
	sort.Strings(out)
	return out
}

// Has reports whether name is an offered MCP tool.
func (m *Manager) Has(name string) bool {
	if m == nil {
		return false
	}
	_, ok := m.byName[name]
	return ok
}

// Close stops every run-scoped server. Sessions must be closed first.
func (m *Manager) Close() {
	if m == nil {
		return
	}
	for _, sh := range m.shared {
		sh.mu.Lock()
		if sh.c != nil {
			sh.c.close()
			sh.c = nil
		}
		sh.mu.Unlock()
	}
}

// Session is one rollout's view of the servers: rollout-scoped servers are
// started on their first call (with ${workdir} = the rollout's folder) and
// stopped by Close; run-scoped ones are shared. Calls are made one at a
// time, as the agent loop makes them.
type Session struct {
	m       *Manager
	workdir string
	mu      sync.Mutex
	own     map[*Server]*conn
	closed  bool
}

// NewSession returns a rollout's session. It starts nothing.
func (m *Manager) NewSession(workdir string) *Session {
	return &Session{m: m, workdir: workdir, own: map[*Server]*conn{}}
}

// errClosed is a call after Close.
var errClosed = errors.New("mcp session closed")

// conn returns a live connection to s, starting (or restarting) it when
// needed.
func (ss *Session) conn(ctx context.Context, s *Server) (*conn, error) {
	if s.Scope == ScopeRun {
		sh := ss.m.shared[s]
		sh.mu.Lock()
		defer sh.mu.Unlock()
		if sh.c != nil && sh.c.alive() {
			return sh.c, nil
		}
		if sh.c != nil {
			sh.c.close()
			sh.c = nil
		}
		c, err := dial(ctx, s, "")
		if err != nil {
			return nil, err
		}
		sh.c = c
		return c, nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return nil, errClosed
	}
	if c := ss.own[s]; c != nil && c.alive() {
		return c, nil
	} else if c != nil {
		c.close()
		delete(ss.own, s)
	}
	if ss.workdir == "" && s.usesWorkdir() {
		return nil, fmt.Errorf("mcp server %q uses ${workdir}, but this rollout's sandbox has no folder on this machine", s.Name)
	}
	c, err := dial(ctx, s, ss.workdir)
	if err != nil {
		return nil, err
	}
	ss.own[s] = c
	return c, nil
}

// drop forgets a connection that failed so the next call redials.
func (ss *Session) drop(s *Server, c *conn) {
	if s.Scope == ScopeRun {
		sh := ss.m.shared[s]
		sh.mu.Lock()
		if sh.c == c {
			sh.c = nil
		}
		sh.mu.Unlock()
	} else {
		ss.mu.Lock()
		if ss.own[s] == c {
			delete(ss.own, s)
		}
		ss.mu.Unlock()
	}
	c.close()
}

// Call runs the tool offered as name with the given arguments (a JSON
// object, or a value that marshals to one) and returns the text of the tool message: {"result": ...} (with
// "structuredContent" when the server sent one) on success, {"error": ...}
// when the tool reported an error (isError), the server answered with a
// protocol error, timed out, crashed or could not start. A crashed or
// timed-out stdio server is stopped and restarted by the next call. The
// error return is only ctx's, when the rollout itself ended.
func (ss *Session) Call(ctx context.Context, name string, args any) (string, error) {
	t, ok := ss.m.byName[name]
	if !ok {
		return errorResult(fmt.Sprintf("unknown MCP tool %q", name)), nil
	}
	s := t.Server
	c, err := ss.conn(ctx, s)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return errorResult(fmt.Sprintf("MCP server %q is unavailable: %v", s.Name, err)), nil
	}
	cctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	// A nil map (or nothing) is sent as {}: servers validate arguments as
	// an object, and null fails that.
	if b, err := json.Marshal(args); err != nil || string(b) == "null" {
		args = map[string]any{}
	} else {
		args = json.RawMessage(b)
	}
	res, err := c.cs.CallTool(cctx, &sdk.CallToolParams{Name: t.Name, Arguments: args})
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if s.Transport == TransportStdio && (errors.Is(err, io.EOF) || errors.Is(err, sdk.ErrConnectionClosed)) {
			// The process is going: let the session notice, then reap it
			// so its exit status and stderr can be reported.
			select {
			case <-c.done:
			case <-time.After(2 * time.Second):
			}
		}
		switch {
		case !c.alive():
			ss.drop(s, c)
			return errorResult(c.describe(fmt.Errorf("the server exited during the call to %s; it will be restarted for the next call", t.Name)).Error()), nil
		case cctx.Err() != nil:
			if s.Transport == TransportStdio {
				ss.drop(s, c) // it may be stuck: start afresh next time
			}
			return errorResult(fmt.Sprintf("MCP tool %s timed out after %s", name, s.Timeout)), nil
		}
		return errorResult(s.redactor().String(fmt.Sprintf("MCP call %s failed: %v", name, err))), nil
	}
	return mapResult(res), nil
}

// Close stops the rollout's own servers (and reaps them); it blocks until
// they are gone. It is safe to call more than once.
func (ss *Session) Close() {
	ss.mu.Lock()
	ss.closed = true
	own := ss.own
	ss.own = map[*Server]*conn{}
	ss.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range own {
		wg.Add(1)
		go func() { defer wg.Done(); c.close() }()
	}
	wg.Wait()
}

func (s *Server) usesWorkdir() bool {
	if strings.Contains(s.Command, "${workdir}") || strings.Contains(s.Cwd, "${workdir}") {
		return true
	}
	for _, a := range s.Args {
		if strings.Contains(a, "${workdir}") {
			return true
		}
	}
	for _, v := range s.Env {
		if strings.Contains(v, "${workdir}") {
			return true
		}
	}
	return false
}

// CheckSandbox refuses a configuration whose servers use ${workdir} beside
// a sandbox other than local (scheme is the sandbox's: local, docker,
// ssh): ${workdir} is the rollout's folder on this machine, which only the
// local sandbox has. The error names the file and the first such server.
func (c *Config) CheckSandbox(scheme string) error {
	if c == nil || scheme == "local" {
		return nil
	}
	for _, s := range c.Servers {
		if s.usesWorkdir() {
			return fmt.Errorf("%s: server %q uses ${workdir}, the rollout's folder on this machine, which only the local sandbox has (this one is %s)", c.File, s.Name, scheme)
		}
	}
	return nil
}

func errorResult(msg string) string {
	return schemas.ToolResultJSON(struct {
		Error string `json:"error"`
	}{msg})
}

// mapResult turns a tool's result into the tool message: text parts joined
// by newlines, images, audio and resources as placeholders naming their
// type (their bytes are never put in a trajectory), structuredContent
// embedded as JSON; isError makes it {"error": text}.
func mapResult(res *sdk.CallToolResult) string {
	parts := make([]string, 0, len(res.Content))
	for _, c := range res.Content {
		parts = append(parts, contentText(c))
	}
	text := strings.Join(parts, "\n")
	if res.IsError {
		if strings.TrimSpace(text) == "" {
			text = "MCP tool returned an error"
		}
		return errorResult(text)
	}
	if res.StructuredContent != nil {
		return schemas.ToolResultJSON(struct {
			Result            string `json:"result"`
			StructuredContent any    `json:"structuredContent"`
		}{text, res.StructuredContent})
	}
	return schemas.ToolResultJSON(struct {
		Result string `json:"result"`
	}{text})
}

func contentText(c sdk.Content) string {
	switch v := c.(type) {
	case *sdk.TextContent:
		return v.Text
	case *sdk.ImageContent:
		return fmt.Sprintf("[image: %s, %d bytes]", orUnknown(v.MIMEType), len(v.Data))
	case *sdk.AudioContent:
		return fmt.Sprintf("[audio: %s, %d bytes]", orUnknown(v.MIMEType), len(v.Data))
	case *sdk.ResourceLink:
		return fmt.Sprintf("[resource: %s]", v.URI)
	case *sdk.EmbeddedResource:
		if v.Resource == nil {
			return "[resource]"
		}
		if v.Resource.Text != "" {
			return v.Resource.Text
		}
		return fmt.Sprintf("[resource: %s, %s, %d bytes]", v.Resource.URI, orUnknown(v.Resource.MIMEType), len(v.Resource.Blob))
	}
	return "[unsupported content]"
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown type"
	}
	return s
}
