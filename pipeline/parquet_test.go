package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/parquet-go/parquet-go"
)

// richStage fills every record field with text that is hard to store:
// invalid UTF-8, escapes, HTML characters, CJK, emoji, NUL, empty and null
// values, and turns some records into verbatim (Raw) records with arbitrary
// fields, as compress writes them. Every fifth record fails retryably.
func richStage() *funcStage {
	return &funcStage{name: "rich", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		i := rec.PromptIndex
		complete(rec)
		texts := []string{
			"plain ascii",
			"line\nbreaks\r\n\ttabs \"quotes\" \\ back\\slash",
			"<tool_call>{\"name\":\"x\",\"arguments\":{\"a\":\"<b>&</b>\"}}</tool_call>",
			"中文 日本語 한국어 🚀 emoji \u2028 sep \u0000 nul",
			"bad utf8: \xff\xfe end \xe2\x82 cut",
			"",
		}
		rec.Conversations = []schemas.Turn{
			{From: "system", Value: texts[i%len(texts)]},
			{From: "human", Value: texts[(i+1)%len(texts)]},
			{From: "gpt", Value: texts[(i+2)%len(texts)] + strings.Repeat(" long text", i%50)},
			{From: "tool", Value: "<tool_response>\n" + texts[(i+3)%len(texts)] + "\n</tool_response>"},
		}
		rec.Usage = schemas.Usage{PromptTokens: int64(i) * 100, CompletionTokens: int64(i), TotalTokens: int64(i) * 101, CachedPromptTokens: int64(i) * 30, ReasoningTokens: int64(i % 4)}
		if i%3 != 0 { // priced; every third record has no price (cost_usd null)
			c := float64(i) * 1.25e-5
			rec.CostUSD = &c
		}
		rec.ToolsetsUsed = []string{"terminal", "web\xff"}
		rec.ToolStats = map[string]schemas.ToolStat{"terminal": {Count: i, Success: i / 2, Failure: i - i/2}}
		rec.ToolErrorCounts = map[string]int{"terminal": i - i/2}
		rec.ReasoningStats = schemas.ReasoningStats{TotalAssistantTurns: 2, TurnsWithReasoning: i % 3, TurnsWithoutReason: 2 - i%3, HasAnyReasoning: i%3 > 0}
		rec.Model = "model-x"
		rec.ID = fmt.Sprintf("id-%d", i)
		rec.Metadata = json.RawMessage("{\"source\": \"test\xff\",\n \"n\": [1, 2.5, null]}")
		rec.Extra = map[string]json.RawMessage{"compression_metrics": json.RawMessage(`{"ratio":0.5}`)}
		gradeRich(rec, i, texts)
		switch i % 7 {
		case 1:
			rec.Conversations = nil
			rec.ToolsetsUsed = nil
			rec.ToolStats = nil
			rec.Metadata = nil
			rec.Extra = nil
			rec.ID = ""
		case 2:
			rec.Conversations = []schemas.Turn{}
		case 3, 4:
			// A verbatim record keeps every input field in its order.
			rec.Raw = json.RawMessage(fmt.Sprintf(`{"zeta": {"deep": [1, {"x": "y"}]}, "conversations": [{"from": "human", "value": "raw \u00e9\ud83d\ude80 \ud800 lone %d"}, {"from": "gpt", "value": ["not", "a", "string"]}, {"value": "no from"}], "api_calls": %d, "completed": "yes", "usage": {"prompt_tokens": 5}, "duration_ms": 1e3, "metadata": null, "bad": "`+"\xff"+`", "reward": "high", "timings": 5, "grade": {"passed": "yes", "value": 1, "grader": 7, "output": "o\u00e9"}, "logprobs": [{"turn": 1, "tokens": [1, "x"], "logprobs": [-0.5, null], "token_ids": [3]}, 4, {"tokens": "t"}]}`, i, i))
			if i%7 == 4 {
				rec.Raw = json.RawMessage("{\n  \"conversations\": 3,\n  \"name\": \"" + rec.Key + "\"\n}")
			}
		}
		if i%5 == 0 {
			rec.Outcome, rec.Error = schemas.OutcomeAPIError, "HTTP 502 \xff"
		}
		return []*schemas.Record{rec}, nil
	}}
}

// gradeRich gives record i a grade, a reward, timings and logprobs of each
// kind: ungraded, passed, failed with a fraction, a grader that failed
// (reward null), and logprobs with and without token ids.
func gradeRich(rec *schemas.Record, i int, texts []string) {
	passed, failed := true, false
	switch i % 4 {
	case 1:
		r := 1.0
		rec.Reward = &r
		rec.Grade = &schemas.Grade{Grader: "cmd", Passed: &passed, Value: &r, Output: texts[i%len(texts)], DurationMS: int64(i)}
	case 2:
		r := 0.25
		rec.Reward = &r
		rec.Grade = &schemas.Grade{Grader: "number", Passed: &failed, Value: &r}
	case 3:
		rec.Grade = &schemas.Grade{Grader: "cmd", Error: "verify timed out after 5m \xff", DurationMS: 300000}
	}
	if i%2 == 1 {
		rec.Timings = &schemas.Timings{ModelMS: int64(i) * 10, ToolMS: int64(i), SandboxStartMS: 3, SandboxCloseMS: 1, QueueMS: int64(i % 5), GraderMS: int64(i % 3)}
	}
	if i%6 == 0 {
		rec.Logprobs = []schemas.TurnLogprobs{
			{Turn: 2, Tokens: []string{"a", "\"b\"\n", "中", texts[i%len(texts)]}, Logprobs: []float64{-0.125, -2.5, 0, -1e-9}, TokenIDs: []int64{1, 2, 3, 1 << 40}},
			{Turn: 4, Tokens: []string{}, Logprobs: []float64{}},
		}
	}
}

