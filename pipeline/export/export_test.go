package export

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// catLines is pipeline.Cat of dir, one line each.
func catLines(t testing.TB, dir string) []string {
	t.Helper()
	var b bytes.Buffer
	if err := pipeline.Cat(dir, &b); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

func member(line, name string) string {
	v, _, _ := schemas.FirstMember(line, name)
	return v
}

// readParquet reads every row of the Parquet files into T.
func readParquet[T any](t testing.TB, dir string, files []string, cfg *parquet.SchemaConfig, schema *parquet.Schema) []T {
	t.Helper()
	var out []T
	for _, name := range files {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		r := parquet.NewGenericReader[T](f, schema, cfg)
		rows := make([]T, r.NumRows())
		n, err := r.Read(rows)
		if err != nil && n != len(rows) {
			t.Fatalf("%s: read %d of %d rows: %v", name, n, len(rows), err)
		}
		out = append(out, rows[:n]...)
		r.Close()
		f.Close()
	}
	return out
}

func TestShareGPTEqualsRecords(t *testing.T) {
	src := testFolder(t)
	recs := catLines(t, src)
	for _, ff := range []string{FileJSONL, FileParquet} {
		t.Run(ff, func(t *testing.T) {
			to := filepath.Join(t.TempDir(), "out")
			man := run(t, Options{To: to, Format: FormatShareGPT, FileFormat: ff}, src)
			if man.Rows != int64(len(recs)) || man.Splits["train"].Rows != int64(len(recs)) {
				t.Fatalf("rows %d, want %d: %+v", man.Rows, len(recs), man.Splits)
			}
			files := man.Splits["train"].Files
			if want := []string{"data/train-00000-of-00001." + ff}; !slices.Equal(files, want) {
				t.Fatalf("files %v, want %v", files, want)
			}
			if ff == FileJSONL {
				lines := readLines(t, to, files)
				for i, l := range lines {
					if got, want := member(l, schemas.MemberConversations), member(recs[i], schemas.MemberConversations); got != want {
						t.Fatalf("row %d: conversations\n%s\nwant\n%s", i, got, want)
					}
					for _, m := range []string{schemas.MemberKey, schemas.MemberPromptIndex, schemas.MemberSample, schemas.MemberOutcome, schemas.MemberModel} {
						if got, want := member(l, m), member(recs[i], m); got != want {
							t.Fatalf("row %d: %s %s, want %s", i, m, got, want)
						}
					}
					if member(l, columnSource) != `"run-a"` || member(l, columnReward) != "null" {
						t.Fatalf("row %d: source %s reward %s", i, member(l, columnSource), member(l, columnReward))
					}
				}
				return
			}
			rows := readParquet[shareGPTRow](t, to, files, shareGPTConfig(), shareGPTSchema())
			for i, r := range rows {
				var rec schemas.Record
				if err := json.Unmarshal([]byte(recs[i]), &rec); err != nil {
					t.Fatal(err)
				}
				var turns []schemas.Turn
				for _, tu := range r.Conversations {
					turns = append(turns, schemas.Turn{From: tu.From, Value: tu.Value})
				}
				if !reflect.DeepEqual(turns, rec.Conversations) || r.Key != rec.Key || r.PromptIndex != int64(rec.PromptIndex) ||
					r.Sample != int64(rec.Sample) || r.Outcome != string(rec.Outcome) || r.Source != "run-a" || r.Reward != nil {
					t.Fatalf("row %d differs from record %s", i, rec.Key)
				}
				if (r.ID == nil) != (rec.ID == "") || r.ID != nil && *r.ID != rec.ID {
					t.Fatalf("row %d: id %v, want %q", i, r.ID, rec.ID)
				}
			}
		})
	}
}

func TestMessagesRoundTrip(t *testing.T) {
	needInverse(t)
	src := testFolder(t)
	byKey := map[string]string{}
	for _, l := range catLines(t, src) {
		k, _ := schemas.JSONString(member(l, schemas.MemberKey))
		byKey[k] = l
	}
	for _, args := range []string{ArgumentsString, ArgumentsObject} {
		to := filepath.Join(t.TempDir(), "out")
		man := run(t, Options{To: to, FileFormat: FileJSONL, Arguments: args, Where: []string{"outcome=completed"}}, src)
		if man.NotConvertible.Count != 0 || man.Rows == 0 {
			t.Fatalf("%s: rows %d, not convertible %+v", args, man.Rows, man.NotConvertible)
		}
		for _, l := range readLines(t, to, man.Splits["train"].Files) {
			turns, err := schemas.ConvertOpenAILine([]byte(l))
			if err != nil {
				t.Fatalf("%s: %v: %s", args, err, l)
			}
			k, _ := schemas.JSONString(member(l, schemas.MemberKey))
			var rec schemas.Record
			if err := json.Unmarshal([]byte(byKey[k]), &rec); err != nil {
				t.Fatal(err)
			}
			if rec.Outcome != schemas.OutcomeCompleted {
				t.Fatalf("%s kept with outcome %s", k, rec.Outcome)
			}
			if !reflect.DeepEqual(turns[1:], rec.Conversations[1:]) {
				t.Fatalf("%s: %s round trip differs:\n%v\nwant\n%v", k, args, turns, rec.Conversations)
			}
			if strings.Contains(l, `"role":"system"`) {
				t.Fatalf("%s: a system message: %s", k, l)
			}
		}
	}
	to := filepath.Join(t.TempDir(), "pq")
	man := run(t, Options{To: to}, src)
	rows := readParquet[messagesRow](t, to, man.Splits["train"].Files, messagesConfig(), messagesSchema())
	if int64(len(rows)) != man.Rows {
		t.Fatalf("%d rows read, manifest says %d", len(rows), man.Rows)
	}
	for _, r := range rows {
		rec := testRecord(int(r.PromptIndex), int(r.Sample))
		if got := schemas.ToShareGPT(messagesOf(r), toolsOf(r.Tools)); !reflect.DeepEqual(got, rec.Conversations) {
			t.Fatalf("%s: Parquet row does not give the record back", r.Key)
		}
	}
}

func TestNotConvertibleCounted(t *testing.T) {
	src := testFolder(t)
	to := filepath.Join(t.TempDir(), "out")
	man := run(t, Options{To: to, FileFormat: FileJSONL}, src)
	var want int64
	for _, l := range catLines(t, src) {
		var rec schemas.Record
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		if _, _, err := schemas.FromShareGPT(rec.Conversations); err != nil {
			want++
		}
	}
	if man.NotConvertible.Count != want || man.Rows != 24-want || len(man.NotConvertible.Keys) != int(min(want, maxDroppedKeys)) {
		t.Fatalf("not convertible %+v, rows %d; want %d left out", man.NotConvertible, man.Rows, want)
	}
	if man.Steps[1].In != 24 || man.Steps[1].Out != 24-want {
		t.Fatalf("steps %+v", man.Steps)
	}
}

func TestDeterministic(t *testing.T) {
	src := testFolder(t)
	for _, o := range []Options{
		{Format: FormatShareGPT, Split: "train=0.6,validation=0.2,test=0.2", Seed: 3, BestOf: 2, ShardRows: 4},
		{Format: FormatShareGPT, FileFormat: FileJSONL, Dedupe: "exact", Where: []string{"tokens>120"}},
		{ShardRows: 3, Split: "train=0.5,test=0.5"},
	} {
		a, b := o, o
		a.To, b.To = filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
		run(t, a, src)
		run(t, b, src)
		ta, tb := treeBytes(t, a.To), treeBytes(t, b.To)
		if len(ta) < 2 || !maps.Equal(ta, tb) {
			t.Fatalf("%+v: two exports differ: %v vs %v", o, slices.Sorted(maps.Keys(ta)), slices.Sorted(maps.Keys(tb)))
		}
	}
}

// groupOf is the prompt of an exported JSONL row: its id, else its text.
func groupOf(l string) string {
	if id := member(l, schemas.MemberID); id != "null" {
		return id
	}
	pi, _ := schemas.JSONInt(member(l, schemas.MemberPromptIndex))
	if pi == 5 || pi == 6 {
		return "same text"
	}
	return fmt.Sprint(pi)
}

func TestBestOfSplitKeepsEachPromptOnce(t *testing.T) {
	src := testFolder(t)
	opts := Options{Format: FormatShareGPT, FileFormat: FileJSONL, BestOf: 1, Split: "train=0.5,validation=0.5", Seed: 7}
	var first map[string]string
	for range 2 {
		o := opts
		o.To = filepath.Join(t.TempDir(), "out")
		man := run(t, o, src)
		seen := map[string]string{}
		for _, sp := range []string{"train", "validation"} {
			for _, l := range readLines(t, o.To, man.Splits[sp].Files) {
				if l == "" {
					continue
				}
				g := groupOf(l)
				if prev, dup := seen[g]; dup {
					t.Fatalf("prompt %s kept twice (%s and %s)", g, prev, sp)
				}
				seen[g] = sp
				if s := member(l, schemas.MemberSample); s != "2" {
					t.Fatalf("prompt %s: sample %s kept, want 2 (the fewest tokens)", g, s)
				}
			}
		}
		// 8 prompts, two of them the same text: 7 groups.
		if len(seen) != 7 || man.Rows != 7 {
			t.Fatalf("%d prompts kept (%d rows), want 7: %v", len(seen), man.Rows, seen)
		}
		if man.Splits["train"].Rows == 0 || man.Splits["validation"].Rows == 0 {
			t.Fatalf("a split is empty with seed 7: %+v", man.Splits)
		}
		if first != nil && !maps.Equal(first, seen) {
			t.Fatalf("second run differs: %v vs %v", first, seen)
		}
		first = seen
	}
}

func TestSplitNeverSplitsAPrompt(t *testing.T) {
	src := writeFolder(t, filepath.Join(t.TempDir(), "run"), "r", "", 50, testRecords(40, 4))
	for seed := range int64(5) {
		to := filepath.Join(t.TempDir(), "out")
		man := run(t, Options{Format: FormatShareGPT, FileFormat: FileJSONL, To: to, Split: "train=0.7,validation=0.2,test=0.1", Seed: seed}, src)
		where := map[string]string{}
		for _, sp := range []string{"train", "validation", "test"} {
			for _, l := range readLines(t, to, man.Splits[sp].Files) {
				if l == "" {
					continue
				}
				if g := groupOf(l); where[g] != "" && where[g] != sp {
					t.Fatalf("seed %d: prompt %s in %s and %s", seed, g, where[g], sp)
				} else {
					where[g] = sp
				}
			}
		}
		if man.Rows != 160 {
			t.Fatalf("rows %d, want 160", man.Rows)
		}
	}
}

func TestBestOfOrder(t *testing.T) {
	mk := func(s int, outcome schemas.Outcome, tokens int64) *schemas.Record {
		r := testRecord(1, s)
		r.Outcome, r.Usage.TotalTokens = outcome, tokens
		return r
	}
	recs := []*schemas.Record{mk(0, schemas.OutcomeMaxTurns, 10), mk(1, schemas.OutcomeCompleted, 50), mk(2, schemas.OutcomeCompleted, 30), mk(3, schemas.OutcomeCompleted, 30)}
	src := writeFolder(t, filepath.Join(t.TempDir(), "run"), "r", "", 10, recs)
	for n, want := range map[int][]string{1: {"2"}, 2: {"2", "3"}, 3: {"1", "2", "3"}, 5: {"0", "1", "2", "3"}} {
		to := filepath.Join(t.TempDir(), "out")
		man := run(t, Options{Format: FormatShareGPT, FileFormat: FileJSONL, To: to, BestOf: n}, src)
		var got []string
		for _, l := range readLines(t, to, man.Splits["train"].Files) {
			got = append(got, member(l, schemas.MemberSample))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("best-of %d kept samples %v, want %v", n, got, want)
		}
	}
}

func TestDedupeNormalisesToolCallJSON(t *testing.T) {
	conv := func(call, resp string) []schemas.Turn {
		return []schemas.Turn{{From: "system", Value: schemas.HermesSystemPrompt(testTools)}, {From: "human", Value: "go"},
			{From: "gpt", Value: "<think>\n</think>\n<tool_call>\n" + call + "\n</tool_call>"},
			{From: "tool", Value: "<tool_response>\n" + resp + "\n</tool_response>"}, {From: "gpt", Value: "<think>\n</think>\nok"}}
	}
	var recs []*schemas.Record
	for s, c := range [][]schemas.Turn{
		conv(`{"name": "terminal", "arguments": {"command": "ls", "timeout": 5}}`, `{"tool_call_id": "a", "name": "terminal", "content": {"output": "x"}}`),
		conv(`{"arguments":{"timeout":5,"command":"ls"},"name":"terminal"}`, `{"name": "terminal", "tool_call_id": "a", "content": {"output":"x"}}`),
		conv(`{"name": "terminal", "arguments": {"command": "ls -l", "timeout": 5}}`, `{"tool_call_id": "a", "name": "terminal", "content": {"output": "x"}}`),
		conv(`{"name": "terminal", "arguments": {"timeout": 5, "command": "ls"}}`, `{"tool_call_id": "a", "name": "terminal", "content": {"output": "x"}}`),
	} {
		r := testRecord(1, s)
		r.Conversations = c
		recs = append(recs, r)
	}
	src := writeFolder(t, filepath.Join(t.TempDir(), "run"), "r", "", 10, recs)
	to := filepath.Join(t.TempDir(), "out")
	man := run(t, Options{Format: FormatShareGPT, FileFormat: FileJSONL, To: to, Dedupe: "exact"}, src)
	var got []string
	for _, l := range readLines(t, to, man.Splits["train"].Files) {
		got = append(got, member(l, schemas.MemberSample))
	}
	if !slices.Equal(got, []string{"0", "2"}) {
		t.Fatalf("dedupe kept samples %v, want [0 2]", got)
	}
	if st := man.Steps[2]; st.Name != "dedupe exact" || st.In != 4 || st.Out != 2 {
		t.Fatalf("dedupe step %+v", st)
	}
}

func TestWhereAndShortcuts(t *testing.T) {
	src := testFolder(t) // kinds by prompt (i%5): 0 reasoning+call, 1 plain, 2 unknown tool, 3 max_turns, 4 reasoning, 5 like 0, 6 like 1, 7 like 2
	cases := []struct {
		opts    Options
		prompts []int64
	}{
		{Options{Where: []string{"outcome=completed"}}, []int64{0, 1, 2, 4, 5, 6, 7}},
		{Options{Where: []string{"outcome != completed"}}, []int64{3}},
		{Options{Where: []string{"has_reasoning=true"}}, []int64{0, 4, 5}},
		{Options{RequireReasoning: true}, []int64{0, 4, 5}},
		{Options{DropUnknownTools: true}, []int64{0, 1, 3, 4, 5, 6}},
		{Options{Where: []string{"tool_failures>=1"}}, []int64{2, 7}},
		{Options{Where: []string{"turns=1"}}, []int64{1, 3, 4, 6}},
		{Options{Where: []string{"tools_used>0", "tool_calls<=1"}}, []int64{0, 2, 3, 5, 7}},
		{Options{Where: []string{"cost>=0"}}, []int64{0, 5}}, // a null cost matches nothing
		{Options{Where: []string{"cost<1"}}, []int64{0, 5}},
		{Options{Where: []string{"reward>=0"}}, nil},
		{Options{Where: []string{"model=m-1", "prompt_index<5"}}, []int64{1, 3}},
		{Options{Where: []string{"api_calls=1", "sample=0"}}, []int64{1, 4, 6}},
		{Options{Where: []string{"tokens>=171"}}, []int64{5, 6, 7}},
	}
	for _, c := range cases {
		o := c.opts
		o.Format, o.FileFormat, o.To = FormatShareGPT, FileJSONL, filepath.Join(t.TempDir(), "out")
		man := run(t, o, src)
		got := map[int64]bool{}
		for _, l := range readLines(t, o.To, man.Splits["train"].Files) {
			if l != "" {
				pi, _ := schemas.JSONInt(member(l, schemas.MemberPromptIndex))
				got[pi] = true
			}
		}
		if !slices.Equal(slices.Sorted(maps.Keys(got)), c.prompts) {
			t.Errorf("%v reasoning=%v unknown=%v: prompts %v, want %v", c.opts.Where, c.opts.RequireReasoning, c.opts.DropUnknownTools, slices.Sorted(maps.Keys(got)), c.prompts)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	src := testFolder(t)
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{Where: []string{"colour=red"}}, `unknown field "colour"`},
		{Options{Where: []string{"tokens~3"}}, "no operator"},
		{Options{Where: []string{"outcome<completed"}}, "use = or !="},
		{Options{Where: []string{"tokens>many"}}, "is a number"},
		{Options{Where: []string{"has_reasoning=maybe"}}, "true or false"},
		{Options{Arguments: ArgumentsObject}, "--file-format jsonl"},
		{Options{Split: "train=0.5,test=0.2"}, "add up to 0.7"},
		{Options{Format: "alpaca"}, "--format"},
		{Options{Dedupe: "fuzzy"}, "--dedupe"},
	} {
		o := c.opts
		o.To = filepath.Join(t.TempDir(), "out")
		o.Sources = []Source{{Path: src, Dirs: []string{src}}}
		_, err := Run(context.Background(), o)
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want a usage error with %q", c.opts, err, c.want)
		}
		if _, err := os.Stat(o.To); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%+v: --to was created", c.opts)
		}
	}
}

