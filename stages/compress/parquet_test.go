package compress

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/tidwall/gjson"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

type pqTurn struct {
	From  string `parquet:"from"`
	Value string `parquet:"value"`
}

type pqRow struct {
	ID            string   `parquet:"id"`
	Conversations []pqTurn `parquet:"conversations,list"`
	Score         float64  `parquet:"score"`
	Tags          []string `parquet:"tags,list"`
}

// A Parquet file of another tool: rows become JSON objects with the
// columns in schema order, and compress reads them like JSONL.
func TestParquetGenericInput(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "in.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[pqRow](f)
	var want [][]schemas.Turn
	for i := range 6 {
		steps, words := 2, 20
		if i%2 == 1 {
			steps, words = 16, 90
		}
		tr := trajectory(uint64(i), steps, words)
		want = append(want, tr)
		var ts []pqTurn
		for _, t := range tr {
			ts = append(ts, pqTurn{t.From, t.Value})
		}
		if _, err := w.Write([]pqRow{{ID: "p" + itoa(i), Conversations: ts, Score: 0.5, Tags: []string{"a", "b"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	r, err := openParquet(path)
	if err != nil {
		t.Fatal(err)
	}
	line, _, err := r.next()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	gjson.ParseBytes(line).ForEach(func(k, _ gjson.Result) bool { keys = append(keys, k.Str); return true })
	if got := bytes.Join([][]byte{[]byte(keys[0]), []byte(keys[1]), []byte(keys[2]), []byte(keys[3])}, []byte(",")); string(got) != "id,conversations,score,tags" {
		t.Errorf("columns %v in %s", keys, line)
	}
	if gjson.GetBytes(line, "tags.1").Str != "b" || gjson.GetBytes(line, "conversations.1.from").Str != "human" {
		t.Errorf("row %s", line)
	}
	r.close()

	_, url := fake(t, fakellm.Config{})
	out := filepath.Join(dir, "out")
	res, err := Run(bg, testOptions(t, url, []string{dir}, out))
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.Written != 6 || res.Summary.Failed != 0 {
		t.Fatalf("summary %+v", res.Summary)
	}
	got := catLines(t, out)
	for i, l := range got {
		rr := decode(t, l)
		if rr.ID != "p"+itoa(i) {
			t.Fatalf("row %d is %s", i, rr.ID)
		}
		if i%2 == 0 && len(rr.Conversations) != len(want[i]) {
			t.Errorf("row %d under budget changed", i)
		}
		if i%2 == 1 && metricsOf(t, rr)["outcome"] != "compressed" {
			t.Errorf("row %d not compressed", i)
		}
	}
}

// A hermes-pipe Parquet output folder, and its shard files read directly,
// give back the exact lines of the run.
func TestParquetRunFolderInput(t *testing.T) {
	dir := t.TempDir()
	gen := filepath.Join(dir, "gen")
	out, err := pipeline.OpenOutput(gen, pipeline.OutputOptions{Kind: "generate", Format: "parquet"})
	if err != nil {
		t.Fatalf("open a Parquet output folder: %v", err)
	}
	var recs []*schemas.Record
	for i := range 5 {
		recs = append(recs, &schemas.Record{Key: "k" + itoa(i), PromptIndex: i, Outcome: schemas.OutcomeCompleted,
			Conversations: trajectory(uint64(i), 16, 90), Completed: true})
	}
	if _, err := pipeline.Run(bg, pipeline.Options{}, pipeline.SliceSource(recs), nil, out); err != nil {
		t.Fatal(err)
	}
	out.Close()
	wantLines := catLines(t, gen)

	shards, _ := filepath.Glob(filepath.Join(gen, "data", "*.parquet"))
	if len(shards) == 0 {
		t.Fatal("no parquet shard")
	}
	r, err := openParquet(shards[0])
	if err != nil {
		t.Fatal(err)
	}
	line, _, err := r.next()
	r.close()
	if err != nil || !bytes.Equal(line, bytes.TrimSpace(wantLines[0])) {
		t.Errorf("raw_json line %q, %v; want %q", line, err, wantLines[0])
	}

	_, url := fake(t, fakellm.Config{})
	dst := filepath.Join(dir, "out")
	res, err := Run(bg, testOptions(t, url, []string{gen}, dst))
	if err != nil {
		t.Fatal(err)
	}
	got := catLines(t, dst)
	if res.Summary.Written != 5 || len(got) != 5 {
		t.Fatalf("summary %+v", res.Summary)
	}
	for i, l := range got {
		if r := decode(t, l); r.Key != "k"+itoa(i) || r.Outcome != "completed" || metricsOf(t, r)["outcome"] != "compressed" {
			t.Errorf("row %d: %s %s", i, r.Key, r.Outcome)
		}
	}
	verifyOK(t, dst)
}

// A Parquet text value that is not UTF-8 keeps its bytes on the way to the
// source, which rejects the row naming the column, instead of becoming
// U+FFFD in a row then reported as passed through unchanged.
func TestParquetInvalidUTF8IsRejected(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "in.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[pqRow](f)
	rows := []pqRow{
		{ID: "ok", Conversations: []pqTurn{{"human", "hi \"there\"\n"}, {"gpt", "fine"}}},
		{ID: "bad", Conversations: []pqTurn{{"human", "hi"}, {"gpt", "bytes \xff\xfe here"}}},
	}
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var rejects []schemas.Reject
	src := OpenSource(SourceOptions{Inputs: []Input{{Path: path, Kind: KindParquet, Name: "in.parquet"}}, Reject: func(r schemas.Reject) { rejects = append(rejects, r) }})
	defer src.Close()
	rec, err := src.Next(bg)
	if err != nil || gjson.GetBytes(rec.Raw, "conversations.0.value").Str != "hi \"there\"\n" {
		t.Fatalf("first row: %v %s", err, rec.Raw)
	}
	if rec, err := src.Next(bg); err == nil {
		t.Fatalf("the row with invalid UTF-8 was read: %s", rec.Raw)
	}
	if len(rejects) != 1 || rejects[0].Line != 2 || rejects[0].Field != "conversations[1].value" || rejects[0].RawBase64 == "" {
		t.Fatalf("rejects = %+v", rejects)
	}
}