// runFormat runs n records through stage into a fresh folder of the given
// format and returns the folder.
func runFormat(t testing.TB, format string, n int, opts OutputOptions, stage Stage) string {
	t.Helper()
	dir := t.TempDir()
	opts.Format = format
	out, err := OpenOutput(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), Options{Workers: 4, Now: testNow}, SliceSource(records(n)), []Stage{stage}, out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// testNow is the fixed clock of records' metadata.timestamp in runs whose
// output tests compare byte for byte.
func testNow() time.Time { return time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC) }

func catString(t testing.TB, dir string, final bool) string {
	t.Helper()
	var b bytes.Buffer
	if err := CatWith(dir, &b, CatOptions{Final: final}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestParquetMatchesJSONL runs the same records into a JSONL and a Parquet
// folder: Cat, Stats and Verify must agree byte for byte, and the files must
// hold what an independent reader expects.
func TestParquetMatchesJSONL(t *testing.T) {
	const n = 120
	opts := testOutOpts(ModeFresh)
	opts.MaxShardRows = 13
	jdir := runFormat(t, FormatJSONL, n, opts, richStage())
	pdir := runFormat(t, FormatParquet, n, opts, richStage())

	for _, final := range []bool{false, true} {
		j, p := catString(t, jdir, final), catString(t, pdir, final)
		if j != p {
			t.Fatalf("cat (final=%v) differs:\njsonl:\n%.2000s\nparquet:\n%.2000s", final, j, p)
		}
		if i := strings.Index(j, string(schemas.OutcomeInternal)); i >= 0 {
			t.Fatalf("a test record did not encode:\n%.1000s", j[max(0, i-500):])
		}
		if !final && strings.Count(j, "\n") != n {
			t.Fatalf("cat shows %d records, want %d", strings.Count(j, "\n"), n)
		}
		if !strings.Contains(j, `\ufffd`) || !strings.Contains(j, "\uFFFD") {
			t.Fatalf("test data lost its invalid UTF-8: %v %v", strings.Contains(j, `\ufffd`), strings.Contains(j, "\uFFFD"))
		}
	}
	js, err := Stats(jdir)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := Stats(pdir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(js, ps) {
		t.Fatalf("stats differ:\n%+v\n%+v", js, ps)
	}
	jf, _ := os.ReadFile(filepath.Join(jdir, StatisticsFile))
	pf, _ := os.ReadFile(filepath.Join(pdir, StatisticsFile))
	if !bytes.Equal(jf, pf) {
		t.Fatalf("statistics.json differ")
	}
	jr, pr := mustVerify(t, jdir), mustVerify(t, pdir)
	if jr.Records != pr.Records || jr.LiveKeys != pr.LiveKeys {
		t.Fatalf("verify reports differ: %+v %+v", jr, pr)
	}
	shards, _ := filepath.Glob(filepath.Join(pdir, "*", "shard-*"+parquetExt))
	if len(shards) < 2 || pr.Shards != len(shards) {
		t.Fatalf("parquet shards %v, verify saw %d", shards, pr.Shards)
	}
	checkParquetIndependently(t, pdir, catString(t, jdir, false))
}

// TestParquetSmallRowGroupsAfterResume makes every shard hold many row
// groups and resumes a run whose first pass failed a quarter of the records,
// so Cat reads rows from several shards and groups in alternation: the
// output must equal the JSONL run's.
func TestParquetSmallRowGroupsAfterResume(t *testing.T) {
	old := parquetRowGroupBytes
	parquetRowGroupBytes = 600
	t.Cleanup(func() { parquetRowGroupBytes = old })
	const n = 300
	var cats []string
	for _, format := range []string{FormatJSONL, FormatParquet} {
		opts := testOutOpts(ModeFresh)
		opts.MaxShardRows = 50
		dir := runFormat(t, format, n, opts, flakyStage())
		opts.Mode = ModeResume
		opts.Format = format
		out, err := OpenOutput(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Run(context.Background(), Options{Workers: 4, Now: testNow}, SliceSource(records(n)), []Stage{completeStage()}, out); err != nil {
			t.Fatal(err)
		}
		out.Close()
		checkWhole(t, dir, n)
		cats = append(cats, catString(t, dir, false))
		if format == FormatParquet {
			shards, _ := filepath.Glob(filepath.Join(dir, DataDir, "shard-*"+parquetExt))
			f, err := os.Open(shards[0])
			if err != nil {
				t.Fatal(err)
			}
			fi, _ := f.Stat()
			pf, err := parquet.OpenFile(f, fi.Size())
			if err != nil {
				t.Fatal(err)
			}
			if g := len(pf.RowGroups()); g < 5 {
				t.Fatalf("%s has %d row groups, want several", shards[0], g)
			}
			f.Close()
		}
	}
	if cats[0] != cats[1] {
		t.Fatal("cat of the Parquet folder differs from the JSONL folder")
	}
}

// readBack is the record as a reader that knows only the documented column
// names sees it; parquet-go maps the file's columns onto it by name.
type readBack struct {
	Key           string `parquet:"key"`
	PromptIndex   int64  `parquet:"prompt_index"`
	Sample        int64  `parquet:"sample"`
	Outcome       string `parquet:"outcome"`
	Success       *bool  `parquet:"success,optional"`
	Conversations []struct {
		From  string `parquet:"from"`
		Value string `parquet:"value"`
	} `parquet:"conversations,list,optional"`
	APICalls *int64 `parquet:"api_calls,optional"`
	Usage    *struct {
		PromptTokens int64 `parquet:"prompt_tokens"`
	} `parquet:"usage,optional"`
	ToolsetsUsed   []string `parquet:"toolsets_used,list,optional"`
	ReasoningStats *struct {
		TurnsWithReasoning int64 `parquet:"turns_with_reasoning"`
		HasAnyReasoning    bool  `parquet:"has_any_reasoning"`
	} `parquet:"reasoning_stats,optional"`
	ToolStats *string  `parquet:"tool_stats,optional"`
	Metadata  *string  `parquet:"metadata,optional"`
	Error     *string  `parquet:"error,optional"`
	Reward    *float64 `parquet:"reward,optional"`
	Timings   *struct {
		ModelMS  int64 `parquet:"model_ms"`
		GraderMS int64 `parquet:"grader_ms"`
	} `parquet:"timings,optional"`
	Grade *struct {
		Grader     string   `parquet:"grader"`
		Passed     *bool    `parquet:"passed,optional"`
		Value      *float64 `parquet:"value,optional"`
		Output     string   `parquet:"output"`
		DurationMS int64    `parquet:"duration_ms"`
		Error      string   `parquet:"error"`
	} `parquet:"grade,optional"`
	Logprobs []struct {
		Turn     int64     `parquet:"turn"`
		Tokens   []string  `parquet:"tokens,list,optional"`
		Logprobs []float64 `parquet:"logprobs,list,optional"`
		TokenIDs []int64   `parquet:"token_ids,list,optional"`
	} `parquet:"logprobs,list,optional"`
	RawJSON string `parquet:"raw_json"`
}

// checkParquetIndependently reads every shard of pdir with parquet-go's
// generic reader into readBack and compares each row with the JSONL line of
// the same key in jsonlCat, decoded by encoding/json.
func checkParquetIndependently(t *testing.T, pdir, jsonlCat string) {
	t.Helper()
	byKey := map[string]map[string]any{}
	lines := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(jsonlCat, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		k, _ := m["key"].(string)
		if k == "" {
			// A verbatim record without a key: find it by its raw line.
			k = line
		}
		byKey[k], lines[k] = m, line
	}
	shards, _ := filepath.Glob(filepath.Join(pdir, "*", "shard-*"+parquetExt))
	rows := 0
	for _, shard := range shards {
		f, err := os.Open(shard)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := f.Stat()
		pf, err := parquet.OpenFile(f, fi.Size())
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := pf.Lookup(parquetSchemaKey); v != parquetSchemaVersion {
			t.Fatalf("%s: schema version %q", shard, v)
		}
		// raw_json, the copy hermes-pipe reads, is snappy; the typed columns
		// external readers use are zstd.
		for _, col := range pf.Metadata().RowGroups[0].Columns {
			want := "ZSTD"
			if slices.Equal(col.MetaData.PathInSchema, []string{parquetLineColumn}) {
				want = "SNAPPY"
			}
			if c := col.MetaData.Codec.String(); c != want {
				t.Fatalf("%s: column %v compressed with %s, want %s", shard, col.MetaData.PathInSchema, c, want)
			}
		}
		got, err := parquet.Read[readBack](f, fi.Size())
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", shard, err)
		}
		for _, r := range got {
			rows++
			k := r.Key
			if _, ok := byKey[k]; !ok {
				k = r.RawJSON
			}
			m, ok := byKey[k]
			if !ok {
				t.Fatalf("%s: row %s is not in the JSONL output", shard, r.Key)
			}
			if r.RawJSON != lines[k] {
				t.Fatalf("%s: raw_json of %s differs from the JSONL line", shard, r.Key)
			}
			convs, _ := m["conversations"].([]any)
			if _, isList := m["conversations"].([]any); !isList {
				if r.Conversations != nil {
					t.Fatalf("%s: conversations of %s should be null, got %v", shard, r.Key, r.Conversations)
				}
			} else if len(convs) != len(r.Conversations) {
				t.Fatalf("%s: %s has %d turns, JSONL %d", shard, r.Key, len(r.Conversations), len(convs))
			}
			for i, c := range convs {
				turn := c.(map[string]any)
				want := func(v any) string {
					if s, ok := v.(string); ok {
						return s
					}
					if v == nil {
						return ""
					}
					b, _ := json.Marshal(v)
					return string(b)
				}
				if r.Conversations[i].From != want(turn["from"]) || (isString(turn["value"]) && r.Conversations[i].Value != turn["value"]) {
					t.Fatalf("%s: %s turn %d = %+v, JSONL %v", shard, r.Key, i, r.Conversations[i], turn)
				}
			}
			if s, ok := m["success"].(bool); ok != (r.Success != nil) || ok && *r.Success != s {
				t.Fatalf("%s: %s success %v, JSONL %v", shard, r.Key, r.Success, m["success"])
			}
			if api, ok := m["api_calls"].(float64); ok != (r.APICalls != nil) || ok && float64(*r.APICalls) != api {
				t.Fatalf("%s: %s api_calls %v, JSONL %v", shard, r.Key, r.APICalls, m["api_calls"])
			}
			if e, ok := m["error"].(string); ok != (r.Error != nil) || ok && *r.Error != e {
				t.Fatalf("%s: %s error %v, JSONL %q", shard, r.Key, r.Error, e)
			}
			if u, ok := m["usage"].(map[string]any); ok {
				if r.Usage == nil || float64(r.Usage.PromptTokens) != u["prompt_tokens"] {
					t.Fatalf("%s: %s usage %+v, JSONL %v", shard, r.Key, r.Usage, u)
				}
			}
			if tools, ok := m["toolsets_used"].([]any); !ok {
				if r.ToolsetsUsed != nil {
					t.Fatalf("%s: toolsets_used of %s should be null, got %q", shard, r.Key, r.ToolsetsUsed)
				}
			} else if fmt.Sprint(tools) != fmt.Sprint(r.ToolsetsUsed) {
				t.Fatalf("%s: %s toolsets_used %q, JSONL %v", shard, r.Key, r.ToolsetsUsed, tools)
			}
			if rs, ok := m["reasoning_stats"].(map[string]any); !ok {
				if r.ReasoningStats != nil {
					t.Fatalf("%s: reasoning_stats of %s should be null, got %+v", shard, r.Key, *r.ReasoningStats)
				}
			} else if r.ReasoningStats == nil || float64(r.ReasoningStats.TurnsWithReasoning) != rs["turns_with_reasoning"] ||
				r.ReasoningStats.HasAnyReasoning != (rs["has_any_reasoning"] == true) {
				t.Fatalf("%s: %s reasoning_stats %+v, JSONL %v", shard, r.Key, r.ReasoningStats, rs)
			}
			checkGradedColumns(t, shard, &r, m)
			for name, col := range map[string]*string{"tool_stats": r.ToolStats, "metadata": r.Metadata} {
				v, present := m[name]
				if present && v != nil {
					var got any
					if col == nil || json.Unmarshal([]byte(*col), &got) != nil || !reflect.DeepEqual(got, v) {
						t.Fatalf("%s: %s %s = %v, JSONL %v", shard, r.Key, name, col, v)
					}
				} else if col != nil {
					t.Fatalf("%s: %s %s should be null, got %s", shard, r.Key, name, *col)
				}
			}
		}
	}
	if rows != len(byKey) {
		t.Fatalf("parquet holds %d rows, JSONL %d", rows, len(byKey))
	}
}

func isString(v any) bool { _, ok := v.(string); return ok }

// checkGradedColumns compares the reward, timings, grade and logprobs
// columns of r with the record m as encoding/json decoded its line.
func checkGradedColumns(t *testing.T, shard string, r *readBack, m map[string]any) {
	t.Helper()
	num := func(v any) (float64, bool) { f, ok := v.(float64); return f, ok }
	if w, ok := num(m["reward"]); ok != (r.Reward != nil) || ok && *r.Reward != w {
		t.Fatalf("%s: %s reward %v, JSONL %v", shard, r.Key, r.Reward, m["reward"])
	}
	if tm, ok := m["timings"].(map[string]any); ok != (r.Timings != nil) || ok && (float64(r.Timings.ModelMS) != tm["model_ms"] || float64(r.Timings.GraderMS) != tm["grader_ms"]) {
		t.Fatalf("%s: %s timings %+v, JSONL %v", shard, r.Key, r.Timings, m["timings"])
	}
	g, ok := m["grade"].(map[string]any)
	if ok != (r.Grade != nil) {
		t.Fatalf("%s: %s grade %+v, JSONL %v", shard, r.Key, r.Grade, m["grade"])
	}
	if ok {
		text := func(v any) string {
			if s, ok := v.(string); ok || v == nil {
				return s
			}
			b, _ := json.Marshal(v)
			return string(b)
		}
		p, pok := g["passed"].(bool)
		v, vok := num(g["value"])
		if r.Grade.Grader != text(g["grader"]) || r.Grade.Output != text(g["output"]) || r.Grade.Error != text(g["error"]) ||
			pok != (r.Grade.Passed != nil) || pok && *r.Grade.Passed != p || vok != (r.Grade.Value != nil) || vok && *r.Grade.Value != v {
			t.Fatalf("%s: %s grade %+v, JSONL %v", shard, r.Key, *r.Grade, g)
		}
	}
	lps, ok := m["logprobs"].([]any)
	if ok != (r.Logprobs != nil) || len(lps) != len(r.Logprobs) {
		t.Fatalf("%s: %s logprobs %+v, JSONL %v", shard, r.Key, r.Logprobs, m["logprobs"])
	}
	for i, el := range lps {
		got := r.Logprobs[i]
		e, _ := el.(map[string]any)
		var want []float64 // the numbers, nil when one is not a number
		if l, ok := e["logprobs"].([]any); ok {
			want = []float64{}
			for _, v := range l {
				f, ok := num(v)
				if !ok {
					want = nil
					break
				}
				want = append(want, f)
			}
		}
		toks, tok := e["tokens"].([]any)
		if fmt.Sprint(want) != fmt.Sprint(got.Logprobs) || (want == nil) != (got.Logprobs == nil) || tok != (got.Tokens != nil) || len(toks) != len(got.Tokens) {
			t.Fatalf("%s: %s logprobs[%d] %+v, JSONL %v", shard, r.Key, i, got, el)
		}
	}
}

// TestParquetSchema pins the file schema external readers rely on.
func TestParquetSchema(t *testing.T) {
	got := parquetSchema().String()
	for _, want := range []string{
		"optional group conversations (LIST) {\n\t\trepeated group list {\n\t\t\trequired group element {\n\t\t\t\trequired binary from (STRING);\n\t\t\t\trequired binary value (STRING);",
		"required binary raw_json (STRING);",
		"optional group usage {",
		"optional double cost_usd;",
		"optional binary tool_stats (STRING);",
		"required binary outcome (STRING);\n\toptional boolean success;",
		"optional double reward;",
		"optional group grade {",
		"optional group logprobs (LIST) {",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("schema lacks %q:\n%s", want, got)
		}
	}
}

// parquetRecordV1 and the types below are the row types of schema version 1
// with their column names written out: the names parquet.go derives from
// schemas' tags must give the same schema (parquetSchemas[0]), so shards
// written before and after read the same. parquetRecordV2 is version 2,
// which added success, and parquetRecordV3 version 3, which added timings,
// reward, grade and logprobs.
type parquetRecordV3 struct {
	Key             string              `parquet:"key"`
	ID              *string             `parquet:"id,optional"`
	PromptIndex     int64               `parquet:"prompt_index"`
	Sample          int64               `parquet:"sample"`
	Conversations   []parquetTurnV1     `parquet:"conversations,list,optional"`
	Outcome         string              `parquet:"outcome,dict"`
	Success         *bool               `parquet:"success,optional"`
	Completed       *bool               `parquet:"completed,optional"`
	Partial         *bool               `parquet:"partial,optional"`
	APICalls        *int64              `parquet:"api_calls,optional"`
	Usage           *parquetUsageV1     `parquet:"usage,optional"`
	CostUSD         *float64            `parquet:"cost_usd,optional"`
	ToolsetsUsed    []string            `parquet:"toolsets_used,list,optional"`
	ToolStats       *string             `parquet:"tool_stats,optional"`
	ToolErrorCounts *string             `parquet:"tool_error_counts,optional"`
	ReasoningStats  *parquetReasoningV1 `parquet:"reasoning_stats,optional"`
	Model           *string             `parquet:"model,optional,dict"`
	DurationMS      *int64              `parquet:"duration_ms,optional"`
	Timings         *parquetTimingsV3   `parquet:"timings,optional"`
	Reward          *float64            `parquet:"reward,optional"`
	Grade           *parquetGradeV3     `parquet:"grade,optional"`
	Error           *string             `parquet:"error,optional"`
	Metadata        *string             `parquet:"metadata,optional"`
	Extra           *string             `parquet:"extra,optional"`
	Logprobs        []parquetLogprobsV3 `parquet:"logprobs,list,optional"`
	RawJSON         string              `parquet:"raw_json"`
}
type parquetTimingsV3 struct {
	ModelMS        int64 `parquet:"model_ms"`
	ToolMS         int64 `parquet:"tool_ms"`
	SandboxStartMS int64 `parquet:"sandbox_start_ms"`
	SandboxCloseMS int64 `parquet:"sandbox_close_ms"`
	QueueMS        int64 `parquet:"queue_ms"`
	GraderMS       int64 `parquet:"grader_ms"`
}
type parquetGradeV3 struct {
	Grader     string   `parquet:"grader,dict"`
	Passed     *bool    `parquet:"passed,optional"`
	Value      *float64 `parquet:"value,optional"`
	Output     string   `parquet:"output"`
	DurationMS int64    `parquet:"duration_ms"`
	Error      string   `parquet:"error"`
}
type parquetLogprobsV3 struct {
	Turn     int64     `parquet:"turn"`
	Tokens   []string  `parquet:"tokens,list,optional"`
	Logprobs []float64 `parquet:"logprobs,list,optional"`
	TokenIDs []int64   `parquet:"token_ids,list,optional"`
}

type parquetRecordV2 struct {
	Key             string              `parquet:"key"`
	ID              *string             `parquet:"id,optional"`
	PromptIndex     int64               `parquet:"prompt_index"`
	Sample          int64               `parquet:"sample"`
	Conversations   []parquetTurnV1     `parquet:"conversations,list,optional"`
	Outcome         string              `parquet:"outcome,dict"`
	Success         *bool               `parquet:"success,optional"`
	Completed       *bool               `parquet:"completed,optional"`
	Partial         *bool               `parquet:"partial,optional"`
	APICalls        *int64              `parquet:"api_calls,optional"`
	Usage           *parquetUsageV1     `parquet:"usage,optional"`
	CostUSD         *float64            `parquet:"cost_usd,optional"`
	ToolsetsUsed    []string            `parquet:"toolsets_used,list,optional"`
	ToolStats       *string             `parquet:"tool_stats,optional"`
	ToolErrorCounts *string             `parquet:"tool_error_counts,optional"`
	ReasoningStats  *parquetReasoningV1 `parquet:"reasoning_stats,optional"`
	Model           *string             `parquet:"model,optional,dict"`
	DurationMS      *int64              `parquet:"duration_ms,optional"`
	Error           *string             `parquet:"error,optional"`
	Metadata        *string             `parquet:"metadata,optional"`
	Extra           *string             `parquet:"extra,optional"`
	RawJSON         string              `parquet:"raw_json"`
}

type parquetRecordV1 struct {
	Key             string              `parquet:"key"`
	ID              *string             `parquet:"id,optional"`
	PromptIndex     int64               `parquet:"prompt_index"`
	Sample          int64               `parquet:"sample"`
	Conversations   []parquetTurnV1     `parquet:"conversations,list,optional"`
	Outcome         string              `parquet:"outcome,dict"`
	Completed       *bool               `parquet:"completed,optional"`
	Partial         *bool               `parquet:"partial,optional"`
	APICalls        *int64              `parquet:"api_calls,optional"`
	Usage           *parquetUsageV1     `parquet:"usage,optional"`
	CostUSD         *float64            `parquet:"cost_usd,optional"`
	ToolsetsUsed    []string            `parquet:"toolsets_used,list,optional"`
	ToolStats       *string             `parquet:"tool_stats,optional"`
	ToolErrorCounts *string             `parquet:"tool_error_counts,optional"`
	ReasoningStats  *parquetReasoningV1 `parquet:"reasoning_stats,optional"`
	Model           *string             `parquet:"model,optional,dict"`
	DurationMS      *int64              `parquet:"duration_ms,optional"`
	Error           *string             `parquet:"error,optional"`
	Metadata        *string             `parquet:"metadata,optional"`
	Extra           *string             `parquet:"extra,optional"`
	RawJSON         string              `parquet:"raw_json"`
}
type parquetTurnV1 struct {
	From  string `parquet:"from,dict"`
	Value string `parquet:"value"`
}
type parquetUsageV1 struct {
	PromptTokens       int64 `parquet:"prompt_tokens"`
	CompletionTokens   int64 `parquet:"completion_tokens"`
	TotalTokens        int64 `parquet:"total_tokens"`
	CachedPromptTokens int64 `parquet:"cached_prompt_tokens"`
	ReasoningTokens    int64 `parquet:"reasoning_tokens"`
}
type parquetReasoningV1 struct {
	TotalAssistantTurns   int64 `parquet:"total_assistant_turns"`
	TurnsWithReasoning    int64 `parquet:"turns_with_reasoning"`
	TurnsWithoutReasoning int64 `parquet:"turns_without_reasoning"`
	HasAnyReasoning       bool  `parquet:"has_any_reasoning"`
}

func TestParquetSchemaDerived(t *testing.T) {
	versions := []*parquet.Schema{parquet.SchemaOf(new(parquetRecordV1)), parquet.SchemaOf(new(parquetRecordV2)), parquet.SchemaOf(new(parquetRecordV3))}
	if len(parquetSchemas()) != len(versions) || parquetSchemaVersion != fmt.Sprint(len(versions)) {
		t.Fatalf("%d schema versions read, version %s written; the test knows %d", len(parquetSchemas()), parquetSchemaVersion, len(versions))
	}
	for i, want := range versions {
		if !parquet.EqualNodes(parquetSchemas()[i], want) {
			t.Fatalf("schema version %d\n%s\nwant\n%s", i+1, parquetSchemas()[i], want)
		}
	}
	want := versions[len(versions)-1]
	if parquetSchemas()[len(parquetSchemas())-1] != parquetSchema() {
		t.Fatal("the last schema read is not the schema written")
	}
	if got, want := parquetSchema().String(), strings.Replace(want.String(), "parquetRecordV3", "parquetRecord", 1); got != want {
		t.Fatalf("schema\n%s\nwant\n%s", got, want)
	}
	if got := parquetSchema().Name(); got != "parquetRecord" {
		t.Fatalf("schema name %q", got)
	}
}

func TestEncodeRecordValidUTF8(t *testing.T) {
	rec := &schemas.Record{Key: "k", Conversations: []schemas.Turn{{From: "gpt", Value: "a\xffb"}}, Metadata: json.RawMessage("{\"m\":\"x\xe2\x82\"}")}
	line, err := EncodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(line), `"value":"a\ufffdb"`) || !strings.Contains(string(line), "\"metadata\":{\"m\":\"x\uFFFD\uFFFD\"}") {
		t.Fatalf("line %s", line)
	}
	rec = &schemas.Record{Key: "k", Raw: json.RawMessage("{\"a\":\"\xff\"}")}
	if line, _ := EncodeRecord(rec); string(line) != "{\"a\":\"\uFFFD\"}" {
		t.Fatalf("raw line %q", line)
	}
	rec.Raw = json.RawMessage(`{"a":"é"}`)
	if line, _ := EncodeRecord(rec); string(line) != `{"a":"é"}` {
		t.Fatalf("valid raw line changed: %q", line)
	}
}

// TestParquetVerifyCatchesCorruption checks that Verify reads Parquet
// shards: a flipped byte, a truncated file and a ledger that disagrees with
// the rows are reported.
func TestParquetVerifyCatchesCorruption(t *testing.T) {
	opts := testOutOpts(ModeFresh)
	dir := runFormat(t, FormatParquet, 30, opts, completeStage())
	mustVerify(t, dir)
	shards, _ := filepath.Glob(filepath.Join(dir, DataDir, "shard-*"+parquetExt))
	if len(shards) < 2 {
		t.Fatalf("shards %v", shards)
	}

	c1 := t.TempDir()
	copyDir(t, dir, c1)
	p := filepath.Join(c1, DataDir, filepath.Base(shards[0]))
	data, _ := os.ReadFile(p)
	os.WriteFile(p, data[:len(data)-10], 0o644)
	rep, _ := Verify(c1)
	if !problemsContain(rep, filepath.Base(shards[0]), "not a whole parquet file") || !problemsContain(rep, filepath.Base(shards[0]), "size") {
		t.Fatalf("truncation: %v", rep.Problems)
	}
	if err := Cat(c1, io.Discard); err == nil {
		t.Fatal("cat read a truncated shard")
	}

	// A ledger naming the rows in another order: keys disagree.
	c2 := t.TempDir()
	copyDir(t, dir, c2)
	ledger := filepath.Join(c2, LedgerFile)
	lb, _ := os.ReadFile(ledger)
	var l ledgerLine
	first, rest, _ := strings.Cut(string(lb), "\n")
	if err := parseLedgerLine(first, &l); err != nil {
		t.Fatal(err)
	}
	l.Rows[0], l.Rows[1] = l.Rows[1], l.Rows[0]
	os.WriteFile(ledger, append(appendLedgerLine(nil, &l), rest...), 0o644)
	rep, _ = Verify(c2)
	if !problemsContain(rep, "shard-00001", "ledger line 1 says") {
		t.Fatalf("swapped rows: %v", rep.Problems)
	}
}

// TestParquetOrphanAdopted drops the last ledger line of a Parquet run: the
// shard must be adopted with the same ledger line; a torn shard is removed.
func TestParquetOrphanAdopted(t *testing.T) {
	opts := testOutOpts(ModeResume)
	opts.Format = FormatParquet
	dir := runFormat(t, FormatParquet, 10, opts, completeStage())
	ledger := filepath.Join(dir, LedgerFile)
	data, _ := os.ReadFile(ledger)
	lines := strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
	last := lines[len(lines)-1]
	os.WriteFile(ledger, []byte(strings.Join(lines[:len(lines)-1], "")), 0o644)
	var l1 ledgerLine
	if err := parseLedgerLine(strings.TrimSpace(last), &l1); err != nil {
		t.Fatal(err)
	}
	whole, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(l1.Shard)))
	bad := filepath.Join(dir, DataDir, "shard-00050"+parquetExt)
	os.WriteFile(bad, whole[:len(whole)/2], 0o644)

	out, err := OpenOutput(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if out.adopted != 1 {
		t.Fatalf("adopted %d", out.adopted)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Fatalf("torn orphan kept: %v", err)
	}
	now, _ := os.ReadFile(ledger)
	nowLines := strings.Split(strings.TrimSpace(string(now)), "\n")
	var l2 ledgerLine
	if err := parseLedgerLine(nowLines[len(nowLines)-1], &l2); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(l1, l2) {
		t.Fatalf("adopted entry differs from the lost one:\n%+v\n%+v", l2, l1)
	}
	out.Close()
	checkWhole(t, dir, 10)
}

