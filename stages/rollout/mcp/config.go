package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
)

// Scopes of a server: a fresh server per rollout, or one shared by the run.
const (
	ScopeRollout = "rollout"
	ScopeRun     = "run"
)

// Transports a server may use.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http" // Streamable HTTP
	TransportSSE   = "sse"  // the older HTTP+SSE transport
)

// DefaultTimeout bounds one tool call when a server names no timeout;
// DefaultConnectTimeout bounds starting (or connecting to) a server,
// initialising it and reading its tool list.
const (
	DefaultTimeout        = 120 * time.Second
	DefaultConnectTimeout = 60 * time.Second
)

// Server is one configured MCP server. Strings may hold ${workdir}, which
// is replaced per rollout; ${env:NAME} placeholders are replaced when the
// configuration is loaded.
type Server struct {
	Name      string // as written in the file
	Toolset   string // "mcp-" + the sanitised name
	Transport string // stdio, http or sse

	Command string
	Args    []string
	Env     map[string]string
	Cwd     string

	URL     string
	Headers map[string]string

	Scope          string
	Timeout        time.Duration // per tool call
	ConnectTimeout time.Duration // start, initialise, list tools
	Include        []string      // original tool names offered; empty = all
	Exclude        []string      // original tool names never offered

	// Confined stdio servers only (see Confinement): the host's network,
	// and more host folders shown to the server.
	Network bool
	Mounts  []confine.Mount
	confine *Confinement // nil: the server runs unconfined

	where string // "file:line: mcpServers.name" for messages
}

// Config is a loaded --mcp-config file.
type Config struct {
	File    string
	Servers []*Server // sorted by name
}

// Toolsets lists the toolset name of every server, in server order.
func (c *Config) Toolsets() []string {
	if c == nil {
		return nil
	}
	out := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		out[i] = s.Toolset
	}
	return out
}

// Load reads an MCP configuration: a JSON (or YAML) object whose
// "mcpServers" (Claude Desktop, Cursor), "servers" (VS Code) or
// "mcp_servers" (Hermes' config.yaml) member maps server names to their
// settings. Other members of the file are ignored, so Hermes' whole
// config.yaml can be given. getenv resolves ${env:NAME} (nil = os.Getenv,
// where an unset variable is an error). Every error names the file, the
// line and the field. It reads one file and starts nothing.
func Load(path string, getenv func(string) (string, bool)) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mcp config: %w", err)
	}
	if getenv == nil {
		getenv = os.LookupEnv
	}
	return Parse(path, data, getenv)
}

// Parse is Load on bytes already read; path only names the file in errors.
func Parse(path string, data []byte, getenv func(string) (string, bool)) (*Config, error) {
	// A file that starts with '{' is read as JSON (YAML refuses a key over
	// 1,024 characters); when it is not JSON it may still be YAML's flow
	// style, so YAML has the last word.
	var doc yaml.Node
	var jerr *jsonError
	if looksLikeJSON(data) {
		n, err := jsonDoc(data)
		if err == nil {
			doc = *n
		} else if !errors.As(err, &jerr) {
			jerr = &jsonError{Line: 1, Msg: err.Error()}
		}
		if jerr != nil && jerr.Final {
			return nil, fmt.Errorf("%s:%d: not valid JSON or YAML: %s", path, jerr.Line, jerr.Msg)
		}
	}
	if doc.Kind == 0 {
		if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
			if jerr != nil {
				return nil, fmt.Errorf("%s:%d: not valid JSON or YAML: %s (as YAML: %v)", path, jerr.Line, jerr.Msg, err)
			}
			return nil, fmt.Errorf("%s: not valid JSON or YAML: %v", path, err)
		}
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: want an object with an mcpServers (or mcp_servers) member", path)
	}
	root := doc.Content[0]
	var servers *yaml.Node
	var key string
	for _, k := range []string{"mcpServers", "mcp_servers", "servers"} {
		if v := member(root, k); v != nil {
			servers, key = v, k
			break
		}
	}
	if servers == nil {
		return nil, fmt.Errorf("%s:%d: no mcpServers (or mcp_servers, servers) member", path, root.Line)
	}
	if servers.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: %s: must be an object of servers by name", path, servers.Line, key)
	}
	p := &parser{file: path, getenv: getenv}
	cfg := &Config{File: path}
	byToolset := map[string]string{}
	for i := 0; i+1 < len(servers.Content); i += 2 {
		name := servers.Content[i].Value
		field := key + "." + name
		s, err := p.server(name, field, servers.Content[i+1])
		if err != nil {
			return nil, err
		}
		if other, dup := byToolset[s.Toolset]; dup {
			return nil, fmt.Errorf("%s: servers %q and %q both become toolset %q; rename one", s.where, other, name, s.Toolset)
		}
		byToolset[s.Toolset] = name
		cfg.Servers = append(cfg.Servers, s)
	}
	sort.Slice(cfg.Servers, func(i, j int) bool { return cfg.Servers[i].Toolset < cfg.Servers[j].Toolset })
	return cfg, nil
}