func TestExistingTargetNeedsOverwrite(t *testing.T) {
	src := testFolder(t)
	to := filepath.Join(t.TempDir(), "out")
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, Options{To: to, Format: FormatShareGPT}, src) // an empty folder is fine
	_, err := Run(context.Background(), Options{To: to, Format: FormatShareGPT, Sources: []Source{{Path: src, Dirs: []string{src}}}})
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("second export: %v, want a usage error naming --overwrite", err)
	}
	if err := os.WriteFile(filepath.Join(to, "stale.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	man := run(t, Options{To: to, Format: FormatShareGPT, FileFormat: FileJSONL, Overwrite: true}, src)
	if _, err := os.Stat(filepath.Join(to, "stale.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("--overwrite kept a file of the old export")
	}
	if _, err := os.Stat(filepath.Join(to, man.Splits["train"].Files[0])); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Dir(to))
	if len(ents) != 1 {
		t.Fatalf("left beside the export: %v", ents)
	}
}

func TestDamagedShardRefused(t *testing.T) {
	for _, damage := range []string{"cut", "changed"} {
		t.Run(damage, func(t *testing.T) {
			src := testFolder(t)
			shard := filepath.Join(src, "data", "shard-00002.jsonl")
			b, err := os.ReadFile(shard)
			if err != nil {
				t.Fatal(err)
			}
			if damage == "cut" {
				b = b[:len(b)-10]
			} else {
				b[len(b)/2] ^= 1
			}
			if err := os.WriteFile(shard, b, 0o644); err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-time.Hour) // older than the ledger: cat would check its size only
			if err := os.Chtimes(shard, old, old); err != nil {
				t.Fatal(err)
			}
			to := filepath.Join(t.TempDir(), "out")
			_, err = Run(context.Background(), Options{To: to, Format: FormatShareGPT, Sources: []Source{{Path: src, Dirs: []string{src}}}})
			if err == nil || !strings.Contains(err.Error(), "data/shard-00002.jsonl") {
				t.Fatalf("export of a %s shard: %v, want an error naming it", damage, err)
			}
			ents, _ := os.ReadDir(filepath.Dir(to))
			if len(ents) != 0 {
				t.Fatalf("written although the source is damaged: %v", ents)
			}
		})
	}
}