// TestParquetCrashAndKill9 runs the crash-at-every-commit-step and kill -9
// tests with Parquet shards.
func TestParquetCrashAndKill9(t *testing.T) {
	old := testFormat
	testFormat = FormatParquet
	t.Cleanup(func() { testFormat = old })
	t.Run("commit-steps", TestCrashAtEveryCommitStep)
	t.Run("commit-failure", TestCommitFailureIsFatalAndCleansUp)
	t.Run("kill9", TestKill9Resume)
}

// TestParquetDuckDB reads the Parquet shards of a run with DuckDB (npm
// @duckdb/node-api, through scripts/parquet-check.mjs) and compares every row
// with the JSONL output of the same records. It skips when node or the
// package is absent; under CI (CI set) either one missing fails the test
// (install node and run npm ci --prefix scripts).
func TestParquetDuckDB(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node is not installed; CI requires the DuckDB cross-check (apt-get install nodejs npm): %v", err)
		}
		t.Skip("node not installed")
	}
	_, file, _, _ := runtime.Caller(0)
	scripts := filepath.Join(filepath.Dir(file), "..", "scripts")
	if _, err := os.Stat(filepath.Join(scripts, "node_modules", "@duckdb", "node-api", "package.json")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("@duckdb/node-api is not installed (run npm ci --prefix scripts): %v", err)
		}
		t.Skip("@duckdb/node-api not installed: npm ci --prefix scripts")
	}
	// Row groups of a few records: the writer builds several of a shard at
	// once (parquetGroupsInFlight), and DuckDB must read them in order.
	old := parquetRowGroupBytes
	parquetRowGroupBytes = 2000
	t.Cleanup(func() { parquetRowGroupBytes = old })
	const n = 300
	opts := testOutOpts(ModeFresh)
	opts.MaxShardRows = 40
	jdir := runFormat(t, FormatJSONL, n, opts, richStage())
	pdir := runFormat(t, FormatParquet, n, opts, richStage())
	jsonl := filepath.Join(t.TempDir(), "all.jsonl")
	if err := os.WriteFile(jsonl, []byte(catString(t, jdir, false)), 0o644); err != nil {
		t.Fatal(err)
	}
	shards, _ := filepath.Glob(filepath.Join(pdir, "*", "shard-*"+parquetExt))
	type result struct {
		Rows     int      `json:"rows"`
		Compared int      `json:"compared"`
		Problems []string `json:"problems"`
	}
	check := func(jsonl string) (result, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(scripts, "parquet-check.mjs"), "--jsonl", jsonl}, shards...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.Output()
		var res result
		if jerr := json.Unmarshal(stdout, &res); jerr != nil {
			t.Fatalf("parquet-check: %v; output %q: %v\n%s", err, stdout, jerr, stderr.String())
		}
		return res, err
	}
	res, err := check(jsonl)
	if err != nil || res.Rows != n || res.Compared != n || len(res.Problems) > 0 {
		t.Fatalf("parquet-check: %v: %d rows, %d compared, problems:\n%s", err, res.Rows, res.Compared, strings.Join(res.Problems, "\n"))
	}
	// The check must be able to fail: one changed string is reported.
	data, _ := os.ReadFile(jsonl)
	changed := filepath.Join(t.TempDir(), "changed.jsonl")
	os.WriteFile(changed, bytes.Replace(data, []byte("plain ascii"), []byte("plain ASCII"), 1), 0o644)
	if res, err := check(changed); err == nil || len(res.Problems) < 2 || !strings.Contains(strings.Join(res.Problems, "\n"), "turn 0") {
		t.Fatalf("parquet-check missed a changed string: %v %v", err, res.Problems)
	}
}

