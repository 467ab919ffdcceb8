package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/objstore"
)

// LocalRun returns a local folder holding the (sharded) run out: out itself
// when it is a folder, else a read cache (cache, or a folder under the temp
// dir named after out) that it first brings up to date from the store, shard
// by shard, as of each shard's commit marker; shards no longer in the store
// leave the cache. ledgerOnly skips the shard files (enough for status). It
// blocks on the store; cat, stats, verify, merge and status call it. A URL
// that cannot be opened wraps ErrUsage.
func LocalRun(ctx context.Context, out, cache string, ledgerOnly bool) (string, error) {
	if !objstore.IsURL(out) {
		return out, nil
	}
	root, err := objstore.Open(ctx, out)
	if err != nil {
		return "", usage(err)
	}
	defer root.Close()
	names, err := root.Children(ctx)
	if err != nil {
		return "", err
	}
	if cache == "" {
		cache = tempFolder("hermes-pipe-cache", out)
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("read cache: %w", err)
	}
	keep := map[string]bool{}
	for _, name := range names {
		if _, ok := ParseName(name); !ok {
			continue
		}
		keep[name] = true
		if err := root.Sub(name).Pull(ctx, filepath.Join(cache, name), objstore.PullOptions{LedgerOnly: ledgerOnly}); err != nil {
			return "", err
		}
	}
	if len(keep) == 0 { // an unsharded run stored at out itself
		single := filepath.Join(cache, "run")
		if err := root.Pull(ctx, single, objstore.PullOptions{LedgerOnly: ledgerOnly}); err != nil {
			return "", err
		}
		return single, nil
	}
	ents, err := os.ReadDir(cache)
	if err != nil {
		return "", fmt.Errorf("read cache: %w", err)
	}
	for _, e := range ents {
		if _, ok := ParseName(e.Name()); ok && !keep[e.Name()] {
			if err := os.RemoveAll(filepath.Join(cache, e.Name())); err != nil {
				return "", fmt.Errorf("read cache: %w", err)
			}
		}
	}
	return cache, nil
}

// StoreCommits returns, per shard folder of the sharded run stored at url,
// the commits its ledger segments record (time and records), for Status. A
// shard whose marker predates commit times is left out (Status then falls
// back to the cache's file times). It costs one listing and one GET per
// shard. A URL that cannot be opened wraps ErrUsage.
func StoreCommits(ctx context.Context, url string) (map[string][]Commit, error) {
	root, err := objstore.Open(ctx, url)
	if err != nil {
		return nil, usage(err)
	}
	defer root.Close()
	names, err := root.Children(ctx)
	if err != nil {
		return nil, err
	}
	commits := map[string][]Commit{}
	for _, name := range names {
		if _, ok := ParseName(name); !ok {
			continue
		}
		m, err := root.Sub(name).ReadMarker(ctx)
		if err != nil {
			return nil, err
		}
		for _, seg := range m.Segments {
			if !seg.Committed.IsZero() {
				commits[name] = append(commits[name], Commit{At: seg.Committed, Rows: seg.Rows})
			}
		}
	}
	return commits, nil
}

// UploadMerged copies merged.json and the merged statistics of the local
// folder next to the shards in the store at url. It blocks on the store.
func UploadMerged(ctx context.Context, url, local string) error {
	root, err := objstore.Open(ctx, url)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, name := range []string{pipeline.StatisticsFile, MergedFile} {
		b, err := os.ReadFile(filepath.Join(local, name))
		if err != nil {
			return fmt.Errorf("upload %s: %w", name, err)
		}
		if err := root.WriteFile(ctx, name, b); err != nil {
			return err
		}
	}
	return nil
}

// LocalInput returns a local path for an input file given as a path or as an
// object-storage URL (s3://, gs://, azblob://, file://), which it first
// downloads into a cache folder under the temp dir. A download that fails
// wraps ErrUsage.
func LocalInput(ctx context.Context, p string) (string, error) {
	if !objstore.IsURL(p) {
		return p, nil
	}
	local := filepath.Join(tempFolder("hermes-pipe-inputs", p), path.Base(strings.SplitN(p, "?", 2)[0]))
	if err := objstore.Fetch(ctx, p, local); err != nil {
		return "", usage(err)
	}
	return local, nil
}

// tempFolder is the folder under the temp dir that kind (spool, read cache,
// downloaded inputs) keeps for key (an object-storage address): the same key
// always maps to the same folder, so a rerun finds what the last run left.
func tempFolder(kind, key string) string {
	h := sha256.Sum256([]byte(key))
	return filepath.Join(os.TempDir(), kind, hex.EncodeToString(h[:8]))
}
