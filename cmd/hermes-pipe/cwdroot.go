package main

import (
	"net/url"
	"os"
	"path/filepath"

	"github.com/hermes-pipe/hermes-pipe/cmd/hermes-pipe/internal/view"
	"github.com/hermes-pipe/hermes-pipe/pipeline/objstore"
	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/urfave/cli/v2"
)

// cwdRootFlag names the folders a row's (generate) or a task's (swe) cwd may
// be in with the local and ssh sandboxes.
func cwdRootFlag() cli.Flag {
	return &cli.StringSliceFlag{Name: "cwd-root", Usage: "`DIR` whose folders a row's cwd (swe: a task's cwd) may name with --sandbox local or ssh (ssh: a folder of the remote host); without it such a cwd is refused as input; never the output folder, the viewer's cache, the hermes-pipe home or a folder holding one (repeatable)"}
}

// cwdRule builds the rule a row's cwd must pass for the sandbox of c, or nil
// for docker, whose cwd is a path inside the container. It checks
// --cwd-root and protects the folders the flags already name (the output
// folder when it is a path or a file:// URL, the viewer's cache, the
// hermes-pipe home); the caller protects the run's own folder with
// protectRunDir once it is known. Commands call it before they create their
// output folder, so a bad --cwd-root costs nothing.
func cwdRule(c *cli.Context) (*sandbox.CwdRule, error) {
	kind := c.String("sandbox")
	if kind != "local" && kind != "ssh" {
		return nil, nil
	}
	rule, err := sandbox.NewCwdRule(c.StringSlice("cwd-root"), kind == "ssh")
	if err != nil {
		return nil, usagef("%v", err)
	}
	out := c.String("out")
	if objstore.IsURL(out) {
		out = ""
		if u, err := url.Parse(c.String("out")); err == nil && u.Scheme == "file" {
			out = u.Path
		}
	}
	if err := rule.Protect("the output folder", out); err != nil {
		return nil, usagef("%v", err)
	}
	if cache, err := view.DefaultCacheDir(); err == nil {
		if err := rule.Protect("the viewer's cache", cache); err != nil {
			return nil, usagef("%v", err)
		}
	}
	if err := rule.Protect("the hermes-pipe home", defaultHome(os.Getenv)); err != nil {
		return nil, usagef("%v", err)
	}
	return rule, nil
}

// protectRunDir adds the folder the run writes (a shard's folder, or the
// spool of an object-storage --out) to rule, which may be nil.
func protectRunDir(rule *sandbox.CwdRule, dir string) error {
	if rule == nil {
		return nil
	}
	if err := rule.Protect("the output folder", dir); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// defaultHome is the hermes-pipe home without a --home flag:
// HERMES_PIPE_HOME, else ~/.hermes-pipe.
func defaultHome(getenv func(string) string) string {
	if h := getenv("HERMES_PIPE_HOME"); h != "" {
		return h
	}
	dir, err := os.UserHomeDir()
	if err != nil {
		return ".hermes-pipe"
	}
	return filepath.Join(dir, ".hermes-pipe")
}
