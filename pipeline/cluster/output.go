package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/objstore"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// ErrUsage marks a bad shard choice or output address (a malformed --shard,
// a shard count that disagrees with the shards already in the folder, an
// unusable URL): nothing was done, and the CLI reports it as a usage error.
var ErrUsage = errors.New("bad shard or output choice")

// usageError is an ErrUsage error that reads as its cause.
type usageError struct{ err error }

func (u usageError) Error() string        { return u.err.Error() }
func (u usageError) Unwrap() error        { return u.err }
func (u usageError) Is(target error) bool { return target == ErrUsage }

// usage marks err as a usage error without changing its message.
func usage(err error) error { return usageError{err} }

// OutputOptions say where a run writes: Out (a folder or an s3:// or
// file:// URL) and the shard flags.
type OutputOptions struct {
	Out        string
	Shard      string // "I/N"; "" = from the environment, or unsharded
	ShardCount int    // N when the index comes from the environment
	Getenv     func(string) string
	// Spool is the local folder of work in progress for a URL Out; "" = a
	// folder under the temp dir named after Out and the shard.
	Spool string
	// UploadInterval is how often committed work is uploaded for a URL Out.
	UploadInterval time.Duration
	// Overwrite clears the store's prefix first (a URL Out with --overwrite).
	Overwrite bool
	// Notice receives the one line that says which shard this process is and
	// where it writes; nil = discarded.
	Notice io.Writer
	Logger *slog.Logger
}

// Output is where a run writes: the shard's filter (nil when unsharded), the
// local folder, and for a URL Out the upload to finish after the run.
type Output struct {
	Filter func(*schemas.Record) bool
	Dir    string
	// KeepShards is set for a URL Out: the spool's shards are uploaded as
	// they commit and a pull fetches every shard a ledger line names, so
	// the run must not merge its small shards (pipeline.RunConfig.KeepShards).
	KeepShards bool
	finish     func(ctx context.Context) error
}

// Finish stops the periodic upload and uploads what the run committed; call
// it once after the run, whatever its result. It does nothing for a local
// folder.
func (o *Output) Finish(ctx context.Context) error {
	if o.finish == nil {
		return nil
	}
	return o.finish(ctx)
}

// OpenOutput resolves the shard and prepares where the run writes. For a
// local folder a sharded run writes to OUT/shard-I-of-N (refused when OUT
// holds another N). For an s3:// or file:// URL the run writes to a local
// spool folder: a spool without a run is first filled from the store (a
// retried pod on a fresh machine resumes there), committed work is uploaded
// every UploadInterval and at Finish; Overwrite clears the store's prefix
// first. It blocks on the store for the restore. Errors about the choice
// itself wrap ErrUsage.
func OpenOutput(ctx context.Context, o OutputOptions) (*Output, error) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Notice == nil {
		o.Notice = io.Discard
	}
	sp, from, sharded, err := Resolve(o.Shard, o.ShardCount, o.Getenv)
	slurm := fromSlurm(o.Shard, o.Getenv)
	if err != nil && !slurm {
		return nil, usage(err)
	}
	if !objstore.IsURL(o.Out) {
		if slurm {
			if sp, from, err = placeSlurmTask(ctx, localRun(o.Out), o.Out, sp, err, o.Getenv); err != nil {
				return nil, usage(err)
			}
			sharded = true
		}
		owns := func(rec *schemas.Record) bool { return sp.Owns(rec.Key) }
		if !sharded {
			return &Output{Dir: o.Out}, nil
		}
		dir, err := Prepare(o.Out, sp)
		if err != nil {
			return nil, usage(err)
		}
		fmt.Fprintf(o.Notice, "shard %s (from %s): rows whose key hashes to %d of %d, written to %s\n", sp, from, sp.Index, sp.Count, dir)
		return &Output{Filter: owns, Dir: dir}, nil
	}
	root, err2 := objstore.Open(ctx, o.Out)
	if err2 != nil {
		return nil, usage(errors.Join(err, fmt.Errorf("--out: %w", err2)))
	}
	if slurm {
		if sp, from, err = placeSlurmTask(ctx, storeRun{root}, o.Out, sp, err, o.Getenv); err != nil {
			root.Close()
			return nil, usage(err)
		}
		sharded = true
	}
	res, err := openSpooled(ctx, o, root, sp, from, sharded)
	if err != nil {
		root.Close()
		return nil, err
	}
	if sharded {
		res.Filter = func(rec *schemas.Record) bool { return sp.Owns(rec.Key) }
	}
	return res, nil
}

// openSpooled prepares the spool of a URL output; see OpenOutput. The caller
// closes root on error.
func openSpooled(ctx context.Context, o OutputOptions, root *objstore.Store, sp Spec, from string, sharded bool) (*Output, error) {
	store := root
	if sharded {
		names, err := root.Children(ctx)
		if err != nil {
			return nil, err
		}
		m, err := root.ReadMarker(ctx)
		if err != nil {
			return nil, err
		}
		if err := CheckCount(o.Out, names, len(m.Segments) > 0, sp); err != nil {
			return nil, usage(err)
		}
		store = root.Sub(sp.Name())
	}
	spool := o.Spool
	if spool == "" {
		spool = tempFolder("hermes-pipe-spool", o.Out+"\x00"+sp.Name())
	}
	if o.Overwrite {
		if err := store.Clear(ctx); err != nil {
			return nil, err
		}
	} else if _, err := os.Stat(filepath.Join(spool, pipeline.ManifestFile)); err != nil {
		if err := store.Pull(ctx, spool, objstore.PullOptions{}); err != nil {
			return nil, fmt.Errorf("restore the spool from %s: %w", store.URL(), err)
		}
	}
	if sharded {
		fmt.Fprintf(o.Notice, "shard %s (from %s): rows whose key hashes to %d of %d, spooled in %s, uploaded to %s\n", sp, from, sp.Index, sp.Count, spool, store.URL())
	} else {
		fmt.Fprintf(o.Notice, "spooled in %s, uploaded to %s\n", spool, store.URL())
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	syncer := objstore.StartSync(ctx, store, spool, o.UploadInterval, logger)
	return &Output{Dir: spool, KeepShards: true, finish: func(ctx context.Context) error {
		return errors.Join(syncer.Stop(ctx), root.Close())
	}}, nil
}
