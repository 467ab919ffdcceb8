package cron

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout/mcp"
)

// jobMCP reads the job's stored MCP configuration (mcp.Load: errors name
// the file, line and field); nil when the job names none. A configuration
// whose servers use ${workdir} needs the local sandbox, the only one whose
// folder is on this machine. It reads one file and starts nothing.
func jobMCP(j *Job) (*mcp.Config, error) {
	p := j.Policy.MCPConfig
	if p == "" {
		return nil, nil
	}
	if !filepath.IsAbs(p) {
		return nil, fmt.Errorf("mcp_config %q must be an absolute path", p)
	}
	cfg, err := mcp.Load(p, nil)
	if err != nil {
		return nil, err
	}
	scheme, _, _ := ParseSandbox(j.Policy.Sandbox)
	if err := cfg.CheckSandbox(scheme); err != nil {
		return nil, fmt.Errorf("mcp_config %v", err)
	}
	return cfg, nil
}

// checkMCPToolsets checks only the mcp-<server> toolsets a job names
// against its configuration (a `cron edit --mcp-config` that keeps the
// job's toolsets).
func checkMCPToolsets(j *Job) error {
	cfg, err := jobMCP(j)
	if err != nil {
		return err
	}
	var named []string
	for _, t := range j.EnabledToolsets {
		if strings.HasPrefix(strings.TrimSpace(t), schemas.MCPToolsetPrefix) {
			named = append(named, t)
		}
	}
	return checkToolsets(named, cfg.Toolsets())
}

// storedPaths checks the tool paths of a stored job without touching the
// disk (on every load): they must be absolute.
func storedPaths(j *Job) error {
	for _, f := range []struct{ name, v string }{{"mcp_config", j.Policy.MCPConfig}, {"skills_dir", j.Policy.SkillsDir}} {
		if f.v != "" && !filepath.IsAbs(f.v) {
			return fmt.Errorf("policy.%s %q must be an absolute path", f.name, f.v)
		}
	}
	return nil
}
