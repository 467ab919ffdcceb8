package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/generate/prompts"
	"github.com/hermes-pipe/hermes-pipe/stages/preflight"
	"github.com/urfave/cli/v2"
)

func sandboxCommand() *cli.Command {
	return &cli.Command{
		Name:  "sandbox",
		Usage: "manage sandboxes",
		Subcommands: []*cli.Command{{
			Name:  "check",
			Usage: "say whether this machine can confine local commands, and with which limits",
			Description: `Finds bubblewrap, runs it once with the namespaces a confined local session
uses (user, mount, pid, net, ipc, uts), looks at which cgroup hierarchy
can hold per-session limits and whether a session folder can be a
size-capped tmpfs, and prints the per-session ceilings (memory, disk, CPU
weight) that the given flags and --workers make on this machine. Exits 1
when confinement is unavailable: then --sandbox local refuses to run unless
--local-isolation none is given.`,
			Flags: append([]cli.Flag{
				&cli.IntFlag{Name: "workers", Value: 8, Usage: "sessions at once, which the auto ceilings share the machine between"},
			}, ceilingFlags()...),
			Action: func(c *cli.Context) error {
				r := confine.Probe(c.Context)
				r.BwrapVersion = confine.Version(c.Context, r.Bwrap)
				fmt.Fprint(c.App.Writer, r.String())
				fmt.Fprint(c.App.Writer, describeCeilings(c, r))
				if err := r.Usable(); err != nil {
					return fmt.Errorf("local confinement unavailable: %w (--local-isolation none runs commands unconfined)", err)
				}
				return nil
			},
		}, {
			Name:      "gc",
			Usage:     "remove containers and folders left by a killed run",
			UsageText: "hermes-pipe sandbox gc [--sandbox docker|local] [--run ID]",
			Description: `Finds what runs left behind by label (docker: hermes-pipe.run=<id>) or by
folder name (local) and removes it. Without --run it removes the leftovers of
every run, so only use it when no run is going on.`,
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "sandbox", Value: "docker", Usage: "driver whose leftovers to remove: docker or local"},
				&cli.StringFlag{Name: "run", Usage: "only this run id (see run.json or the container labels)"},
			},
			Action: func(c *cli.Context) error {
				d, err := openSandbox(c.String("sandbox"), sandbox.Config{})
				if err != nil {
					return err
				}
				defer releaseSandbox(d)
				ctx, cancel := context.WithTimeout(c.Context, 5*time.Minute)
				defer cancel()
				n, err := sandbox.GC(ctx, d, c.String("run"))
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "removed %d leftovers\n", n)
				return nil
			},
		}},
	}
}

// promptImages reads the images of the --prompts rows for the preflight
// command, with generate's check of rows that name none: without
// --docker-image such a row would be rejected by generate, so it is listed
// here (the first five, file:line: image: reason, on the output) and
// counted in noImage. A file none of whose rows names an image (and no
// --docker-image) is refused with exit 2, as generate refuses it.
func promptImages(c *cli.Context) (images []string, noImage int, err error) {
	const shown = 5
	path := c.String("prompts")
	var first []schemas.Reject
	opts := prompts.Options{NeedImage: needImage(c), Reject: func(rj schemas.Reject) {
		if rj.Field != "image" {
			return // other bad rows are not the pre-flight's business
		}
		noImage++
		if len(first) < shown {
			first = append(first, rj)
		}
	}}
	if images, err = prompts.Images(path, opts); err != nil {
		return nil, 0, usagef("--prompts: %v", err)
	}
	var b strings.Builder
	for _, rj := range first {
		fmt.Fprintf(&b, "\n  %s:%d: image: %s", rj.File, rj.Line, rj.Reason)
	}
	if noImage > len(first) {
		fmt.Fprintf(&b, "\n  ... and %d more", noImage-len(first))
	}
	if noImage > 0 && len(images) == 0 {
		return nil, 0, usagef("--prompts %s: none of its rows names an image and no --docker-image is set; --sandbox docker runs every row in an image:%s", path, b.String())
	}
	if noImage > 0 {
		fmt.Fprintf(c.App.Writer, "no image %d rows (generate rejects them; give them an image or set --docker-image):%s\n", noImage, b.String())
	}
	return images, noImage, nil
}

func preflightCommand() *cli.Command {
	return &cli.Command{
		Name:      "preflight",
		Usage:     "check every image a prompts file needs, without spending a token",
		UsageText: "hermes-pipe preflight --prompts FILE [--sandbox docker] [--docker-image IMAGE]",
		Description: `Collects the distinct images of all rows (image or docker_image), inspects
them, pulls missing ones with bounded concurrency and a timeout, and checks the
platform. Prints one line per image; exits 3 when any image is unavailable.
Without --docker-image, rows that name no image are listed (generate rejects
them) and the exit status is 3; when no row names one, nothing is checked
and the exit status is 2.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "prompts", Required: true, Usage: "JSONL prompts file"},
			&cli.StringFlag{Name: "sandbox", Value: "docker", Usage: "driver that runs the images: docker"},
			&cli.StringFlag{Name: "docker-image", Usage: "image of rows that name none"},
			&cli.DurationFlag{Name: "timeout", Value: 10 * time.Minute, Usage: "bound of the whole check"},
		},
		Action: func(c *cli.Context) error {
			images, noImage, err := promptImages(c)
			if err != nil {
				return err
			}
			d, err := openSandbox(c.String("sandbox"), sandbox.Config{})
			if err != nil {
				return err
			}
			defer releaseSandbox(d)
			check := imageChecker(d)
			if check == nil {
				return usagef("--sandbox %s runs no images", c.String("sandbox"))
			}
			if img := c.String("docker-image"); img != "" {
				images = append(images, img)
			}
			res := preflight.Check(c.Context, images, preflight.Options{Checker: preflight.CheckerFunc(check), Timeout: c.Duration("timeout")})
			sort.Strings(res.Images)
			for _, img := range res.Images {
				if err := res.Err(img); err != nil {
					fmt.Fprintf(c.App.Writer, "missing  %s: %v\n", img, res.Missing[img])
				} else {
					fmt.Fprintf(c.App.Writer, "ok       %s\n", img)
				}
			}
			fmt.Fprintf(c.App.Writer, "%d images, %d unavailable, checked in %s\n", len(res.Images), len(res.Missing), res.Duration.Round(time.Millisecond))
			if !res.OK() {
				return &exitStatus{code: exitRowsFailed, msg: fmt.Sprintf("%d of %d images unavailable", len(res.Missing), len(res.Images))}
			}
			if noImage > 0 {
				return &exitStatus{code: exitRowsFailed, msg: fmt.Sprintf("%d rows name no image and no --docker-image is set: generate rejects them", noImage)}
			}
			return nil
		},
	}
}