// benchRecords returns n finished records of realistic agent text (about
// 12 KB each: prose, code, tool calls, some CJK) with their JSONL lines.
func benchRecords(b *testing.B, n int) ([]*schemas.Record, [][]byte, int64) {
	rng := rand.New(rand.NewPCG(3, 4))
	words := strings.Fields("the of and to in a is that for it as was with be by on not he I this are or his from at which but have an they you were her she there been one all we their if has will so no would " +
		"func return err nil := if for range package import struct string int fmt.Println defer go chan select case default 中文 日本語 数据 模型")
	text := func(nbytes int) string {
		var sb strings.Builder
		for sb.Len() < nbytes {
			sb.WriteString(words[rng.IntN(len(words))])
			if rng.IntN(12) == 0 {
				sb.WriteString("\n")
			} else {
				sb.WriteByte(' ')
			}
		}
		return sb.String()
	}
	recs := make([]*schemas.Record, n)
	lines := make([][]byte, n)
	var total int64
	for i := range recs {
		rec := &schemas.Record{Key: fmt.Sprintf("row:%d:%012x#0", i, i*7919), PromptIndex: i}
		complete(rec)
		rec.Conversations = []schemas.Turn{{From: "system", Value: text(1500)}, {From: "human", Value: text(500)}}
		for range 4 {
			rec.Conversations = append(rec.Conversations,
				schemas.Turn{From: "gpt", Value: "<think>\n" + text(600) + "\n</think>\n<tool_call>\n{\"name\": \"terminal\", \"arguments\": {\"command\": \"ls -la\"}}\n</tool_call>"},
				schemas.Turn{From: "tool", Value: "<tool_response>\n" + text(1800) + "\n</tool_response>"})
		}
		rec.ToolStats = map[string]schemas.ToolStat{"terminal": {Count: 4, Success: 4}}
		rec.ToolErrorCounts = map[string]int{"terminal": 0}
		rec.ToolsetsUsed = []string{"terminal"}
		line, err := EncodeRecord(rec)
		if err != nil {
			b.Fatal(err)
		}
		recs[i], lines[i] = rec, line
		total += int64(len(line))
	}
	return recs, lines, total
}

