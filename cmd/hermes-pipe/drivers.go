package main

import (
	"context"
	"os"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/docker"
	"github.com/hermes-pipe/hermes-pipe/sandbox/local"
	"github.com/hermes-pipe/hermes-pipe/sandbox/ssh"
	"github.com/hermes-pipe/hermes-pipe/stages/cron"
	"github.com/urfave/cli/v2"
)

// registry returns the sandbox drivers this binary offers. Drivers are
// registered here explicitly; no package registers itself.
func registry() *sandbox.Registry {
	r := sandbox.NewRegistry()
	r.Register("local", local.Factory)
	r.Register("docker", docker.Factory)
	r.Register("ssh", ssh.Factory)
	return r
}

// openSandbox builds the driver for scheme; an unknown scheme is a usage error.
func openSandbox(scheme string, cfg sandbox.Config) (sandbox.Driver, error) {
	r := registry()
	known := false
	for _, s := range r.Schemes() {
		known = known || s == scheme
	}
	if !known {
		return nil, usagef("--sandbox: unknown sandbox %q (known: local, docker, ssh)", scheme)
	}
	return r.Open(scheme, cfg)
}

// releaseSandbox frees driver-wide resources (daemon client, ssh connection).
func releaseSandbox(d sandbox.Driver) {
	if rel, ok := d.(sandbox.Releaser); ok {
		_ = rel.Release()
	}
}

// extraCommands are the commands of the other modes.
func extraCommands() []*cli.Command {
	return []*cli.Command{
		compressCommand(),
		tokensCommand(),
		sweCommand(),
		mergeCommand(),
		statusCommand(),
		reportCommand(),
		viewCommand(),
		preflightCommand(),
		sandboxCommand(),
		cronCommand(cronDeps{Agent: cronAgent()}),
		versionCommand(),
	}
}

// cronAgent runs cron agent jobs through the rollout stage in the local
// sandbox, or the job's own (--sandbox docker:IMAGE, ssh:HOST). Jobs without
// their own endpoint use HERMES_PIPE_BASE_URL and HERMES_PIPE_MODEL; the key
// comes from OPENAI_API_KEY unless the job names its variable. With
// HERMES_PIPE_PRICES (a price file, as --prices) each execution's record
// gets cost_usd.
func cronAgent() cron.AgentRunner {
	return &cron.RolloutRunner{
		Driver:         lazyDriver{scheme: "local"},
		DefaultBaseURL: os.Getenv("HERMES_PIPE_BASE_URL"),
		DefaultModel:   os.Getenv("HERMES_PIPE_MODEL"),
		BaseURLEnv:     "HERMES_PIPE_BASE_URL",
		ModelEnv:       "HERMES_PIPE_MODEL",
		APIKey:         os.Getenv("OPENAI_API_KEY"),
		PricesFile:     os.Getenv("HERMES_PIPE_PRICES"),
		OpenDriver: func(scheme string, cfg sandbox.Config) (sandbox.Driver, error) {
			if scheme == "local" {
				cfg.Local.Limits = defaultCeilings(defaultLocalLimits)
			}
			return openSandbox(scheme, cfg)
		},
	}
}

// defaultLocalLimits are the per-session limits of a confined local
// session unless --local-max-* flags say otherwise; the memory, disk and
// CPU ceilings are added by localCeilings (flags) or defaultCeilings.
var defaultLocalLimits = sandbox.LocalLimits{Processes: 1024, FileSizeBytes: 4 << 30}

// lazyDriver builds its driver on the first Open, so commands that never run
// an agent job never touch a sandbox.
type lazyDriver struct{ scheme string }

func (l lazyDriver) Open(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	d, err := registry().Open(l.scheme, sandbox.Config{Local: sandbox.LocalConfig{Limits: defaultCeilings(defaultLocalLimits)}})
	if err != nil {
		return nil, err
	}
	return d.Open(ctx, spec)
}