func member(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

type parser struct {
	file   string
	getenv func(string) (string, bool)
}

func (p *parser) errf(n *yaml.Node, field, format string, a ...any) error {
	return fmt.Errorf("%s:%d: %s: %s", p.file, n.Line, field, fmt.Sprintf(format, a...))
}

var placeholder = regexp.MustCompile(`\$\{([^}]*)\}`)

// expand replaces ${env:NAME} now and checks that every other placeholder
// is ${workdir} (replaced per rollout).
func (p *parser) expand(n *yaml.Node, field, s string, workdirOK bool) (string, error) {
	var err error
	out := placeholder.ReplaceAllStringFunc(s, func(m string) string {
		inner := m[2 : len(m)-1]
		switch {
		case inner == "workdir":
			if !workdirOK && err == nil {
				err = p.errf(n, field, "${workdir} is the rollout's folder: only a scope: rollout server may use it")
			}
			return m
		case strings.HasPrefix(inner, "env:"):
			name := inner[4:]
			v, ok := p.getenv(name)
			if !ok && err == nil {
				err = p.errf(n, field, "%s: environment variable %s is not set", m, name)
			}
			return v
		}
		if err == nil {
			err = p.errf(n, field, "unknown placeholder %s (known: ${workdir}, ${env:NAME})", m)
		}
		return m
	})
	return out, err
}

func (p *parser) str(n *yaml.Node, field string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return "", p.errf(n, field, "must be a string")
	}
	return n.Value, nil
}

func (p *parser) strList(n *yaml.Node, field string) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n, field, "must be an array of strings")
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		s, err := p.str(item, field+"["+strconv.Itoa(i)+"]")
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (p *parser) strMap(n *yaml.Node, field string) (map[string]string, [][2]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, nil, p.errf(n, field, "must be an object of strings")
	}
	out := map[string]string{}
	var nodes [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		v := n.Content[i+1]
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			return nil, nil, p.errf(v, field+"."+k, "must be a string")
		}
		out[k] = v.Value // numbers and booleans as written, as JSON configs often hold "PORT": 8080
		nodes = append(nodes, [2]*yaml.Node{n.Content[i], v})
	}
	return out, nodes, nil
}

// seconds reads a timeout: a number of seconds (Hermes, Claude) or a Go
// duration string ("90s", "2m").
func (p *parser) seconds(n *yaml.Node, field string) (time.Duration, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, p.errf(n, field, "must be a number of seconds or a duration such as \"90s\"")
	}
	var d time.Duration
	if f, err := strconv.ParseFloat(n.Value, 64); err == nil && n.Tag != "!!str" {
		d = time.Duration(f * float64(time.Second))
	} else if v, err := time.ParseDuration(n.Value); err == nil {
		d = v
	} else {
		return 0, p.errf(n, field, "%q is not a number of seconds or a duration such as \"90s\"", n.Value)
	}
	if d <= 0 {
		return 0, p.errf(n, field, "must be positive")
	}
	return d, nil
}

var serverName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// server reads one server's object. The steps run in a fixed order, so
// that of several mistakes the same one is reported: the object and its
// name, disabled servers, the transport, the scope (${workdir} is allowed
// only in rollout-scoped servers), the transport's own settings, the
// timeouts, the tool lists, and last any setting of no meaning.
func (p *parser) server(name, field string, n *yaml.Node) (*Server, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n, field, "must be an object")
	}
	if !serverName.MatchString(name) {
		return nil, p.errf(n, field, "server name %q: use letters, digits, '_', '-' or '.'", name)
	}
	s := &Server{Name: name, Toolset: "mcp-" + Sanitize(name), where: fmt.Sprintf("%s:%d: %s", p.file, n.Line, field)}
	o := p.object(n, field)
	if err := o.refuseDisabled(); err != nil {
		return nil, err
	}
	if err := o.transport(s); err != nil {
		return nil, err
	}
	if err := o.scope(s); err != nil {
		return nil, err
	}
	var err error
	if s.Transport == TransportStdio {
		err = o.stdio(s)
	} else {
		err = o.remote(s)
	}
	if err != nil {
		return nil, err
	}
	if err := o.timeouts(s); err != nil {
		return nil, err
	}
	if err := o.tools(s); err != nil {
		return nil, err
	}
	if err := o.refuseUnknown(); err != nil {
		return nil, err
	}
	return s, nil
}

