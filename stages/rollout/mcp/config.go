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

func (p *parser) server(name, field string, n *yaml.Node) (*Server, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n, field, "must be an object")
	}
	if !serverName.MatchString(name) {
		return nil, p.errf(n, field, "server name %q: use letters, digits, '_', '-' or '.'", name)
	}
	s := &Server{Name: name, Toolset: "mcp-" + Sanitize(name), where: fmt.Sprintf("%s:%d: %s", p.file, n.Line, field)}
	nodes := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		nodes[n.Content[i].Value] = n.Content[i+1]
	}
	var err error
	get := func(k string) *yaml.Node { return nodes[k] }
	if v := get("disabled"); v != nil && v.Value == "true" {
		return nil, p.errf(v, field+".disabled", "disabled servers are not supported; remove the server from the file given to --mcp-config")
	}
	if v := get("enabled"); v != nil && v.Value == "false" {
		return nil, p.errf(v, field+".enabled", "disabled servers are not supported; remove the server from the file given to --mcp-config")
	}
	// The scope first: ${workdir} is allowed only in rollout-scoped servers.
	if v := get("type"); v != nil {
		if s.Transport, err = p.str(v, field+".type"); err != nil {
			return nil, err
		}
	}
	if v := get("transport"); v != nil {
		if s.Transport, err = p.str(v, field+".transport"); err != nil {
			return nil, err
		}
	}
	switch s.Transport {
	case "", "stdio", "local":
		if get("url") != nil && get("command") == nil {
			s.Transport = TransportHTTP
		} else if s.Transport != "" {
			s.Transport = TransportStdio
		}
	case "http", "streamable-http", "streamable_http", "streamableHttp":
		s.Transport = TransportHTTP
	case "sse":
		s.Transport = TransportSSE
	default:
		return nil, p.errf(n, field+".type", "unknown transport %q (known: stdio, http, sse)", s.Transport)
	}
	if s.Transport == "" {
		s.Transport = TransportStdio
	}
	s.Scope = ScopeRollout
	if s.Transport != TransportStdio {
		s.Scope = ScopeRun
	}
	if v := get("scope"); v != nil {
		if s.Scope, err = p.str(v, field+".scope"); err != nil {
			return nil, err
		}
		if s.Scope != ScopeRollout && s.Scope != ScopeRun {
			return nil, p.errf(v, field+".scope", "%q: want rollout or run", s.Scope)
		}
	}
	wd := s.Scope == ScopeRollout
	switch s.Transport {
	case TransportStdio:
		v := get("command")
		if v == nil {
			return nil, p.errf(n, field, "a stdio server needs command (or give url for an HTTP server)")
		}
		if get("url") != nil {
			return nil, p.errf(get("url"), field+".url", "give either command (stdio) or url (HTTP), not both")
		}
		if s.Command, err = p.str(v, field+".command"); err != nil {
			return nil, err
		}
		if s.Command, err = p.expand(v, field+".command", s.Command, wd); err != nil {
			return nil, err
		}
		if strings.TrimSpace(s.Command) == "" {
			return nil, p.errf(v, field+".command", "is empty")
		}
		if v := get("args"); v != nil {
			if s.Args, err = p.strList(v, field+".args"); err != nil {
				return nil, err
			}
			for i := range s.Args {
				if s.Args[i], err = p.expand(v.Content[i], field+".args["+strconv.Itoa(i)+"]", s.Args[i], wd); err != nil {
					return nil, err
				}
			}
		}
		if v := get("env"); v != nil {
			m, kv, err := p.strMap(v, field+".env")
			if err != nil {
				return nil, err
			}
			for _, e := range kv {
				k := e[0].Value
				if m[k], err = p.expand(e[1], field+".env."+k, m[k], wd); err != nil {
					return nil, err
				}
			}
			s.Env = m
		}
		if v := get("cwd"); v != nil {
			if s.Cwd, err = p.str(v, field+".cwd"); err != nil {
				return nil, err
			}
			if s.Cwd, err = p.expand(v, field+".cwd", s.Cwd, wd); err != nil {
				return nil, err
			}
		}
		for _, k := range []string{"headers"} {
			if v := get(k); v != nil {
				return nil, p.errf(v, field+"."+k, "only HTTP servers take %s", k)
			}
		}
		if err := p.confineSettings(s, get, field); err != nil {
			return nil, err
		}
	default:
		v := get("url")
		if v == nil {
			return nil, p.errf(n, field, "an %s server needs url", s.Transport)
		}
		if s.URL, err = p.str(v, field+".url"); err != nil {
			return nil, err
		}
		if s.URL, err = p.expand(v, field+".url", s.URL, wd); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
			return nil, p.errf(v, field+".url", "%q: want an http:// or https:// URL", s.URL)
		}
		if v := get("headers"); v != nil {
			m, kv, err := p.strMap(v, field+".headers")
			if err != nil {
				return nil, err
			}
			for _, e := range kv {
				k := e[0].Value
				if m[k], err = p.expand(e[1], field+".headers."+k, m[k], wd); err != nil {
					return nil, err
				}
			}
			s.Headers = m
		}
		for _, k := range []string{"command", "args", "env", "cwd", "network", "mounts"} {
			if v := get(k); v != nil {
				return nil, p.errf(v, field+"."+k, "only stdio servers take %s", k)
			}
		}
	}
	s.Timeout, s.ConnectTimeout = DefaultTimeout, DefaultConnectTimeout
	if v := get("timeout"); v != nil {
		if s.Timeout, err = p.seconds(v, field+".timeout"); err != nil {
			return nil, err
		}
	}
	if v := get("connect_timeout"); v != nil {
		if s.ConnectTimeout, err = p.seconds(v, field+".connect_timeout"); err != nil {
			return nil, err
		}
	}
	if v := get("tools"); v != nil {
		if v.Kind != yaml.MappingNode {
			return nil, p.errf(v, field+".tools", "must be an object with include and/or exclude")
		}
		for i := 0; i+1 < len(v.Content); i += 2 {
			k, lv := v.Content[i].Value, v.Content[i+1]
			var list []string
			if list, err = p.strList(lv, field+".tools."+k); err != nil {
				return nil, err
			}
			switch k {
			case "include":
				s.Include = list
			case "exclude":
				s.Exclude = list
			default:
				return nil, p.errf(v.Content[i], field+".tools."+k, "unknown member (known: include, exclude)")
			}
		}
	}
	known := map[string]bool{"type": true, "transport": true, "command": true, "args": true, "env": true, "cwd": true,
		"url": true, "headers": true, "scope": true, "timeout": true, "connect_timeout": true, "tools": true,
		"enabled": true, "disabled": true, "description": true, "network": true, "mounts": true}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i].Value; !known[k] {
			return nil, p.errf(n.Content[i], field+"."+k, "unknown setting (known: command, args, env, cwd, network, mounts, url, headers, type, scope, timeout, connect_timeout, tools)")
		}
	}
	return s, nil
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
