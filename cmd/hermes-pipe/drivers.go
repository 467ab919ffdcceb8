package main

import (
	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/docker"
	"github.com/hermes-pipe/hermes-pipe/sandbox/local"
	"github.com/hermes-pipe/hermes-pipe/sandbox/ssh"
	"github.com/urfave/cli/v2"
)

// parquetSupported says whether --format parquet is wired in this build.
const parquetSupported = false

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
func extraCommands() []*cli.Command { return nil }
