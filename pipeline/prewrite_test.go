package pipeline

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

func TestInflightLeast(t *testing.T) {
	f := newInflight()
	if _, ok := f.least(); ok {
		t.Fatal("an empty set has a least member")
	}
	for _, i := range rand.Perm(20) {
		f.add(int64(i/2), int64(i%2), fmt.Sprintf("k%02d", i))
	}
	f.remove("k00")
	f.remove("k01")
	f.remove("nobody") // a fanned-out record's key: ignored
	f.remove("k05")
	if k, ok := f.least(); !ok || k.key != "k02" || k.pi != 1 || k.sample != 0 {
		t.Fatalf("least = %+v, %v; want k02", k, ok)
	}
	f.remove("k02")
	f.remove("k03")
	if k, _ := f.least(); k.key != "k04" {
		t.Fatalf("least = %+v; want k04", k)
	}
	f.add(0, 0, "k00") // back in the stages
	if k, _ := f.least(); k.key != "k00" {
		t.Fatalf("least = %+v; want k00 again", k)
	}
	f.remove("k00")
	f.add(0, 0, "k00") // again, before least popped it
	f.remove("k00")
	if k, _ := f.least(); k.key != "k04" {
		t.Fatalf("least = %+v; want k04: k00 left twice", k)
	}
}

// pendingOf is the row of a completed record k%05d with prompt index i.
func pendingOf(t *testing.T, o *Output, i int) pending {
	t.Helper()
	rec := &schemas.Record{Key: fmt.Sprintf("k%05d", i), PromptIndex: i}
	complete(rec)
	line, err := EncodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	return pending{key: rec.Key, outcome: rec.Outcome, pi: int64(i), rec: rec, line: line, stat: o.statLine(rec, line)}
}

// shardKeys returns the keys of a JSONL shard's records, in file order.
func shardKeys(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var keys []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, `"key":"`)
		if i < 0 {
			t.Fatalf("%s: a line without a key: %.80s", path, line)
		}
		keys = append(keys, line[i+7:i+13])
	}
	return keys
}

