package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
)

// Spec names one shard of an N-way run: Index in [0, Count).
type Spec struct {
	Index int
	Count int
}

// String is the "I/N" form --shard takes.
func (s Spec) String() string { return strconv.Itoa(s.Index) + "/" + strconv.Itoa(s.Count) }

// Name is the shard's folder name under OUT: shard-I-of-N.
func (s Spec) Name() string {
	return "shard-" + strconv.Itoa(s.Index) + "-of-" + strconv.Itoa(s.Count)
}

// Dir is the shard's output folder under out.
func (s Spec) Dir(out string) string { return filepath.Join(out, s.Name()) }

// Owns reports whether the unit with this resume key belongs to the shard.
// It costs one hash of the key and allocates nothing.
func (s Spec) Owns(key string) bool { return Of(key, s.Count) == s.Index }

func (s Spec) validate() error {
	if s.Count < 1 {
		return fmt.Errorf("shard count must be at least 1, got %d", s.Count)
	}
	if s.Index < 0 || s.Index >= s.Count {
		return fmt.Errorf("shard index %d is outside 0..%d (indices are 0-based)", s.Index, s.Count-1)
	}
	return nil
}

// Of returns the shard, in [0, n), that owns the unit with this resume key.
// The hash (64-bit FNV-1a, then the SplitMix64 finaliser, modulo n) is part
// of the output format: changing it would move rows between the shards of an
// existing run, so it must never change. n must be at least 1.
func Of(key string, n int) int {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= prime
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return int(h % uint64(n))
}

// Parse reads the "I/N" form of --shard (0-based I, as Kubernetes'
// JOB_COMPLETION_INDEX).
func Parse(s string) (Spec, error) {
	i, n, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Spec{}, fmt.Errorf("shard %q: want INDEX/COUNT, e.g. 0/8", s)
	}
	var sp Spec
	var err1, err2 error
	sp.Index, err1 = strconv.Atoi(i)
	sp.Count, err2 = strconv.Atoi(n)
	if err := errors.Join(err1, err2); err != nil {
		return Spec{}, fmt.Errorf("shard %q: want INDEX/COUNT, e.g. 0/8", s)
	}
	if err := sp.validate(); err != nil {
		return Spec{}, fmt.Errorf("shard %q: %w", s, err)
	}
	return sp, nil
}

// Environment variables the batch engines set for one task of an array.
const (
	EnvJobCompletionIndex = "JOB_COMPLETION_INDEX"   // Kubernetes Indexed Job, 0-based
	EnvSlurmTaskID        = "SLURM_ARRAY_TASK_ID"    // Slurm job array
	EnvSlurmTaskCount     = "SLURM_ARRAY_TASK_COUNT" // tasks in the array
	EnvSlurmTaskMin       = "SLURM_ARRAY_TASK_MIN"   // lowest task id (arrays may start at 1)
	EnvSlurmTaskStep      = "SLURM_ARRAY_TASK_STEP"  // step between task ids
)

