package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout/mcp"
)

// toolFlags are the flags that choose and widen the tools a rollout may be
// offered, shared by generate and swe. def describes the mode's toolsets
// when none of --toolsets, --distribution and --distribution-file is given.
func toolFlags(def string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "toolsets", Usage: "comma-separated toolsets for every row: " + strings.Join(schemas.KnownToolsets, ", ") + ", mcp-<server> (with --mcp-config); default: " + def},
		&cli.StringFlag{Name: "distribution", Usage: "named toolset distribution sampled per rollout: " + strings.Join(rollout.DistributionNames(), ", ") + " (or one of --distribution-file)"},
		&cli.Int64Flag{Name: "seed", Usage: "seed of the toolset draws"},
		&cli.StringFlag{Name: "mcp-config", Usage: "MCP servers whose tools rollouts may call (toolsets mcp-<server>): a JSON file with mcpServers (Claude Desktop, Cursor, VS Code form) or Hermes' config.yaml with mcp_servers"},
		&cli.StringFlag{Name: "distribution-file", Usage: "toolset distributions in Hermes' form (name → {toolsets: {toolset: percent}}), JSON or YAML; --distribution picks one (default: default)"},
		&cli.StringFlag{Name: "skills-dir", Usage: "skills folder the skills toolset reads (<dir>/<name>/SKILL.md, as cron's)"},
	}
}

// toolSetup is what toolFlags bind to: the MCP configuration, the toolsets
// (fixed, or a distribution sampled per rollout) and, after start, the
// run's MCP servers. generate and swe use it the same way: bindTools with
// the other flag checks, start (the MCP pre-flight) just before the output
// folder is opened, apply to the rollout options, close when the run ends.
type toolSetup struct {
	cfg       *mcp.Config
	toolsets  []string
	dist      rollout.Distribution
	seed      int64
	skillsDir string
	servers   *mcp.Manager
}

// bindTools reads --mcp-config, --toolsets, --distribution(-file), --seed
// and --skills-dir. It reads files but starts no server. Without any
// toolset flag the mode gets def when it is not nil (swe: terminal), else
// the default distribution.
func bindTools(c *cli.Context, def []string) (*toolSetup, error) {
	cfg, err := loadMCPConfig(c)
	if err != nil {
		return nil, err
	}
	t := &toolSetup{cfg: cfg, seed: c.Int64("seed"), skillsDir: c.String("skills-dir")}
	if def != nil && !c.IsSet("toolsets") && !c.IsSet("distribution") && !c.IsSet("distribution-file") {
		t.toolsets = def
		return t, nil
	}
	if t.toolsets, t.dist, err = pickToolsets(c, cfg); err != nil {
		return nil, err
	}
	return t, nil
}

// start is the MCP pre-flight: every server started (or connected),
// initialised and its tools listed before any model call. A failure is a
// usage error (exit 2) naming each failed server with its stderr.
func (t *toolSetup) start(c *cli.Context) error {
	if t.cfg == nil {
		return nil
	}
	if c.String("sandbox") == "local" {
		k, err := mcpConfinement(sandbox.LocalConfig{Isolation: c.String("local-isolation"),
			Mounts: c.StringSlice("local-mount"), Network: c.String("local-network")})
		if err != nil {
			return usagef("--mcp-config %s: %v", t.cfg.File, err)
		}
		t.cfg.Confine(k)
	}
	m, err := mcp.Start(c.Context, t.cfg)
	if err != nil {
		return usagef("%v", err)
	}
	t.servers = m
	return nil
}

// apply sets the rollout options' toolsets, MCP servers and skills folder.
func (t *toolSetup) apply(ro *rollout.Options) {
	ro.Toolsets, ro.Distribution, ro.Seed = t.toolsets, t.dist, t.seed
	ro.MCP, ro.SkillsDir = t.servers, t.skillsDir
}

// close stops the run's MCP servers; safe on a nil setup or before start.
func (t *toolSetup) close() {
	if t != nil && t.servers != nil {
		t.servers.Close()
	}
}

// loadMCPConfig reads --mcp-config (nil when not given) and checks what
// needs no server: ${workdir} needs the local sandbox.
func loadMCPConfig(c *cli.Context) (*mcp.Config, error) {
	path := c.String("mcp-config")
	if path == "" {
		return nil, nil
	}
	cfg, err := mcp.Load(path, nil)
	if err != nil {
		return nil, usagef("--mcp-config: %v", err)
	}
	if err := cfg.CheckSandbox(c.String("sandbox")); err != nil {
		return nil, usagef("--mcp-config %v", err)
	}
	return cfg, nil
}

// mcpConfinement is how a rollout's stdio MCP servers run beside the local
// sandbox lc: confined as its commands are (the same mounts and network),
// or nil with --local-isolation none. Where confinement cannot start it
// says why and names the opt-out.
func mcpConfinement(lc sandbox.LocalConfig) (*mcp.Confinement, error) {
	if lc.Isolation == "none" {
		return nil, nil
	}
	k, err := mcp.NewConfinement(context.Background(), lc.Mounts, lc.Network)
	if err != nil {
		return nil, fmt.Errorf("cannot confine the rollouts' MCP servers: %v (--local-isolation none runs them unconfined)", err)
	}
	return k, nil
}

// knownToolsets lists the built-in toolsets and the configured servers'.
func knownToolsets(cfg *mcp.Config) []string {
	return append(append([]string(nil), rolloutBuiltinToolsets()...), cfg.Toolsets()...)
}

func rolloutBuiltinToolsets() []string { return rollout.KnownToolsets(nil) }

// pickToolsets binds --toolsets, --distribution and --distribution-file:
// fixed toolsets for every row, or a distribution sampled per rollout.
func pickToolsets(c *cli.Context, cfg *mcp.Config) ([]string, rollout.Distribution, error) {
	known := knownToolsets(cfg)
	if c.IsSet("toolsets") && (c.IsSet("distribution") || c.IsSet("distribution-file")) {
		return nil, nil, usagef("--toolsets and --distribution (or --distribution-file) exclude each other")
	}
	if c.IsSet("toolsets") {
		ts, err := rollout.ParseToolsets(c.String("toolsets"), known)
		if err != nil {
			return nil, nil, usagef("--toolsets: %v", err)
		}
		return ts, nil, nil
	}
	dists := map[string]rollout.Distribution{}
	for n, d := range rollout.Distributions {
		dists[n] = d
	}
	if f := c.String("distribution-file"); f != "" {
		file, err := rollout.LoadDistributions(f, known)
		if err != nil {
			return nil, nil, usagef("--distribution-file: %v", err)
		}
		for n, d := range file {
			dists[n] = d
		}
	}
	name := c.String("distribution")
	if name == "" {
		name = "default"
	}
	d, ok := dists[name]
	if !ok {
		names := make([]string, 0, len(dists))
		for n := range dists {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, nil, usagef("--distribution: unknown distribution %q (known: %s)", name, strings.Join(names, ", "))
	}
	return nil, d, nil
}
