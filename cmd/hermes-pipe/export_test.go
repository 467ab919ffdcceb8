package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline/export"
	"github.com/hermes-pipe/hermes-pipe/pipeline/objstore/s3test"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// fixtureCopy copies the checked-in finished generate folder into a
// temporary folder.
func fixtureCopy(t *testing.T) string {
	t.Helper()
	return copyTree(t, filepath.Join("..", "..", "datasets", "fixtures", "generate"))
}

// exportManifest reads an export's export.json.
func exportManifest(t *testing.T, to string) export.Manifest {
	t.Helper()
	var man export.Manifest
	b, err := os.ReadFile(filepath.Join(to, export.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &man); err != nil {
		t.Fatal(err)
	}
	return man
}

func TestExportCommand(t *testing.T) {
	src := fixtureCopy(t)
	to := filepath.Join(t.TempDir(), "ds")
	code, _, errs := hp(t, "export", src, "--to", to, "--format", "sharegpt", "--split", "train=0.5,test=0.5", "--seed", "7", "--progress", "none")
	if code != exitOK {
		t.Fatalf("export exit %d: %s", code, errs)
	}
	man := exportManifest(t, to)
	if man.Rows != 11 || man.Sources[0].RunIDs[0] != "18ee211aa4dd6273-3548" || man.Options.Seed != 7 {
		t.Fatalf("manifest %+v", man)
	}
	for _, out := range man.Splits {
		for _, f := range out.Files {
			if _, err := os.Stat(filepath.Join(to, f)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !strings.Contains(errs, "export: 11 rows to "+to) {
		t.Fatalf("summary: %s", errs)
	}
	card, err := os.ReadFile(filepath.Join(to, export.CardFile))
	if err != nil || !strings.HasPrefix(string(card), "---\nconfigs:\n") {
		t.Fatalf("card: %v %.100s", err, card)
	}

	// Refused: an existing --to, a bad --where, --arguments object with Parquet.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"export", src, "--to", to}, "--overwrite"},
		{[]string{"export", src, "--to", to + "2", "--where", "colour=red"}, `unknown field "colour"`},
		{[]string{"export", src, "--to", to + "2", "--where", "tokens>>3"}, "tokens"},
		{[]string{"export", src, "--to", to + "2", "--arguments", "object"}, "--file-format jsonl"},
		{[]string{"export", src, "--to", to + "2", "--best-of", "0"}, "--best-of"},
		{[]string{"export", src}, "--to"},
	} {
		code, _, errs := hp(t, c.args...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, want %d with %q: %s", c.args, code, exitUsage, c.want, errs)
		}
	}
	if _, err := os.Stat(to + "2"); !os.IsNotExist(err) {
		t.Fatal("a refused export created its folder")
	}
	if code, _, errs := hp(t, "export", src, "--to", to, "--overwrite", "--file-format", "jsonl", "--format", "sharegpt", "--progress", "none"); code != exitOK {
		t.Fatalf("--overwrite: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(to, "data", "train-00000-of-00001.jsonl")); err != nil {
		t.Fatal(err)
	}
}

func TestExportRefusesACutShard(t *testing.T) {
	src := fixtureCopy(t)
	shard := filepath.Join(src, "data", "shard-00001.jsonl")
	b, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shard, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(t.TempDir(), "ds")
	code, _, errs := hp(t, "export", src, "--to", to, "--progress", "none")
	if code != exitFatal || !strings.Contains(errs, "data/shard-00001.jsonl") {
		t.Fatalf("exit %d, want %d naming the shard: %s", code, exitFatal, errs)
	}
	if ents, _ := os.ReadDir(filepath.Dir(to)); len(ents) != 0 {
		t.Fatalf("written from a cut shard: %v", ents)
	}
}

// TestExportShardedRunAndTwoSources reads a sharded run's shard folders as
// one source (here two copies of the fixture, so every record twice) and a
// second source after it.
func TestExportShardedRunAndTwoSources(t *testing.T) {
	run := filepath.Join(t.TempDir(), "run")
	for _, shard := range []string{"shard-0-of-2", "shard-1-of-2"} {
		if err := os.MkdirAll(run, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(fixtureCopy(t), filepath.Join(run, shard)); err != nil {
			t.Fatal(err)
		}
	}
	other := fixtureCopy(t)
	to := filepath.Join(t.TempDir(), "ds")
	code, _, errs := hp(t, "export", run, other, "--to", to, "--format", "sharegpt", "--file-format", "jsonl", "--progress", "none")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	man := exportManifest(t, to)
	if man.Rows != 33 || len(man.Sources) != 2 || man.Sources[0].Folders != 2 || man.Sources[0].Records != 22 || man.Sources[1].Records != 11 {
		t.Fatalf("rows %d, sources %+v", man.Rows, man.Sources)
	}
	data, err := os.ReadFile(filepath.Join(to, "data", "train-00000-of-00001.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	// The shards merged in cat's order: each record of the fixture twice in a row.
	if len(lines) != 33 || lines[0] != lines[1] || lines[2] != lines[3] || lines[0] == lines[2] || lines[22] != lines[0] {
		t.Fatalf("%d lines, not the shards merged in order then the second source", len(lines))
	}
}

// TestExportCompressedRun exports a compress run of a generate folder: every
// record converts, a compressed one's messages start with the notice
// compress added to its system turn, and `sharegpt` of each row gives its
// turns after the system turn back.
func TestExportCompressedRun(t *testing.T) {
	gen := demoFolder(t)
	_, url := startFakeServer(t, fakellm.Config{SummaryWords: 20})
	out := filepath.Join(t.TempDir(), "compressed")
	if code, _, errs := hpc(t, "compress", "--in", gen, "--out", out, "--target-tokens", "300", "--summary-tokens", "50",
		"--protect-last", "1", "--base-url", url, "--model", "m", "--progress", "none"); code != exitOK {
		t.Fatalf("compress exit %d: %s", code, errs)
	}
	recs := catRecords(t, out)
	to := filepath.Join(t.TempDir(), "sft")
	if code, _, errs := hp(t, "export", out, "--to", to, "--file-format", "jsonl", "--progress", "none"); code != exitOK {
		t.Fatalf("export exit %d: %s", code, errs)
	}
	files, _ := filepath.Glob(filepath.Join(to, "data", "*.jsonl"))
	var rows []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, strings.Split(strings.TrimSpace(string(data)), "\n")...)
	}
	if len(rows) != len(recs) {
		t.Fatalf("%d rows exported of %d records", len(rows), len(recs))
	}
	notices := 0
	for i, line := range rows {
		var row struct {
			Messages []struct {
				Role, Content string
			} `json:"messages"`
		}
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		turns, _ := recs[i]["conversations"].([]any)
		sys, _ := turns[0].(map[string]any)["value"].(string)
		if len(row.Messages) > 0 && row.Messages[0].Role == "system" {
			notices++
			if !strings.HasSuffix(sys, row.Messages[0].Content) || row.Messages[0].Content == "" {
				t.Errorf("row %d: system message %q is not the end of the system turn", i, row.Messages[0].Content)
			}
		}
		in := filepath.Join(t.TempDir(), "row.jsonl")
		if err := os.WriteFile(in, []byte(line+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, stdout, errs := hp(t, "sharegpt", in)
		if code != exitOK {
			t.Fatalf("sharegpt of row %d: exit %d: %s", i, code, errs)
		}
		var back struct {
			Conversations []any `json:"conversations"`
		}
		if err := json.Unmarshal([]byte(stdout), &back); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(turns[1:])
		got, _ := json.Marshal(back.Conversations[1:])
		if string(got) != string(want) {
			t.Errorf("row %d: sharegpt gives back other turns:\n got %s\nwant %s", i, got, want)
		}
	}
	if notices == 0 {
		t.Error("no compressed record among the rows: the test proves nothing")
	}
}

// TestExportFromS3 exports a run sharded across two machines into object
// storage, by its s3:// URL, as cat reads it: every record, in cat's order.
func TestExportFromS3(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server")
	}
	out := s3test.URL(s3test.Start(t), "runs/export")
	url := startFake(t, fakellm.Config{}, echoScript)
	prompts := echoPrompts(t, 10)
	for i := range 2 {
		args := []string{"--prompts", prompts, "--base-url", url, "--out", out, "--shard", fmt.Sprintf("%d/2", i), "--spool", filepath.Join(t.TempDir(), "spool")}
		if msg, err := shardGenerate(t, nil, args...); err != nil {
			t.Fatalf("shard %d: %v\n%s", i, err, msg)
		}
	}
	to := filepath.Join(t.TempDir(), "sft")
	code, _, errs := hp(t, "export", out, "--to", to, "--format", "sharegpt", "--file-format", "jsonl", "--progress", "none",
		"--cache", filepath.Join(t.TempDir(), "cache"))
	if code != exitOK {
		t.Fatalf("export exit %d: %s", code, errs)
	}
	catCode, catOut, catErr := hp(t, "cat", out)
	if catCode != 0 {
		t.Fatalf("cat exit %d: %s", catCode, catErr)
	}
	files, _ := filepath.Glob(filepath.Join(to, "data", "*.jsonl"))
	var keys []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
			var row struct{ Key string }
			if err := json.Unmarshal([]byte(line), &row); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, row.Key)
		}
	}
	var want []string
	for _, r := range strings.Split(strings.TrimSpace(catOut), "\n") {
		var rec struct{ Key string }
		if err := json.Unmarshal([]byte(r), &rec); err != nil {
			t.Fatal(err)
		}
		want = append(want, rec.Key)
	}
	if len(want) != 10 || strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Fatalf("exported keys %v, want cat's %v", keys, want)
	}
	if man := exportManifest(t, to); len(man.Sources) != 1 || len(man.Sources[0].RunIDs) == 0 {
		t.Fatalf("manifest sources %+v", man.Sources)
	}
}