func temps(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, DataDir, tempPrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// wantShard checks the keys of a data/ shard, in file order.
func wantShard(t *testing.T, dir, name, keys string) {
	t.Helper()
	if got := strings.Join(shardKeys(t, filepath.Join(dir, DataDir, name)), " "); got != keys {
		t.Fatalf("%s holds %s, want %s", name, got, keys)
	}
}

// finishWhole checks no temp file is left, finishes and closes o and
// checks the folder holds records k00000..k<n-1>, whole.
func finishWhole(t *testing.T, o *Output, dir string, n int) {
	t.Helper()
	if m := temps(t, dir); len(m) != 0 {
		t.Fatalf("temp files left: %v", m)
	}
	if err := o.finish(); err != nil {
		t.Fatal(err)
	}
	o.Close()
	checkWhole(t, dir, n)
}

// Rows settled before the commit are written into the batch's temp file
// ahead; the commit adds the rest, and the shard is the one a commit of
// the whole batch writes: every record, in catOrder.
func TestPrewriteThenCommit(t *testing.T) {
	dir := t.TempDir()
	o := openOut(t, dir, ModeFresh)
	b := &batch{sub: DataDir}
	for _, i := range []int{3, 1, 0, 2, 5} {
		b.rows = append(b.rows, pendingOf(t, o, i))
	}
	o.prewrite(b, rowKey{pi: 4, key: "k00004"}, true) // k00004 is in the stages
	if len(b.pre) != 4 || b.pre[0].key != "k00000" || b.pre[3].key != "k00003" || len(b.rows) != 1 {
		t.Fatalf("written ahead %d rows, left %d; want k00000..k00003 and k00005", len(b.pre), len(b.rows))
	}
	if len(temps(t, dir)) != 1 {
		t.Fatalf("temp files %v, want the batch's one", temps(t, dir))
	}
	b.rows = append(b.rows, pendingOf(t, o, 6), pendingOf(t, o, 4))
	if err := o.commit(b); err != nil {
		t.Fatal(err)
	}
	if o.prewritten != 4 {
		t.Errorf("the commit used %d rows written ahead, want 4", o.prewritten)
	}
	wantShard(t, dir, "shard-00001.jsonl", "k00000 k00001 k00002 k00003 k00004 k00005 k00006")
	finishWhole(t, o, dir, 7)
}

// A row that sorts before rows already written ahead (a stage fanned a
// record out under an earlier prompt index, or the source was out of
// order) makes the commit write the whole batch anew, in order.
func TestPrewriteWrongBoundRewritesTheBatch(t *testing.T) {
	dir := t.TempDir()
	o := openOut(t, dir, ModeFresh)
	b := &batch{sub: DataDir}
	for _, i := range []int{5, 4, 6} {
		b.rows = append(b.rows, pendingOf(t, o, i))
	}
	o.prewrite(b, rowKey{}, false) // nothing in the stages: all settled
	if len(b.pre) != 3 {
		t.Fatalf("written ahead %d rows, want 3", len(b.pre))
	}
	for _, i := range []int{3, 2, 1, 0} {
		b.rows = append(b.rows, pendingOf(t, o, i))
	}
	o.prewrite(b, rowKey{}, false) // sorts before what was written: stops
	if !b.preOff || len(b.pre) != 0 || len(temps(t, dir)) != 0 {
		t.Fatalf("prewriting went on past a row sorting before it (off %v, %d ahead, temps %v)", b.preOff, len(b.pre), temps(t, dir))
	}
	if err := o.commit(b); err != nil {
		t.Fatal(err)
	}
	wantShard(t, dir, "shard-00001.jsonl", "k00000 k00001 k00002 k00003 k00004 k00005 k00006")
	// The same at the commit: a late row before the written ones.
	b = &batch{sub: DataDir}
	for _, i := range []int{9, 8} {
		b.rows = append(b.rows, pendingOf(t, o, i))
	}
	o.prewrite(b, rowKey{}, false)
	b.rows = append(b.rows, pendingOf(t, o, 7))
	if err := o.commit(b); err != nil {
		t.Fatal(err)
	}
	wantShard(t, dir, "shard-00002.jsonl", "k00007 k00008 k00009")
	if o.prewritten != 0 {
		t.Errorf("commits used %d rows written ahead, want none", o.prewritten)
	}
	finishWhole(t, o, dir, 10)
}

// In a run, rows finishing out of order are written ahead as they settle
// and every shard holds its records in catOrder.
func TestRunPrewritesShards(t *testing.T) {
	old := prewriteEvery
	prewriteEvery = 0 // look at every arrival
	defer func() { prewriteEvery = old }()
	dir := t.TempDir()
	const n = 300
	gates := make([]chan struct{}, n)
	for i := range gates {
		gates[i] = make(chan struct{})
	}
	stage := &funcStage{name: "gated", fn: func(ctx context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		select {
		case <-gates[rec.PromptIndex]:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		complete(rec)
		return []*schemas.Record{rec}, nil
	}}
	// Records finish in a shuffled order within windows of 16, the workers.
	go func() {
		for w := 0; w < n; w += 16 {
			for _, j := range rand.Perm(min(16, n-w)) {
				close(gates[w+j])
			}
		}
	}()
	opts := testOutOpts(ModeFresh)
	opts.MaxShardRows = 100
	out, err := OpenOutput(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := Run(context.Background(), Options{Workers: 16}, SliceSource(records(n)), []Stage{stage}, out)
	if err != nil || sum.OK != n {
		t.Fatalf("run: %v, %+v", err, sum)
	}
	if out.prewritten == 0 {
		t.Error("no commit found rows written ahead")
	}
	out.Close()
	shards, _ := filepath.Glob(filepath.Join(dir, DataDir, "shard-*.jsonl"))
	total := 0
	for _, s := range shards {
		keys := shardKeys(t, s)
		for i := 1; i < len(keys); i++ {
			if keys[i-1] >= keys[i] {
				t.Fatalf("%s: %s before %s", s, keys[i-1], keys[i])
			}
		}
		total += len(keys)
	}
	if total != n {
		t.Fatalf("shards hold %d records, want %d", total, n)
	}
	if m := temps(t, dir); len(m) != 0 {
		t.Fatalf("temp files left: %v", m)
	}
	checkWhole(t, dir, n)
}
