package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOfIsStable pins the row-to-shard hash: changing it would move the rows
// of existing runs between shards.
func TestOfIsStable(t *testing.T) {
	got := []int{Of("row:0:0123456789ab#0", 7), Of("id:a#0", 7), Of("id:a#1", 7), Of("", 7), Of("row:1:ffffffffffff#3", 1000)}
	want := pinned
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Of changed: got %v, want %v", got, want)
	}
}

var pinned = []int{2, 4, 5, 5, 473}

func TestOfSpreadsKeysEvenly(t *testing.T) {
	const n, keys = 8, 80000
	counts := make([]int, n)
	for i := 0; i < keys; i++ {
		s := Of(fmt.Sprintf("row:%d:0123456789ab#0", i), n)
		if s < 0 || s >= n {
			t.Fatalf("Of out of range: %d", s)
		}
		counts[s]++
	}
	for i, c := range counts {
		if c < keys/n*95/100 || c > keys/n*105/100 {
			t.Errorf("shard %d got %d of %d keys: %v", i, c, keys, counts)
		}
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]string{"0/1": "0/1", "3/8": "3/8", " 7/8 ": "7/8"} {
		sp, err := Parse(in)
		if err != nil || sp.String() != want {
			t.Errorf("Parse(%q) = %v, %v; want %s", in, sp, err, want)
		}
	}
	for _, in := range []string{"", "3", "8/8", "-1/8", "1/0", "a/b", "1/8/9"} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q): no error", in)
		}
	}
}

func TestResolve(t *testing.T) {
	cases := []struct {
		name  string
		flag  string
		count int
		env   map[string]string
		want  string // "" = not sharded; "error" = an error
		from  string
	}{
		{name: "none", want: ""},
		{name: "flag", flag: "2/4", want: "2/4", from: "--shard"},
		{name: "flag and count disagree", flag: "2/4", count: 5, want: "error"},
		{name: "count alone", count: 4, want: "error"},
		{name: "kubernetes", count: 4, env: map[string]string{"JOB_COMPLETION_INDEX": "3"}, want: "3/4", from: "JOB_COMPLETION_INDEX"},
		{name: "kubernetes without count", env: map[string]string{"JOB_COMPLETION_INDEX": "3"}, want: "error"},
		{name: "kubernetes out of range", count: 3, env: map[string]string{"JOB_COMPLETION_INDEX": "3"}, want: "error"},
		{name: "flag beats env", flag: "1/2", env: map[string]string{"JOB_COMPLETION_INDEX": "0"}, want: "1/2", from: "--shard"},
		{name: "slurm", env: map[string]string{"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "8"}, want: "5/8", from: "SLURM_ARRAY_TASK_ID"},
		{name: "slurm from 1", env: map[string]string{"SLURM_ARRAY_TASK_ID": "8", "SLURM_ARRAY_TASK_COUNT": "8", "SLURM_ARRAY_TASK_MIN": "1"}, want: "7/8", from: "SLURM_ARRAY_TASK_ID"},
		{name: "slurm step", env: map[string]string{"SLURM_ARRAY_TASK_ID": "6", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_STEP": "2"}, want: "3/4", from: "SLURM_ARRAY_TASK_ID"},
		{name: "slurm count flag", count: 4, env: map[string]string{"SLURM_ARRAY_TASK_ID": "2"}, want: "2/4", from: "SLURM_ARRAY_TASK_ID"},
		{name: "slurm no count", env: map[string]string{"SLURM_ARRAY_TASK_ID": "2"}, want: "error"},
		{name: "slurm count disagrees", count: 5, env: map[string]string{"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "4"}, want: "error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sp, from, ok, err := Resolve(c.flag, c.count, func(k string) string { return c.env[k] })
			got := ""
			switch {
			case err != nil:
				got = "error"
			case ok:
				got = sp.String()
			}
			if got != c.want || (ok && from != c.from) {
				t.Fatalf("got %q from %q (err %v), want %q from %q", got, from, err, c.want, c.from)
			}
		})
	}
}

func TestPrepareRefusesAnotherCount(t *testing.T) {
	out := t.TempDir()
	dir, err := Prepare(out, Spec{Index: 2, Count: 7})
	if err != nil {
		t.Fatal(err)
	}
	if dir != filepath.Join(out, "shard-2-of-7") {
		t.Fatalf("dir %s", dir)
	}
	if _, err := Prepare(out, Spec{Index: 0, Count: 7}); err != nil {
		t.Fatalf("same count refused: %v", err)
	}
	_, err = Prepare(out, Spec{Index: 2, Count: 8})
	if err == nil || !strings.Contains(err.Error(), "already holds a 7-shard run") || !strings.Contains(err.Error(), "--shard I/7") {
		t.Fatalf("another count: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "shard-2-of-8")); !os.IsNotExist(err) {
		t.Fatalf("refused shard created its folder: %v", err)
	}
	if _, err := ShardDirs(out); err == nil || !strings.Contains(err.Error(), "shard-1-of-7") {
		t.Fatalf("ShardDirs with missing indices: %v", err)
	}
	unsharded := t.TempDir()
	if err := os.WriteFile(filepath.Join(unsharded, "run.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(unsharded, Spec{Index: 0, Count: 2}); err == nil || !strings.Contains(err.Error(), "unsharded") {
		t.Fatalf("unsharded folder: %v", err)
	}
	// Mixed counts made by hand are refused by every reader.
	if err := os.MkdirAll(filepath.Join(out, "shard-0-of-3"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := ShardDirs(out); err == nil || !strings.Contains(err.Error(), "different shard counts") {
		t.Fatalf("mixed counts: %v", err)
	}
}
