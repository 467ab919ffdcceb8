package main

import (
	"context"
	"fmt"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/objstore"
	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout"
	"github.com/hermes-pipe/hermes-pipe/stages/workspace"
	"github.com/urfave/cli/v2"
)

// keepWorkspaceFlags are generate's --keep-workspace flags.
func keepWorkspaceFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "keep-workspace", Usage: "keep each rollout's final working folder (tar + zstd) in OUT/workspaces/, named in the record's extra.workspace, so hermes-pipe regrade can grade it again without the model"},
		&cli.StringFlag{Name: "keep-workspace-max", Value: "50M", Usage: "largest workspace kept, as a tar before compression (K, M, G); a larger one is recorded as truncated (extra.workspace.truncated) and not kept"},
	}
}

// keepWorkspace binds --keep-workspace into ro: the rollout archives its
// session's working folder into out before the session closes. It returns
// nil when the flag is off.
func keepWorkspace(c *cli.Context, out string, ro *rollout.Options) (*workspace.Keeper, error) {
	if !c.Bool("keep-workspace") {
		return nil, nil
	}
	max, err := confine.ParseBytes(c.String("keep-workspace-max"))
	if err != nil || max <= 0 {
		return nil, usagef("--keep-workspace-max: %q is not a size above 0 (e.g. 50M)", c.String("keep-workspace-max"))
	}
	if objstore.IsURL(c.String("out")) {
		return nil, usagef("--keep-workspace needs a local --out folder (workspaces are not uploaded to object storage)")
	}
	k := &workspace.Keeper{Out: out, Max: max}
	if err := k.Prepare(); err != nil {
		return nil, err
	}
	ro.KeepWorkspace = func(ctx context.Context, rec *schemas.Record, sess sandbox.Session) {
		dir := ""
		if rec.Input != nil {
			dir = rec.Input.Cwd
		}
		info, err := k.Keep(ctx, sess, rec.Key, dir)
		if err != nil {
			info = workspace.Info{Error: err.Error()}
		}
		workspace.Set(rec, info)
	}
	return k, nil
}

// sweepWorkspaces removes the archives no live record of out names (a row
// redone by --resume, a kill -9 between an archive and its record's
// commit), once the run is over.
func sweepWorkspaces(c *cli.Context, k *workspace.Keeper, out string) error {
	if k == nil {
		return nil
	}
	live := map[string]bool{}
	err := pipeline.EachRecordWith(out, pipeline.CatOptions{Ungraded: true}, func(_ pipeline.RecordRef, line []byte) error {
		if info, ok, _ := workspace.InfoOf(line); ok && info.Kept() {
			live[info.File] = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	n, err := workspace.Sweep(out, live)
	if n > 0 {
		fmt.Fprintf(c.App.ErrWriter, "generate: removed %d workspace archives no record names\n", n)
	}
	return err
}