// serverObject is one server's object while it is read: its settings by
// name (of a name written twice, the last), and the field path errors
// name ("mcpServers.<name>").
type serverObject struct {
	p     *parser
	n     *yaml.Node
	field string
	nodes map[string]*yaml.Node
	wd    bool // ${workdir} may be used: the server is rollout-scoped (set by scope)
}

func (p *parser) object(n *yaml.Node, field string) *serverObject {
	o := &serverObject{p: p, n: n, field: field, nodes: map[string]*yaml.Node{}}
	for i := 0; i+1 < len(n.Content); i += 2 {
		o.nodes[n.Content[i].Value] = n.Content[i+1]
	}
	return o
}

// get is the node of setting k, nil when the server does not set it.
func (o *serverObject) get(k string) *yaml.Node { return o.nodes[k] }

// errf is an error about setting k of the server, at node v.
func (o *serverObject) errf(v *yaml.Node, k, format string, a ...any) error {
	return o.p.errf(v, o.field+"."+k, format, a...)
}

// refuseDisabled refuses a server marked disabled: true or enabled: false.
func (o *serverObject) refuseDisabled() error {
	if v := o.get("disabled"); v != nil && v.Value == "true" {
		return o.errf(v, "disabled", "disabled servers are not supported; remove the server from the file given to --mcp-config")
	}
	if v := o.get("enabled"); v != nil && v.Value == "false" {
		return o.errf(v, "enabled", "disabled servers are not supported; remove the server from the file given to --mcp-config")
	}
	return nil
}

// transport sets s.Transport from type or transport (transport wins; the
// other spellings clients use are accepted); with neither, a server with
// a url and no command is HTTP, any other stdio.
func (o *serverObject) transport(s *Server) error {
	for _, k := range []string{"type", "transport"} {
		if v := o.get(k); v != nil {
			t, err := o.p.str(v, o.field+"."+k)
			if err != nil {
				return err
			}
			s.Transport = t
		}
	}
	switch s.Transport {
	case "", "stdio", "local":
		if o.get("url") != nil && o.get("command") == nil {
			s.Transport = TransportHTTP
		} else {
			s.Transport = TransportStdio
		}
	case "http", "streamable-http", "streamable_http", "streamableHttp":
		s.Transport = TransportHTTP
	case "sse":
		s.Transport = TransportSSE
	default:
		return o.errf(o.n, "type", "unknown transport %q (known: stdio, http, sse)", s.Transport)
	}
	return nil
}

// scope sets s.Scope: as written, else rollout for a stdio server and run
// for an HTTP one.
func (o *serverObject) scope(s *Server) error {
	s.Scope = ScopeRollout
	if s.Transport != TransportStdio {
		s.Scope = ScopeRun
	}
	if v := o.get("scope"); v != nil {
		sc, err := o.p.str(v, o.field+".scope")
		if err != nil {
			return err
		}
		s.Scope = sc
		if s.Scope != ScopeRollout && s.Scope != ScopeRun {
			return o.errf(v, "scope", "%q: want rollout or run", s.Scope)
		}
	}
	o.wd = s.Scope == ScopeRollout
	return nil
}

// stdio reads a stdio server's command, args, env and cwd and its
// confinement settings, and refuses HTTP's headers.
func (o *serverObject) stdio(s *Server) error {
	v := o.get("command")
	if v == nil {
		return o.p.errf(o.n, o.field, "a stdio server needs command (or give url for an HTTP server)")
	}
	if u := o.get("url"); u != nil {
		return o.errf(u, "url", "give either command (stdio) or url (HTTP), not both")
	}
	var err error
	if s.Command, err = o.expanded(v, "command"); err != nil {
		return err
	}
	if strings.TrimSpace(s.Command) == "" {
		return o.errf(v, "command", "is empty")
	}
	if s.Args, err = o.expandedList("args"); err != nil {
		return err
	}
	if s.Env, err = o.expandedMap("env"); err != nil {
		return err
	}
	if v := o.get("cwd"); v != nil {
		if s.Cwd, err = o.expanded(v, "cwd"); err != nil {
			return err
		}
	}
	if v := o.get("headers"); v != nil {
		return o.errf(v, "headers", "only HTTP servers take headers")
	}
	return o.p.confineSettings(s, o.get, o.field)
}