// Resolve decides which shard this process is. An explicit flag ("I/N")
// wins; otherwise JOB_COMPLETION_INDEX with count, or SLURM_ARRAY_TASK_ID with
// SLURM_ARRAY_TASK_COUNT (or count), mapped to 0-based through
// SLURM_ARRAY_TASK_MIN and SLURM_ARRAY_TASK_STEP. count is --shard-count (0 =
// not given). ok is false when nothing asks for sharding. from says where the
// index came from, for the line printed at start. getenv is os.Getenv outside
// tests.
func Resolve(flag string, count int, getenv func(string) string) (sp Spec, from string, ok bool, err error) {
	if flag != "" {
		sp, err := Parse(flag)
		if err != nil {
			return Spec{}, "", false, err
		}
		if count != 0 && count != sp.Count {
			return Spec{}, "", false, fmt.Errorf("--shard %s and --shard-count %d disagree", flag, count)
		}
		return sp, "--shard", true, nil
	}
	if v := getenv(EnvJobCompletionIndex); v != "" {
		i, err := strconv.Atoi(v)
		if err != nil {
			return Spec{}, "", false, fmt.Errorf("%s=%q is not a number", EnvJobCompletionIndex, v)
		}
		if count == 0 {
			return Spec{}, "", false, fmt.Errorf("%s is set but the shard count is not: pass --shard-count N (the Job's completions)", EnvJobCompletionIndex)
		}
		sp := Spec{Index: i, Count: count}
		if err := sp.validate(); err != nil {
			return Spec{}, "", false, fmt.Errorf("%s: %w", EnvJobCompletionIndex, err)
		}
		return sp, EnvJobCompletionIndex, true, nil
	}
	if v := getenv(EnvSlurmTaskID); v != "" {
		id, err := strconv.Atoi(v)
		if err != nil {
			return Spec{}, "", false, fmt.Errorf("%s=%q is not a number", EnvSlurmTaskID, v)
		}
		min, step := 0, 1
		if m := getenv(EnvSlurmTaskMin); m != "" {
			if min, err = strconv.Atoi(m); err != nil {
				return Spec{}, "", false, fmt.Errorf("%s=%q is not a number", EnvSlurmTaskMin, m)
			}
		}
		if s := getenv(EnvSlurmTaskStep); s != "" {
			if step, err = strconv.Atoi(s); err != nil || step < 1 {
				return Spec{}, "", false, fmt.Errorf("%s=%q is not a positive number", EnvSlurmTaskStep, s)
			}
		}
		n := count
		if c := getenv(EnvSlurmTaskCount); c != "" {
			envN, err := strconv.Atoi(c)
			if err != nil {
				return Spec{}, "", false, fmt.Errorf("%s=%q is not a number", EnvSlurmTaskCount, c)
			}
			if n != 0 && n != envN {
				return Spec{}, "", false, fmt.Errorf("--shard-count %d and %s=%d disagree", n, EnvSlurmTaskCount, envN)
			}
			n = envN
		}
		if n == 0 {
			return Spec{}, "", false, fmt.Errorf("%s is set but neither %s nor --shard-count is", EnvSlurmTaskID, EnvSlurmTaskCount)
		}
		if (id-min)%step != 0 {
			return Spec{}, "", false, fmt.Errorf("%s=%d is not on the array's step %d from %d", EnvSlurmTaskID, id, step, min)
		}
		sp := Spec{Index: (id - min) / step, Count: n}
		if err := sp.validate(); err != nil {
			return Spec{}, "", false, fmt.Errorf("%s=%d (min %d, step %d): %w", EnvSlurmTaskID, id, min, step, err)
		}
		return sp, EnvSlurmTaskID, true, nil
	}
	if count != 0 {
		return Spec{}, "", false, errors.New("--shard-count needs a shard index: --shard I/N, JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID")
	}
	return Spec{}, "", false, nil
}

// ParseName reads a shard folder name (shard-I-of-N); ok is false for any
// other name.
func ParseName(name string) (Spec, bool) {
	rest, ok := strings.CutPrefix(name, "shard-")
	if !ok {
		return Spec{}, false
	}
	i, n, ok := strings.Cut(rest, "-of-")
	if !ok {
		return Spec{}, false
	}
	sp := Spec{}
	var err1, err2 error
	sp.Index, err1 = strconv.Atoi(i)
	sp.Count, err2 = strconv.Atoi(n)
	if err1 != nil || err2 != nil || sp.validate() != nil || sp.Name() != name {
		return Spec{}, false
	}
	return sp, true
}

// scan lists the shard folders under out, in index order. It does not
// require them to agree on N.
func scan(out string) ([]Spec, error) {
	ents, err := os.ReadDir(out)
	if err != nil {
		return nil, err
	}
	var specs []Spec
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if sp, ok := ParseName(e.Name()); ok {
			specs = append(specs, sp)
		}
	}
	slices.SortFunc(specs, func(a, b Spec) int {
		if a.Count != b.Count {
			return a.Count - b.Count
		}
		return a.Index - b.Index
	})
	return specs, nil
}