func TestShardedAndMultipleSources(t *testing.T) {
	recs := testRecords(8, 3)
	var even, odd []*schemas.Record
	for _, r := range recs {
		if r.PromptIndex%2 == 0 {
			even = append(even, r)
		} else {
			odd = append(odd, r)
		}
	}
	base := t.TempDir()
	whole := writeFolder(t, filepath.Join(base, "whole"), "r", "", 5, testRecords(8, 3))
	a := writeFolder(t, filepath.Join(base, "a"), "r", pipeline.FormatParquet, 4, even)
	b := writeFolder(t, filepath.Join(base, "b"), "r", "", 3, odd)
	o1 := Options{To: filepath.Join(base, "x1"), Format: FormatShareGPT, FileFormat: FileJSONL, ShardRows: 10}
	m1 := run(t, o1, whole)
	o2 := o1
	o2.To = filepath.Join(base, "x2")
	o2.Sources = []Source{{Path: "sharded", Dirs: []string{a, b}}}
	m2, err := Run(context.Background(), o2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m1.Splits["train"].Files, m2.Splits["train"].Files) {
		t.Fatalf("files %v vs %v", m1.Splits, m2.Splits)
	}
	for _, f := range m1.Splits["train"].Files {
		x, _ := os.ReadFile(filepath.Join(o1.To, f))
		y, _ := os.ReadFile(filepath.Join(o2.To, f))
		if !bytes.Equal(x, y) {
			t.Fatalf("%s: a sharded run exports otherwise than the same records in one folder", f)
		}
	}
	// Two sources: the first's rows, then the second's, each with its run id.
	c := writeFolder(t, filepath.Join(base, "c"), "run-c", "", 5, testRecords(2, 1))
	o3 := Options{To: filepath.Join(base, "x3"), Format: FormatShareGPT, FileFormat: FileJSONL}
	m3 := run(t, o3, whole, c)
	lines := readLines(t, o3.To, m3.Splits["train"].Files)
	if len(lines) != 26 || member(lines[23], columnSource) != `"r"` || member(lines[24], columnSource) != `"run-c"` {
		t.Fatalf("%d rows; row 23 from %s, row 24 from %s", len(lines), member(lines[23], columnSource), member(lines[24], columnSource))
	}
	if len(m3.Sources) != 2 || m3.Sources[1].Records != 2 || m3.Sources[1].RunIDs[0] != "run-c" {
		t.Fatalf("sources %+v", m3.Sources)
	}
}

