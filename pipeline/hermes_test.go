package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/parquet-go/parquet-go"
)

// TestRunFillsSuccessAndHermesMetadata: every finished record of plain
// fields carries Hermes' success (its outcome is OK) and metadata's
// batch_num, timestamp and model before the row's own metadata, in both
// shard formats; a verbatim record is left as its input had it.
func TestRunFillsSuccessAndHermesMetadata(t *testing.T) {
	stage := &funcStage{name: "mixed", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		i := rec.PromptIndex
		complete(rec)
		switch i % 4 {
		case 1:
			rec.Outcome, rec.Error = schemas.OutcomeAPIError, "HTTP 502"
		case 2:
			rec.Raw = json.RawMessage(fmt.Sprintf(`{"key": %q, "prompt_index": 2, "sample": 0, "outcome": "completed", "conversations": [], "metadata": {"mine": 1}}`, rec.Key))
		}
		if i != 3 {
			rec.Model = "m"
		}
		if i == 0 {
			rec.Metadata = json.RawMessage(`{"src": "a", "timestamp": "row's own"}`)
		}
		return []*schemas.Record{rec}, nil
	}}
	const ts = `"2026-06-01T09:00:00.000000+00:00"`
	want := []string{
		`"outcome":"completed","success":true,`, `"metadata":{"batch_num":0,"model":"m","src":"a","timestamp":"row's own"}`,
		`"outcome":"api_error","success":false,`, `"metadata":{"batch_num":0,"timestamp":` + ts + `,"model":"m"}`,
		`"conversations": [], "metadata": {"mine": 1}}`, ``,
		`"outcome":"completed","success":true,`, `"metadata":{"batch_num":1,"timestamp":` + ts + `}`,
		`"outcome":"completed","success":true,`, `"metadata":{"batch_num":1,"timestamp":` + ts + `,"model":"m"}`,
	}
	for _, format := range []string{FormatJSONL, FormatParquet} {
		dir := t.TempDir()
		opts := testOutOpts(ModeFresh)
		opts.Format = format
		out, err := OpenOutput(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Run(context.Background(), Options{Workers: 2, BatchSize: 3, Now: testNow}, SliceSource(records(5)), []Stage{stage}, out); err != nil {
			t.Fatal(err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
		lines := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(catString(t, dir, false)), "\n") {
			var head struct{ Key string }
			if err := json.Unmarshal([]byte(line), &head); err != nil {
				t.Fatal(err)
			}
			lines[head.Key] = line
		}
		for i := range 5 {
			line := lines[fmt.Sprintf("k%05d", i)]
			if !strings.Contains(line, want[2*i]) || !strings.Contains(line, want[2*i+1]) {
				t.Errorf("%s: record %d: %s\nwant %s and %s", format, i, line, want[2*i], want[2*i+1])
			}
			if i == 2 && strings.Contains(line, `success`) {
				t.Errorf("%s: the verbatim record gained success: %s", format, line)
			}
		}
		mustVerify(t, dir)
	}
}

// TestParquetOldSchemaShardsRead: an output folder whose Parquet shards
// were written with an earlier schema verifies, prints and counts as
// before, and a resume adds shards of the current schema beside them that
// read together. Version 1 (before records carried success) is the
// generate fixture; version 2 (success, before timings, reward, grade and
// logprobs) is the demo run by the code of that version (testdata).
func TestParquetOldSchemaShardsRead(t *testing.T) {
	for _, tc := range []struct{ version, fixture string }{
		{"1", filepath.Join("..", "datasets", "fixtures", "generate-parquet")},
		{"2", filepath.Join("testdata", "parquet-v2")},
	} {
		t.Run("v"+tc.version, func(t *testing.T) { checkOldSchemaFolder(t, tc.version, tc.fixture) })
	}
}

func checkOldSchemaFolder(t *testing.T, version, fixture string) {
	dir := t.TempDir()
	copyDir(t, fixture, dir)
	old, _ := filepath.Glob(filepath.Join(dir, DataDir, "shard-*"+parquetExt))
	if len(old) != 1 || shardSchemaVersion(t, old[0]) != version {
		t.Fatalf("fixture shards %v: want one of schema version %s", old, version)
	}
	before := catString(t, dir, false)
	n := strings.Count(before, "\n")
	if n == 0 || (version == "1") != !strings.Contains(before, `"success":true`) || strings.Contains(before, `"reward"`) {
		t.Fatalf("fixture records (%d):\n%.500s", n, before)
	}
	rep := mustVerify(t, dir)
	if _, err := Stats(dir); err != nil {
		t.Fatal(err)
	}

	opts := testOutOpts(ModeResume)
	opts.Kind, opts.Format = "generate", FormatParquet
	out, err := OpenOutput(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	one, passed := 1.0, true
	fresh := []*schemas.Record{{Key: "new-0", PromptIndex: 1000}, {Key: "new-1", PromptIndex: 1001,
		Reward: &one, Grade: &schemas.Grade{Grader: "exact", Passed: &passed, Value: &one}, Timings: &schemas.Timings{ModelMS: 5}}}
	if _, err := Run(context.Background(), Options{Workers: 2, Now: testNow}, SliceSource(fresh), []Stage{completeStage()}, out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	after := catString(t, dir, false)
	if !strings.HasPrefix(after, before) || strings.Count(after, "\n") != n+2 || strings.Count(after[len(before):], `"success":true`) != 2 ||
		!strings.Contains(after[len(before):], `"reward":1,"grade":{"grader":"exact"`) {
		t.Fatalf("after the resume:\n%s", after[len(before):])
	}
	shards, _ := filepath.Glob(filepath.Join(dir, DataDir, "shard-*"+parquetExt))
	if len(shards) != 2 || shardSchemaVersion(t, shards[1]) != parquetSchemaVersion {
		t.Fatalf("shards %v", shards)
	}
	if rep2 := mustVerify(t, dir); rep2.Records != rep.Records+2 {
		t.Fatalf("verify saw %d records, want %d", rep2.Records, rep.Records+2)
	}
	st, err := Stats(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Records != n+2 {
		t.Fatalf("stats counted %d records, want %d", st.Records, n+2)
	}
	// DuckDB reads the mixed folder as README says: union_by_name, the
	// columns a version lacks null in its rows.
	jsonl := filepath.Join(t.TempDir(), "all.jsonl")
	if err := os.WriteFile(jsonl, []byte(after), 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err := duckDBCheck(t, jsonl, shards, "--union-by-name"); err != nil || res.Rows != n+2 || res.Compared != n+2 || len(res.Problems) > 0 {
		t.Fatalf("parquet-check --union-by-name: %v: %+v", err, res)
	}
}

// duckDBResult is what scripts/parquet-check.mjs prints.
type duckDBResult struct {
	Rows     int      `json:"rows"`
	Compared int      `json:"compared"`
	Problems []string `json:"problems"`
}

// duckDBCheck reads shards with DuckDB through scripts/parquet-check.mjs
// (with flags) and compares them with the records of the JSONL file jsonl,
// as TestParquetDuckDB does. It skips t without node or @duckdb/node-api,
// and fails it instead under CI.
func duckDBCheck(t *testing.T, jsonl string, shards []string, flags ...string) (duckDBResult, error) {
	t.Helper()
	node, err := exec.LookPath("node")
	scripts := filepath.Join("..", "scripts")
	if err == nil {
		_, err = os.Stat(filepath.Join(scripts, "node_modules", "@duckdb", "node-api", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the DuckDB cross-check needs node and npm ci --prefix scripts: %v", err)
		}
		t.Skipf("DuckDB cross-check: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append(append([]string{filepath.Join(scripts, "parquet-check.mjs")}, flags...), "--jsonl", jsonl)
	cmd := exec.CommandContext(ctx, node, append(args, shards...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	var res duckDBResult
	if jerr := json.Unmarshal(stdout, &res); jerr != nil {
		t.Fatalf("parquet-check: %v; output %q: %v\n%s", err, stdout, jerr, stderr.String())
	}
	return res, err
}

// shardSchemaVersion is the hermes-pipe schema version a Parquet shard names.
func shardSchemaVersion(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	pf, err := parquet.OpenFile(f, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	v, _ := pf.Lookup(parquetSchemaKey)
	return v
}