// BenchmarkParquetWrite measures the Parquet shard writer alone (rows built
// from the JSONL lines, compression, footer) on one shard of 2000 agent
// trajectories (26 MB of lines: three full row groups and a partial one);
// MB/s counts JSON text in. MB/cpu-s is the same text over the process's CPU
// time (user and system), the figure that holds on a shared machine; run
// with -cpu 1 for one core.
func BenchmarkParquetWrite(b *testing.B) {
	recs, lines, total := benchRecords(b, 2000)
	b.SetBytes(total)
	b.ResetTimer()
	cpu0 := cpuTime()
	var size int64
	for range b.N {
		cw := &countWriter{w: io.Discard}
		w := newParquetWriter(cw)
		for i, rec := range recs {
			if _, err := w.WriteRecord(rec, lines[i]); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		size = cw.n
	}
	b.ReportMetric(float64(size)/float64(total), "size-ratio")
	b.ReportMetric(float64(total)*float64(b.N)/1e6/(cpuTime()-cpu0).Seconds(), "MB/cpu-s")
}

// BenchmarkParquetCat measures Cat on a Parquet folder (rows in ledger
// order); MB/s counts JSON text out.
func BenchmarkParquetCat(b *testing.B) {
	recs, lines, total := benchRecords(b, 2000)
	dir := b.TempDir()
	out, err := OpenOutput(dir, OutputOptions{Kind: "bench", Format: FormatParquet})
	if err != nil {
		b.Fatal(err)
	}
	var rows []pending
	for i, rec := range recs {
		rows = append(rows, pending{key: rec.Key, outcome: rec.Outcome, pi: int64(i), rec: rec, line: lines[i]})
	}
	if err := out.commit(&batch{sub: DataDir, rows: rows}); err != nil {
		b.Fatal(err)
	}
	out.Close()
	b.SetBytes(total)
	b.ResetTimer()
	for range b.N {
		w := bufio.NewWriter(io.Discard)
		if err := Cat(dir, w); err != nil {
			b.Fatal(err)
		}
	}
}
