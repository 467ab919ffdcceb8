package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/moby/moby/client"
)

// ImageOptions tunes CheckImagesWith. The zero value means the defaults.
type ImageOptions struct {
	NoPull          bool          // report missing images instead of pulling them
	PullConcurrency int           // pulls at a time; 0 = 4
	PullTimeout     time.Duration // per pull; 0 = 10 minutes
	InspectWorkers  int           // inspections at a time; 0 = 8
}

var _ sandbox.ImageChecker = (*Driver)(nil)

// CheckImages is CheckImagesWith with default options (sandbox.ImageChecker);
// cmd hands it to the pre-flight of every mode that runs images.
func (d *Driver) CheckImages(ctx context.Context, images []string) map[string]error {
	return d.CheckImagesWith(ctx, images, ImageOptions{})
}

// CheckImagesWith inspects every distinct image, pulls the missing ones with
// bounded concurrency and a per-pull timeout, and checks that each image's
// os/architecture matches the daemon's. It returns the unavailable images
// only, each with its reason; an empty map means all are usable. It blocks
// until every image is settled: one inspect per image when all are present
// (milliseconds each). A daemon that does not answer makes every image
// unavailable with an error wrapping sandbox.ErrUnavailable.
func (d *Driver) CheckImagesWith(ctx context.Context, images []string, opts ImageOptions) map[string]error {
	if opts.PullConcurrency <= 0 {
		opts.PullConcurrency = 4
	}
	if opts.PullTimeout <= 0 {
		opts.PullTimeout = 10 * time.Minute
	}
	if opts.InspectWorkers <= 0 {
		opts.InspectWorkers = 8
	}
	distinct := make([]string, 0, len(images))
	seen := make(map[string]bool, len(images))
	for _, img := range images {
		if img != "" && !seen[img] {
			seen[img] = true
			distinct = append(distinct, img)
		}
	}
	missing := map[string]error{}
	if len(distinct) == 0 {
		return missing
	}
	info, err := d.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		err = fmt.Errorf("docker daemon: %w", unavailable(ctx, err))
		for _, img := range distinct {
			missing[img] = err
		}
		return missing
	}
	wantOS, wantArch := info.Info.OSType, normArch(info.Info.Architecture)

	var mu sync.Mutex
	inspectSem := make(chan struct{}, opts.InspectWorkers)
	pullSem := make(chan struct{}, opts.PullConcurrency)
	var wg sync.WaitGroup
	for _, img := range distinct {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := d.checkImage(ctx, img, wantOS, wantArch, opts, inspectSem, pullSem)
			if err != nil {
				mu.Lock()
				missing[img] = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return missing
}

// checkImage settles one image: inspect, pull when absent, inspect again,
// compare the platform.
func (d *Driver) checkImage(ctx context.Context, img, wantOS, wantArch string, opts ImageOptions, inspectSem, pullSem chan struct{}) error {
	inspect := func() (os, arch string, err error) {
		select {
		case inspectSem <- struct{}{}:
		case <-ctx.Done():
			return "", "", ctx.Err()
		}
		defer func() { <-inspectSem }()
		in, err := d.cli.ImageInspect(ctx, img)
		if err != nil {
			return "", "", err
		}
		return in.Os, normArch(in.Architecture), nil
	}
	os, arch, err := inspect()
	if cerrdefs.IsNotFound(err) {
		if opts.NoPull {
			return errors.New("not present and pulling is disabled")
		}
		if perr := d.pull(ctx, img, opts.PullTimeout, pullSem); perr != nil {
			return fmt.Errorf("not present, pull failed: %w", perr)
		}
		os, arch, err = inspect()
	}
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return errors.New("not present after pull")
		}
		return fmt.Errorf("inspect: %w", unavailable(ctx, err))
	}
	if (wantOS != "" && os != "" && os != wantOS) || (wantArch != "" && arch != "" && arch != wantArch) {
		return fmt.Errorf("platform %s/%s does not match the daemon's %s/%s", os, arch, wantOS, wantArch)
	}
	return nil
}

// pull pulls img within timeout, holding one slot of sem.
func (d *Driver) pull(ctx context.Context, img string, timeout time.Duration, sem chan struct{}) error {
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-sem }()
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := d.cli.ImagePull(pctx, img, client.ImagePullOptions{})
	if err != nil {
		return err
	}
	defer resp.Close()
	// Wait reports errors carried in the progress stream (unknown image,
	// denied access) as well as transport errors.
	if err := resp.Wait(pctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("timed out after %v", timeout)
		}
		return err
	}
	return nil
}

// normArch maps uname-style architecture names (the daemon's Info) to the
// Go/OCI names images use.
func normArch(a string) string {
	switch strings.ToLower(a) {
	case "x86_64", "x86-64", "amd64":
		return "amd64"
	case "aarch64", "arm64":
		return "arm64"
	case "i386", "i686", "386":
		return "386"
	case "armv7l", "armhf", "arm":
		return "arm"
	}
	return a
}