// remote reads an HTTP or SSE server's url and headers, and refuses the
// settings only stdio servers take.
func (o *serverObject) remote(s *Server) error {
	v := o.get("url")
	if v == nil {
		return o.p.errf(o.n, o.field, "an %s server needs url", s.Transport)
	}
	var err error
	if s.URL, err = o.expanded(v, "url"); err != nil {
		return err
	}
	if !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
		return o.errf(v, "url", "%q: want an http:// or https:// URL", s.URL)
	}
	if s.Headers, err = o.expandedMap("headers"); err != nil {
		return err
	}
	for _, k := range []string{"command", "args", "env", "cwd", "network", "mounts"} {
		if v := o.get(k); v != nil {
			return o.errf(v, k, "only stdio servers take %s", k)
		}
	}
	return nil
}

// expanded reads setting k, the string v, with its placeholders expanded.
func (o *serverObject) expanded(v *yaml.Node, k string) (string, error) {
	f := o.field + "." + k
	s, err := o.p.str(v, f)
	if err != nil {
		return "", err
	}
	return o.p.expand(v, f, s, o.wd)
}

// expandedList reads setting k, an array of strings, with their
// placeholders expanded; nil when it is not set.
func (o *serverObject) expandedList(k string) ([]string, error) {
	v := o.get(k)
	if v == nil {
		return nil, nil
	}
	f := o.field + "." + k
	list, err := o.p.strList(v, f)
	if err != nil {
		return nil, err
	}
	for i := range list {
		if list[i], err = o.p.expand(v.Content[i], f+"["+strconv.Itoa(i)+"]", list[i], o.wd); err != nil {
			return nil, err
		}
	}
	return list, nil
}

// expandedMap reads setting k, an object of strings, with their
// placeholders expanded in the order written; nil when it is not set.
func (o *serverObject) expandedMap(k string) (map[string]string, error) {
	v := o.get(k)
	if v == nil {
		return nil, nil
	}
	f := o.field + "." + k
	m, kv, err := o.p.strMap(v, f)
	if err != nil {
		return nil, err
	}
	for _, e := range kv {
		name := e[0].Value
		if m[name], err = o.p.expand(e[1], f+"."+name, m[name], o.wd); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// timeouts sets the per-call and connect timeouts, the defaults where the
// server names none.
func (o *serverObject) timeouts(s *Server) error {
	s.Timeout, s.ConnectTimeout = DefaultTimeout, DefaultConnectTimeout
	var err error
	if v := o.get("timeout"); v != nil {
		if s.Timeout, err = o.p.seconds(v, o.field+".timeout"); err != nil {
			return err
		}
	}
	if v := o.get("connect_timeout"); v != nil {
		if s.ConnectTimeout, err = o.p.seconds(v, o.field+".connect_timeout"); err != nil {
			return err
		}
	}
	return nil
}

// tools reads tools: {include: [...], exclude: [...]}.
func (o *serverObject) tools(s *Server) error {
	v := o.get("tools")
	if v == nil {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		return o.errf(v, "tools", "must be an object with include and/or exclude")
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, lv := v.Content[i].Value, v.Content[i+1]
		list, err := o.p.strList(lv, o.field+".tools."+k)
		if err != nil {
			return err
		}
		switch k {
		case "include":
			s.Include = list
		case "exclude":
			s.Exclude = list
		default:
			return o.errf(v.Content[i], "tools."+k, "unknown member (known: include, exclude)")
		}
	}
	return nil
}

// serverSettings are the settings a server's object may hold; the ones
// not read (enabled: true, description) are accepted and ignored.
var serverSettings = map[string]bool{"type": true, "transport": true, "command": true, "args": true, "env": true, "cwd": true,
	"url": true, "headers": true, "scope": true, "timeout": true, "connect_timeout": true, "tools": true,
	"enabled": true, "disabled": true, "description": true, "network": true, "mounts": true}

// refuseUnknown refuses the first setting, in the order written, that
// is not one of serverSettings.
func (o *serverObject) refuseUnknown() error {
	for i := 0; i+1 < len(o.n.Content); i += 2 {
		if k := o.n.Content[i].Value; !serverSettings[k] {
			return o.errf(o.n.Content[i], k, "unknown setting (known: command, args, env, cwd, network, mounts, url, headers, type, scope, timeout, connect_timeout, tools)")
		}
	}
	return nil
}

// Sanitize maps s to the characters tool names may hold, [A-Za-z0-9_-],
// replacing every other character by '_'.
func Sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// MaxToolName is the longest tool name an OpenAI-compatible endpoint takes.
const MaxToolName = 64

// ToolName is the name a server's tool is offered under:
// mcp_<server>_<tool>, sanitised and cut to MaxToolName bytes.
func ToolName(server, tool string) string {
	n := "mcp_" + Sanitize(server) + "_" + Sanitize(tool)
	if len(n) > MaxToolName {
		n = n[:MaxToolName]
	}
	return n
}
