package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout/mcp"
)

// toolsOfToolset lists the built-in tools a toolset brings, in offer order.
func toolsOfToolset(ts string) []string {
	if t, ok := toolsetTools[ts]; ok {
		return t
	}
	return offlineToolsetTools[ts]
}

// builtinSpec is the definition of a built-in tool.
func builtinSpec(name string) (schemas.Tool, bool) {
	if t, ok := toolSpecs[name]; ok {
		return t, true
	}
	if o, ok := offlineToolSpecs[name]; ok {
		return fn(name, o.desc, o.params), true
	}
	return schemas.Tool{}, false
}

// KnownToolsets lists every toolset a run may name: the built-ins and the
// configured MCP servers' toolsets.
func KnownToolsets(m *mcp.Manager) []string {
	return append(append([]string(nil), schemas.KnownToolsets...), m.Toolsets()...)
}

// toolsFor returns the tool definitions offered for toolsets: built-in
// toolsets in schemas.KnownToolsets order, then MCP toolsets sorted by name,
// each server's tools in the server's order. A toolset the run cannot offer
// (an MCP server not configured, skills without a skills folder) is an
// error naming it.
func (s *Stage) toolsFor(toolsets []string) ([]schemas.Tool, error) {
	want := map[string]bool{}
	var mcpSets []string
	for _, ts := range toolsets {
		want[ts] = true
		if strings.HasPrefix(ts, schemas.MCPToolsetPrefix) {
			if !s.o.MCP.HasToolset(ts) {
				return nil, fmt.Errorf("toolset %s: no such MCP server in --mcp-config (configured: %s)", ts, orNone(s.o.MCP.Toolsets()))
			}
			mcpSets = append(mcpSets, ts)
		}
	}
	if want["skills"] && s.o.SkillsDir == "" {
		return nil, fmt.Errorf("toolset skills: no skills folder configured (--skills-dir)")
	}
	if want["cronjob"] && s.o.PlanSchedule == nil {
		return nil, fmt.Errorf("toolset cronjob: this run has no schedule reader")
	}
	var out []schemas.Tool
	for _, ts := range schemas.KnownToolsets {
		if !want[ts] {
			continue
		}
		for _, name := range toolsOfToolset(ts) {
			t, _ := builtinSpec(name)
			out = append(out, t)
		}
	}
	sort.Strings(mcpSets)
	for _, ts := range mcpSets {
		out = append(out, s.o.MCP.Tools(ts)...)
	}
	return out, nil
}

func orNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// statToolNames lists the tools every record's tool_stats holds (zero when
// unused, as Hermes fills every available tool): terminal's and file's,
// those of other built-in toolsets the run names, and every MCP tool.
func (s *Stage) statToolNames() []string {
	names := AllToolNames()
	seen := map[string]bool{}
	for _, n := range names {
		seen[n] = true
	}
	named := append([]string(nil), s.o.Toolsets...)
	for ts := range s.o.Distribution {
		named = append(named, ts)
	}
	sort.Strings(named)
	for _, ts := range named {
		for _, n := range offlineToolsetTools[ts] {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	return append(names, s.o.MCP.ToolNames()...)
}

// rolloutTools is the per-rollout state of the tools beyond terminal and
// file: the todo list, the cronjob store and the rollout's MCP session.
type rolloutTools struct {
	s     *Stage
	sess  *lazySession
	spent *spent // where the rollout's time went
	todos []todoItem
	cron  *cronStore // the cronjob toolset's jobs; nil until its first call
	mcp   *mcp.Session
}

// newRolloutTools returns the tool state of one rollout in sess; the
// rollout's turns pass it to each tool call.
func (s *Stage) newRolloutTools(sess *lazySession, spent *spent) *rolloutTools {
	return &rolloutTools{s: s, sess: sess, spent: spent}
}

// close stops the rollout's own MCP servers.
func (rt *rolloutTools) close() {
	if rt.mcp != nil {
		rt.mcp.Close()
	}
}

// hostDirer is a session whose working folder is a folder on this machine
// at the same path (the local driver); MCP servers get it as ${workdir}.
type hostDirer interface{ HostDir() string }

// call runs the call when it is a tool of this file's toolsets; handled is
// false for terminal and file tools and for tools not allowed in the
// rollout (runTool answers those).
func (rt *rolloutTools) call(ctx context.Context, allowed map[string]bool, call schemas.ToolCall) (out string, err error, handled bool) {
	name := call.Function.Name
	_, builtin := offlineToolSpecs[name]
	isMCP := rt.s.o.MCP.Has(name)
	if !allowed[name] || (!builtin && !isMCP) {
		return "", nil, false
	}
	args := map[string]json.RawMessage{}
	argText := strings.TrimSpace(call.Function.Arguments)
	if argText == "" {
		argText = "{}"
	}
	if err := json.Unmarshal([]byte(argText), &args); err != nil || args == nil {
		msg := fmt.Sprintf("invalid arguments for %s: not a JSON object: %v", name, errText(err))
		return toolError(msg), &errBadCall{msg}, true
	}
	if isMCP {
		if rt.mcp == nil {
			dir := ""
			if s, err := rt.sess.open(ctx, false); err == nil {
				if h, ok := s.(hostDirer); ok {
					dir = h.HostDir()
				}
			}
			rt.mcp = rt.s.o.MCP.NewSession(dir)
		}
		out, err := rt.mcp.Call(ctx, name, args)
		return out, err, true
	}
	switch name {
	case "todo":
		out, err = todoTool(&rt.todos, args)
	case "skills_list":
		out, err = skillsList(rt.s.o.SkillsDir, args)
	case "skill_view":
		out, err = skillView(rt.s.o.SkillsDir, args)
	case "execute_code":
		out, err = executeCode(ctx, rt.sess, args, rt.s.o.CommandTimeout)
	case "cronjob":
		out, err = rt.cronjobTool(args)
	}
	return out, err, true
}
