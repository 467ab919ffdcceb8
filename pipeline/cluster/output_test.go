package cluster

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

func TestOpenOutputLocal(t *testing.T) {
	out := t.TempDir()
	noEnv := func(string) string { return "" }
	o, err := OpenOutput(context.Background(), OutputOptions{Out: out, Getenv: noEnv})
	if err != nil || o.Dir != out || o.Filter != nil || o.Finish(context.Background()) != nil {
		t.Fatalf("unsharded: %+v %v", o, err)
	}
	var notice bytes.Buffer
	o, err = OpenOutput(context.Background(), OutputOptions{Out: out, Shard: "1/4", Getenv: noEnv, Notice: &notice})
	if err != nil {
		t.Fatal(err)
	}
	if o.Dir != filepath.Join(out, "shard-1-of-4") || !strings.Contains(notice.String(), "shard 1/4") {
		t.Fatalf("sharded: dir %s notice %q", o.Dir, notice.String())
	}
	// The filter keeps exactly the keys the shard owns.
	sp := Spec{Index: 1, Count: 4}
	for _, key := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		if o.Filter(&schemas.Record{Key: key}) != sp.Owns(key) {
			t.Fatalf("filter disagrees with Owns on %q", key)
		}
	}
	// Another shard count in the same folder, or a malformed shard, is a
	// usage error that keeps its own message.
	_, err = OpenOutput(context.Background(), OutputOptions{Out: out, Shard: "0/3", Getenv: noEnv})
	if !errors.Is(err, ErrUsage) || strings.HasPrefix(err.Error(), ErrUsage.Error()) {
		t.Fatalf("another count: %v", err)
	}
	if _, err = OpenOutput(context.Background(), OutputOptions{Out: out, Shard: "5/4", Getenv: noEnv}); !errors.Is(err, ErrUsage) {
		t.Fatalf("index past the count: %v", err)
	}
}

// TestOpenOutputSlurmResubmission follows a Slurm array through a folder: the
// whole array records its numbering, and a later submission of some indices
// (whose own SLURM_ARRAY_TASK_MIN and _COUNT describe only those) lands in
// the shards of the first run, not in a new count.
func TestOpenOutputSlurmResubmission(t *testing.T) {
	env := func(id, min, max, count string) func(string) string {
		m := map[string]string{"SLURM_ARRAY_TASK_ID": id, "SLURM_ARRAY_TASK_MIN": min, "SLURM_ARRAY_TASK_MAX": max,
			"SLURM_ARRAY_TASK_COUNT": count, "SLURM_ARRAY_TASK_STEP": "1"}
		return func(k string) string { return m[k] }
	}
	ctx := context.Background()
	for _, c := range []struct {
		name        string
		first, last int
		resubmit    []string // task ids submitted again, as one array
		wantShard   []string
	}{
		{name: "from 0", first: 0, last: 3, resubmit: []string{"2"}, wantShard: []string{"shard-2-of-4"}},
		{name: "from 1", first: 1, last: 4, resubmit: []string{"2"}, wantShard: []string{"shard-1-of-4"}},
		{name: "two of them", first: 0, last: 7, resubmit: []string{"3", "5"}, wantShard: []string{"shard-3-of-8", "shard-5-of-8"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			n := strconv.Itoa(c.last - c.first + 1)
			for id := c.first; id <= c.last; id++ {
				o, err := OpenOutput(ctx, OutputOptions{Out: out, Getenv: env(strconv.Itoa(id), strconv.Itoa(c.first), strconv.Itoa(c.last), n)})
				if err != nil {
					t.Fatal(err)
				}
				if want := filepath.Join(out, Spec{Index: id - c.first, Count: c.last - c.first + 1}.Name()); o.Dir != want {
					t.Fatalf("task %d: dir %s, want %s", id, o.Dir, want)
				}
			}
			rec, err := os.ReadFile(filepath.Join(out, SlurmArrayFile))
			if err != nil || !strings.Contains(string(rec), `"first_task_id":`+strconv.Itoa(c.first)) {
				t.Fatalf("record %s: %v", rec, err)
			}
			min, max, count := c.resubmit[0], c.resubmit[len(c.resubmit)-1], strconv.Itoa(len(c.resubmit))
			for i, id := range c.resubmit {
				var notice bytes.Buffer
				o, err := OpenOutput(ctx, OutputOptions{Out: out, Getenv: env(id, min, max, count), Notice: &notice})
				if err != nil {
					t.Fatalf("resubmitted %s: %v", id, err)
				}
				if o.Dir != filepath.Join(out, c.wantShard[i]) || !strings.Contains(notice.String(), "later submission") {
					t.Fatalf("resubmitted %s: dir %s, notice %q, want %s", id, o.Dir, notice.String(), c.wantShard[i])
				}
			}
			ents, _ := os.ReadDir(out)
			if len(ents) != c.last-c.first+2 {
				t.Fatalf("resubmissions made folders: %v", ents)
			}
			// Without the record the same submission is refused, never a new count.
			if err := os.Remove(filepath.Join(out, SlurmArrayFile)); err != nil {
				t.Fatal(err)
			}
			if _, err := OpenOutput(ctx, OutputOptions{Out: out, Getenv: env(min, min, max, count)}); !errors.Is(err, ErrUsage) {
				t.Fatalf("resubmission without a record: %v", err)
			}
		})
	}
	// An id outside the recorded array is refused, naming the record.
	out := t.TempDir()
	if _, err := OpenOutput(ctx, OutputOptions{Out: out, Getenv: env("0", "0", "1", "2")}); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenOutput(ctx, OutputOptions{Out: out, Getenv: env("7", "7", "7", "1")}); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), SlurmArrayFile) {
		t.Fatalf("id past the array: %v", err)
	}
	// An unsharded output folder gets no record.
	unsharded := t.TempDir()
	if err := os.WriteFile(filepath.Join(unsharded, "run.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenOutput(ctx, OutputOptions{Out: unsharded, Getenv: env("0", "0", "1", "2")}); !errors.Is(err, ErrUsage) {
		t.Fatalf("unsharded folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(unsharded, SlurmArrayFile)); !os.IsNotExist(err) {
		t.Fatalf("record written into an unsharded folder: %v", err)
	}
}

// TestSpoolKeepsShards: a URL output's spool keeps its shards (they are
// uploaded as they commit), a local folder merges them.
func TestSpoolKeepsShards(t *testing.T) {
	noEnv := func(string) string { return "" }
	ctx := context.Background()
	o, err := OpenOutput(ctx, OutputOptions{Out: t.TempDir(), Getenv: noEnv})
	if err != nil || o.KeepShards {
		t.Fatalf("local folder: %+v %v, want its shards merged", o, err)
	}
	o, err = OpenOutput(ctx, OutputOptions{Out: "file://" + t.TempDir(), Spool: filepath.Join(t.TempDir(), "spool"), Getenv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Finish(ctx)
	if !o.KeepShards {
		t.Fatal("a URL output's spool would merge its shards after uploading them")
	}
}
