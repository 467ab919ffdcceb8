package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/atomicfile"
	"github.com/hermes-pipe/hermes-pipe/pipeline/objstore"
)

// SlurmArrayFile is the file at the root of a sharded run, beside the shard
// folders, that records how the Slurm job array that started the run numbers
// its tasks. A later submission of some of the run's indices
// (sbatch --array=3,5) is an array of its own whose SLURM_ARRAY_TASK_MIN and
// SLURM_ARRAY_TASK_COUNT describe only those indices, so the task ids are
// mapped to shards through this record instead.
const SlurmArrayFile = "slurm-array.json"

// slurmArray is the content of SlurmArrayFile: shard I of Shards was task id
// First + I*Step.
type slurmArray struct {
	First  int `json:"first_task_id"`
	Step   int `json:"step"`
	Shards int `json:"shards"`
}

// runFiles reads and writes the small files at the root of a run: a local
// folder or an object-storage prefix.
type runFiles interface {
	names(ctx context.Context) ([]string, error)
	read(ctx context.Context, name string) ([]byte, bool, error)
	write(ctx context.Context, name string, b []byte) error
}

type localRun string

func (d localRun) names(context.Context) ([]string, error) {
	ents, err := os.ReadDir(string(d))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, err
}

func (d localRun) read(_ context.Context, name string) ([]byte, bool, error) {
	b, err := os.ReadFile(filepath.Join(string(d), name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	return b, err == nil, err
}

func (d localRun) write(_ context.Context, name string, b []byte) error {
	if err := os.MkdirAll(string(d), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(string(d), name, b)
}

type storeRun struct{ s *objstore.Store }

func (r storeRun) names(ctx context.Context) ([]string, error) { return r.s.Children(ctx) }
func (r storeRun) read(ctx context.Context, name string) ([]byte, bool, error) {
	return r.s.ReadFile(ctx, name)
}
func (r storeRun) write(ctx context.Context, name string, b []byte) error {
	return r.s.WriteFile(ctx, name, b)
}

// fromSlurm reports whether the shard index comes from SLURM_ARRAY_TASK_ID:
// no --shard flag and no Kubernetes index.
func fromSlurm(flag string, getenv func(string) string) bool {
	return flag == "" && getenv(EnvJobCompletionIndex) == "" && getenv(EnvSlurmTaskID) != ""
}

// placeSlurmTask settles the shard of a process whose index comes from
// SLURM_ARRAY_TASK_ID: sp and resolveErr are what Resolve made of the array's
// own variables. When the run at out already holds shards of another count and
// records its array (SlurmArrayFile), this array is a later submission of
// some of that run's indices: the task id is mapped through the record, and
// from says so. Otherwise the array is taken as the whole run and its
// numbering is recorded, once, for later submissions. A run without a record
// keeps sp (OpenOutput then refuses a count that disagrees, as for --shard).
// Resolve's error stands when no record applies.
func placeSlurmTask(ctx context.Context, run runFiles, out string, sp Spec, resolveErr error, getenv func(string) string) (Spec, string, error) {
	from := EnvSlurmTaskID
	names, err := run.names(ctx)
	if err != nil {
		return Spec{}, "", fmt.Errorf("read the run in %s: %w", out, err)
	}
	var have []Spec
	other := false // a name no sharded run has at its root: not ours to write in
	for _, n := range names {
		if s, ok := ParseName(n); ok {
			have = append(have, s)
		} else if n != SlurmArrayFile && n != MergedFile && n != pipeline.StatisticsFile {
			other = true
		}
	}
	rec, found, err := readSlurmArray(ctx, run, out)
	if err != nil {
		return Spec{}, "", err
	}
	ns := counts(have)
	if len(ns) == 1 && ns[0] != sp.Count {
		id, err := strconv.Atoi(getenv(EnvSlurmTaskID))
		if !found || rec.Shards != ns[0] || err != nil {
			return sp, from, resolveErr
		}
		if (id-rec.First)%rec.Step != 0 {
			return Spec{}, "", fmt.Errorf("%s=%d is not a task of the array that started %s (ids %d, %d, … step %d, recorded in %s)",
				EnvSlurmTaskID, id, out, rec.First, rec.First+rec.Step, rec.Step, SlurmArrayFile)
		}
		re := Spec{Index: (id - rec.First) / rec.Step, Count: rec.Shards}
		if err := re.validate(); err != nil {
			return Spec{}, "", fmt.Errorf("%s=%d in the %d-shard run of %s, whose array starts at id %d with step %d (%s): %w",
				EnvSlurmTaskID, id, rec.Shards, out, rec.First, rec.Step, SlurmArrayFile, err)
		}
		return re, fmt.Sprintf("%s, a later submission into the %d-shard array that started at id %d", EnvSlurmTaskID, rec.Shards, rec.First), nil
	}
	if found || resolveErr != nil || other {
		return sp, from, resolveErr
	}
	min, step := 0, 1
	if m, err := strconv.Atoi(getenv(EnvSlurmTaskMin)); err == nil {
		min = m
	}
	if s, err := strconv.Atoi(getenv(EnvSlurmTaskStep)); err == nil && s > 0 {
		step = s
	}
	b, _ := json.Marshal(slurmArray{First: min, Step: step, Shards: sp.Count})
	if err := run.write(ctx, SlurmArrayFile, append(b, '\n')); err != nil {
		return Spec{}, "", fmt.Errorf("record the Slurm array of %s: %w", out, err)
	}
	return sp, from, nil
}

// readSlurmArray reads the run's SlurmArrayFile; found is false when there
// is none.
func readSlurmArray(ctx context.Context, run runFiles, out string) (slurmArray, bool, error) {
	b, found, err := run.read(ctx, SlurmArrayFile)
	if err != nil || !found {
		if err != nil {
			err = fmt.Errorf("read %s of %s: %w", SlurmArrayFile, out, err)
		}
		return slurmArray{}, false, err
	}
	var rec slurmArray
	if err := json.Unmarshal(b, &rec); err != nil || rec.Step < 1 || rec.Shards < 1 {
		if err == nil {
			err = fmt.Errorf("step %d, shards %d: want both at least 1", rec.Step, rec.Shards)
		}
		return slurmArray{}, false, fmt.Errorf("%s/%s: %w", out, SlurmArrayFile, err)
	}
	return rec, true, nil
}