func TestShardRowsAndCard(t *testing.T) {
	src := testFolder(t)
	to := filepath.Join(t.TempDir(), "out")
	man := run(t, Options{To: to, Format: FormatShareGPT, ShardRows: 7, Split: "train=0.75,test=0.25", Seed: 1}, src)
	var total int64
	for _, sp := range []string{"train", "test"} {
		out := man.Splits[sp]
		n := int((out.Rows + 6) / 7)
		if len(out.Files) != n {
			t.Fatalf("%s: %d rows in %d files, want %d", sp, out.Rows, len(out.Files), n)
		}
		var rows int64
		for i, f := range out.Files {
			if want := fmt.Sprintf("data/%s-%05d-of-%05d.parquet", sp, i, n); f != want {
				t.Fatalf("file %s, want %s", f, want)
			}
			rs := readParquet[shareGPTRow](t, to, []string{f}, shareGPTConfig(), shareGPTSchema())
			if len(rs) > 7 {
				t.Fatalf("%s holds %d rows", f, len(rs))
			}
			rows += int64(len(rs))
		}
		if rows != out.Rows {
			t.Fatalf("%s: %d rows read, %d counted", sp, rows, out.Rows)
		}
		total += rows
	}
	if total != 24 {
		t.Fatalf("%d rows", total)
	}
	card, err := os.ReadFile(filepath.Join(to, CardFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"configs:\n- config_name: default\n  data_files:\n  - split: train\n    path: \"data/train-*\"\n  - split: test\n",
		"  - name: train\n    num_examples: " + fmt.Sprint(man.Splits["train"].Rows), "| terminal |", "run-a", "max_turns"} {
		if !strings.Contains(string(card), want) {
			t.Errorf("card lacks %q:\n%s", want, card)
		}
	}
	var back Manifest
	b, _ := os.ReadFile(filepath.Join(to, ManifestFile))
	if err := json.Unmarshal(b, &back); err != nil || back.Rows != 24 || back.Options.ShardRows != 7 || back.Sources[0].RunIDs[0] != "run-a" {
		t.Fatalf("export.json: %v %+v", err, back)
	}
}

// TestMessagesWriters holds the messages format's writers to the round
// trip whatever FromShareGPT gives: a row of the chat messages a record
// was made from, read back by `sharegpt`'s parser (JSONL, both forms of
// arguments) or from Parquet, gives the record's conversations.
func TestMessagesWriters(t *testing.T) {
	type chat struct {
		rec  *schemas.Record
		msgs []schemas.Message
	}
	var chats []chat
	for i := range 10 {
		rec, msgs := testChat(i, 1)
		chats = append(chats, chat{rec, msgs})
	}
	rowOf := func(c chat) *row {
		f := &facts{key: c.rec.Key, id: c.rec.ID, pi: int64(c.rec.PromptIndex), sample: int64(c.rec.Sample), outcome: string(c.rec.Outcome), model: c.rec.Model}
		return &row{f: f, source: "s", msgs: c.msgs, tools: testTools, toolsOK: true}
	}
	for _, args := range []string{ArgumentsString, ArgumentsObject} {
		var b bytes.Buffer
		w := &jsonlWriter{w: bufio.NewWriter(&b), opts: &Options{Format: FormatMessages, Arguments: args}}
		for _, c := range chats {
			if err := w.write(rowOf(c)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.close(); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		for i, l := range lines {
			turns, err := schemas.ConvertOpenAILine([]byte(l))
			if err != nil {
				t.Fatalf("%s: %v: %s", args, err, l)
			}
			if !reflect.DeepEqual(turns, chats[i].rec.Conversations) {
				t.Fatalf("%s: row %d gives\n%v\nwant\n%v", args, i, turns, chats[i].rec.Conversations)
			}
			calls := member(l, "messages")
			if args == ArgumentsObject && strings.Contains(calls, `"arguments":"`) || args == ArgumentsString && strings.Contains(calls, `"arguments":{`) {
				t.Fatalf("%s: arguments in the other form: %s", args, calls)
			}
		}
	}
	var b bytes.Buffer
	w := newParquetWriter(&b, FormatMessages)
	for _, c := range chats {
		if err := w.write(rowOf(c)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.parquet"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	rows := readParquet[messagesRow](t, dir, []string{"m.parquet"}, messagesConfig(), messagesSchema())
	if len(rows) != len(chats) {
		t.Fatalf("%d rows", len(rows))
	}
	for i, r := range rows {
		if got := schemas.ToShareGPT(messagesOf(r), toolsOf(r.Tools)); !reflect.DeepEqual(got, chats[i].rec.Conversations) {
			t.Fatalf("Parquet row %d gives\n%v\nwant\n%v", i, got, chats[i].rec.Conversations)
		}
		if r.Key != chats[i].rec.Key || r.Source != "s" || r.Reward != nil {
			t.Fatalf("row %d columns %+v", i, r)
		}
	}
}

// messagesOf and toolsOf read a Parquet row back into schemas' types.
func messagesOf(r messagesRow) []schemas.Message {
	var msgs []schemas.Message
	for _, m := range r.Messages {
		sm := schemas.Message{Role: m.Role, Content: m.Content}
		if m.ReasoningContent != nil {
			sm.Reasoning = *m.ReasoningContent
		}
		for _, tc := range m.ToolCalls {
			sm.ToolCalls = append(sm.ToolCalls, schemas.ToolCall{ID: tc.ID, Type: tc.Type, Function: schemas.FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		}
		if m.ToolCallID != nil {
			sm.ToolCallID = *m.ToolCallID
		}
		if m.Name != nil {
			sm.Name = *m.Name
		}
		msgs = append(msgs, sm)
	}
	return msgs
}

func toolsOf(ts []pqTool) []schemas.Tool {
	var tools []schemas.Tool
	for _, tl := range ts {
		tools = append(tools, schemas.Tool{Type: tl.Type, Function: schemas.FunctionSpec{Name: tl.Function.Name, Description: tl.Function.Description, Parameters: json.RawMessage(tl.Function.Parameters)}})
	}
	return tools
}

// TestMergedFolderExports: after a resume merged the folder's small shards
// (the ledger still names the removed ones, every row of theirs
// superseded), export reads it whole, as cat does.
func TestMergedFolderExports(t *testing.T) {
	src := testFolder(t)
	before := catLines(t, src)
	o, err := pipeline.OpenOutput(src, pipeline.OutputOptions{Mode: pipeline.ModeResume, Kind: "generate", MaxShardRows: 100})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pipeline.Run(context.Background(), pipeline.Options{Workers: 1}, pipeline.SliceSource(testRecords(8, 3)), []pipeline.Stage{keep{}}, o); err != nil {
		t.Fatal(err)
	}
	o.Close()
	if shards, _ := filepath.Glob(filepath.Join(src, "data", "shard-*")); len(shards) != 1 {
		t.Fatalf("data/ holds %v after the resume, want one merged shard", shards)
	}
	if got := catLines(t, src); !slices.Equal(got, before) {
		t.Fatal("cat changed by the merge")
	}
	to := filepath.Join(t.TempDir(), "out")
	man := run(t, Options{To: to, Format: FormatShareGPT, FileFormat: FileJSONL}, src)
	if got := len(readLines(t, to, man.Splits["train"].Files)); got != len(before) {
		t.Fatalf("export wrote %d rows, want %d", got, len(before))
	}
}

// TestRewardFromRecords: the reward column, --where reward and --best-of
// read the record's reward member: a graded record's number, null for an
// ungraded record and for one whose grader failed, in Parquet as in JSONL.
func TestRewardFromRecords(t *testing.T) {
	mk := func(s int, reward *float64) *schemas.Record {
		r := testRecord(1, s)
		r.Reward = reward
		if reward == nil && s == 3 {
			r.Grade = &schemas.Grade{Grader: "cmd", Error: "verify timed out"}
		}
		return r
	}
	num := func(f float64) *float64 { return &f }
	recs := []*schemas.Record{mk(0, num(0.25)), mk(1, num(1)), mk(2, nil), mk(3, nil), mk(4, num(0.5))}
	for _, format := range []string{pipeline.FormatJSONL, pipeline.FormatParquet} {
		src := writeFolder(t, filepath.Join(t.TempDir(), "run"), "r", format, 10, recs)
		for _, c := range []struct {
			opts Options
			want []string // sample: reward, in order
		}{
			{Options{}, []string{"0:0.25", "1:1", "2:null", "3:null", "4:0.5"}},
			{Options{BestOf: 1}, []string{"1:1"}},
			{Options{BestOf: 2}, []string{"1:1", "4:0.5"}},
			{Options{Where: []string{"reward>=0.5"}}, []string{"1:1", "4:0.5"}},
			{Options{Where: []string{"reward<0.5"}}, []string{"0:0.25"}},
		} {
			o := c.opts
			o.Format, o.FileFormat, o.To = FormatShareGPT, FileJSONL, filepath.Join(t.TempDir(), "out")
			man := run(t, o, src)
			var got []string
			for _, l := range readLines(t, o.To, man.Splits["train"].Files) {
				got = append(got, member(l, schemas.MemberSample)+":"+member(l, columnReward))
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("%s %+v: kept %v, want %v", format, c.opts, got, c.want)
			}
		}
		to := filepath.Join(t.TempDir(), "out")
		man := run(t, Options{Format: FormatShareGPT, FileFormat: FileParquet, To: to}, src)
		var got []string
		for _, r := range readParquet[shareGPTRow](t, to, man.Splits["train"].Files, shareGPTConfig(), shareGPTSchema()) {
			v := "null"
			if r.Reward != nil {
				v = fmt.Sprint(*r.Reward)
			}
			got = append(got, v)
		}
		if want := []string{"0.25", "1", "null", "null", "0.5"}; !slices.Equal(got, want) {
			t.Fatalf("%s: Parquet reward column %v, want %v", format, got, want)
		}
	}
}