// CheckCount returns an error when names (the entries of a run's output
// folder or object prefix) hold shard folders of another count than sp's, or
// an unsharded run (unsharded is true when run.json is among them).
func CheckCount(out string, names []string, unsharded bool, sp Spec) error {
	var specs []Spec
	for _, n := range names {
		if s, ok := ParseName(n); ok {
			specs = append(specs, s)
		}
	}
	for _, n := range counts(specs) {
		if n != sp.Count {
			return fmt.Errorf("shard %s refused: %s already holds a %d-shard run (%s…); every shard of a run must use the same count: use --shard I/%d, or another --out for a %d-shard run",
				sp, out, n, Spec{Index: 0, Count: n}.Name(), n, sp.Count)
		}
	}
	if unsharded {
		return fmt.Errorf("shard %s refused: %s holds an unsharded run (run.json); use another --out for a sharded run", sp, out)
	}
	return nil
}

// counts returns the distinct N of specs, ascending.
func counts(specs []Spec) []int {
	var ns []int
	for _, s := range specs {
		if !slices.Contains(ns, s.Count) {
			ns = append(ns, s.Count)
		}
	}
	return ns
}

// Prepare makes ready the folder of shard sp under out and returns it; the
// caller opens it as a normal output folder (fresh, resume or overwrite). It
// refuses when out already holds shard folders of a run with another shard
// count, or an output folder of an unsharded run, so a mistyped N never mixes
// two partitions of the input. It only lists out and creates folders.
func Prepare(out string, sp Spec) (string, error) {
	if err := sp.validate(); err != nil {
		return "", fmt.Errorf("prepare shard: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", fmt.Errorf("prepare shard %s: %w", sp, err)
	}
	ents, err := os.ReadDir(out)
	if err != nil {
		return "", fmt.Errorf("prepare shard %s: %w", sp, err)
	}
	var names []string
	unsharded := false
	for _, e := range ents {
		names = append(names, e.Name())
		unsharded = unsharded || e.Name() == outdir.ManifestFile
	}
	if err := CheckCount(out, names, unsharded, sp); err != nil {
		return "", err
	}
	dir := sp.Dir(out)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("prepare shard %s: %w", sp, err)
	}
	return dir, nil
}

// ShardDirs returns the shard folders of the sharded run in out, in index
// order, one per index 0..N-1. It fails when out holds no shard folder, shard
// folders of two different counts, or misses an index (a shard that never
// started). cat, stats and verify call it to read across shards.
func ShardDirs(out string) ([]string, error) {
	specs, n, err := layout(out)
	if err != nil {
		return nil, err
	}
	if len(specs) != n {
		var missing []string
		have := map[int]bool{}
		for _, s := range specs {
			have[s.Index] = true
		}
		for i := 0; i < n; i++ {
			if !have[i] {
				missing = append(missing, Spec{Index: i, Count: n}.Name())
			}
		}
		return nil, fmt.Errorf("shards of %s: %d of %d shard folders are missing: %s (run those indices)", out, len(missing), n, strings.Join(missing, ", "))
	}
	dirs := make([]string, n)
	for i, s := range specs {
		dirs[i] = s.Dir(out)
	}
	return dirs, nil
}

// IsSharded reports whether out holds shard folders (cheap: one directory
// listing). The CLI uses it to choose between one folder and ShardDirs.
func IsSharded(out string) bool {
	specs, err := scan(out)
	return err == nil && len(specs) > 0
}

// layout lists the shard folders of out and their common count.
func layout(out string) ([]Spec, int, error) {
	specs, err := scan(out)
	if err != nil {
		return nil, 0, fmt.Errorf("shards of %s: %w", out, err)
	}
	ns := counts(specs)
	switch len(ns) {
	case 0:
		return nil, 0, fmt.Errorf("shards of %s: no shard-I-of-N folder: not a sharded run", out)
	case 1:
		return specs, ns[0], nil
	}
	return nil, 0, fmt.Errorf("shards of %s: folders of runs with different shard counts %v: keep one count per output", out, ns)
}
