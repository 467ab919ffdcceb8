package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
	"github.com/hermes-pipe/hermes-pipe/stages/tokenizer"
	loader "github.com/pkoukk/tiktoken-go-loader"
	"github.com/urfave/cli/v2"
)

// hpc runs the CLI in-process like hp, with the compress and tokens commands
// present whether or not the app lists them yet.
func hpc(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	app := newApp(&out, &errb)
	have := map[string]bool{}
	for _, c := range app.Commands {
		have[c.Name] = true
	}
	for _, c := range []func() *cli.Command{compressCommand, tokensCommand} {
		cmd := c()
		if !have[cmd.Name] {
			setUsageHandler(cmd, "")
			app.Commands = append(app.Commands, cmd)
		}
	}
	err := app.Run(append([]string{"hermes-pipe"}, args...))
	code := exitCode(err)
	if err != nil {
		fmt.Fprintf(&errb, "hermes-pipe: %v\n", err)
	}
	return code, out.String(), errb.String()
}

// startFakeServer is startFake that also returns the server for /stats.
func startFakeServer(t *testing.T, cfg fakellm.Config) (*fakellm.Server, string) {
	t.Helper()
	s := fakellm.New(cfg)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL + "/v1"
}

// trajLine is one ShareGPT row: a head, steps tool-call pairs of about words
// words each, and a final answer.
func trajLine(id string, steps, words int) string {
	w := func(n, salt int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "w%d ", (i*7+salt)%97)
		}
		return b.String()
	}
	turns := []map[string]string{{"from": "system", "value": "You are a function calling AI model."}, {"from": "human", "value": "do " + id}}
	for i := range steps {
		turns = append(turns, map[string]string{"from": "gpt", "value": "<tool_call>\n{\"name\": \"terminal\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>"},
			map[string]string{"from": "tool", "value": "<tool_response>\n" + w(words, i) + "\n</tool_response>"})
	}
	turns = append(turns, map[string]string{"from": "gpt", "value": "done"})
	b, _ := json.Marshal(map[string]any{"conversations": turns, "id": id})
	return string(b)
}

// nineTrajectories writes dir/in.jsonl: nine trajectories of 200-word
// turns, t0, t3 and t6 with 12 steps (over a 1500-token target), the others
// with 2; it returns the file.
func nineTrajectories(t *testing.T, dir string) string {
	t.Helper()
	in := filepath.Join(dir, "in.jsonl")
	var lines []string
	for i := range 9 {
		steps := 2
		if i%3 == 0 {
			steps = 12
		}
		lines = append(lines, trajLine("t"+strconv.Itoa(i), steps, 200))
	}
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return in
}

func TestCompressCLI(t *testing.T) {
	fk, url := startFakeServer(t, fakellm.Config{SummaryWords: 40})
	dir := t.TempDir()
	in := nineTrajectories(t, dir)

	// --dry-run: a report, and not one request.
	code, out, errs := hpc(t, "compress", "--in", in, "--dry-run", "--json", "--target-tokens", "1500", "--summary-tokens", "100", "--base-url", url, "--model", "m")
	if code != 0 {
		t.Fatalf("dry run exit %d: %s", code, errs)
	}
	var rep struct {
		Rows           int `json:"rows"`
		OverTarget     int `json:"over_target"`
		ProjectedCalls int `json:"projected_calls"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("dry run output %q: %v", out, err)
	}
	if rep.Rows != 9 || rep.OverTarget != 3 || rep.ProjectedCalls != 3 {
		t.Errorf("dry run report %+v", rep)
	}
	if n := fk.Stats().Requests; n != 0 {
		t.Fatalf("--dry-run made %d API calls", n)
	}
	if code, out, _ := hpc(t, "compress", "--in", in, "--dry-run", "--target-tokens", "1500", "--summary-tokens", "100"); code != 0 || !strings.Contains(out, "over target") {
		t.Errorf("dry run table: exit %d %q", code, out)
	}

	// A real run: 3 rows compressed with 3 calls, all rows out, verify clean.
	dst := filepath.Join(dir, "out")
	code, _, errs = hpc(t, "compress", "--in", in, "--out", dst, "--target-tokens", "1500", "--summary-tokens", "100", "--base-url", url, "--model", "m", "--progress", "none")
	if code != 0 {
		t.Fatalf("compress exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "3 compressed") || fk.Stats().Requests != 3 {
		t.Errorf("compress: %s (%d requests)", errs, fk.Stats().Requests)
	}
	recs := catRecords(t, dst)
	if len(recs) != 9 {
		t.Fatalf("%d rows out of 9", len(recs))
	}
	for i, r := range recs {
		if r["id"] != "t"+strconv.Itoa(i) {
			t.Fatalf("row %d is %v", i, r["id"])
		}
		if _, has := r["compression_metrics"]; has != (i%3 == 0) {
			t.Errorf("row %d: compression_metrics present=%v", i, has)
		}
	}
	if code, _, errs := hp(t, "stats", dst); code != 0 {
		t.Errorf("stats: %s", errs)
	}
	if _, err := os.Stat(filepath.Join(dst, "compression_metrics.json")); err != nil {
		t.Error(err)
	}

	// A second run into the same folder needs --resume; with it nothing is redone.
	if code, _, _ := hpc(t, "compress", "--in", in, "--out", dst, "--base-url", url, "--model", "m"); code != exitUsage {
		t.Errorf("non-empty --out: exit %d", code)
	}
	code, _, errs = hpc(t, "compress", "--in", in, "--out", dst, "--target-tokens", "1500", "--summary-tokens", "100", "--base-url", url, "--model", "m", "--progress", "none", "--resume")
	if code != 0 || !strings.Contains(errs, "nothing to do") || fk.Stats().Requests != 3 {
		t.Errorf("resume: exit %d, %d requests: %s", code, fk.Stats().Requests, errs)
	}
}

func TestCompressCLIFailuresAndUsage(t *testing.T) {
	_, url := startFakeServer(t, fakellm.Config{Fail500: 1, MaxFaults: -1})
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(trajLine("a", 12, 200)+"\n"+trajLine("b", 1, 10)+"\n{not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "out")
	code, _, errs := hpc(t, "compress", "--in", in, "--out", dst, "--target-tokens", "1500", "--summary-tokens", "100",
		"--base-url", url, "--model", "m", "--progress", "none", "--max-retries", "1")
	if code != exitRowsFailed || !strings.Contains(errs, "1 summary failed") {
		t.Fatalf("exit %d, want 3: %s", code, errs)
	}
	// The closing summary counts the one retry of the summary call as 5xx.
	if lines := summaryBlock(t, errs, dst); !hasLine(lines, `^  retries: 1 \(1 5xx server error\)$`) || !hasLine(lines, `^  outcomes: .*\d summary_failed`) {
		t.Errorf("summary:\n%s", strings.Join(lines, "\n"))
	}
	recs := catRecords(t, dst)
	if len(recs) != 2 || recs[0]["compression_metrics"].(map[string]any)["outcome"] != "summary_failed" {
		t.Fatalf("records %v", recs)
	}
	rej, _ := os.ReadFile(filepath.Join(dst, pipeline.RejectsFile))
	if !bytes.Contains(rej, []byte(`"line":3`)) {
		t.Errorf("rejects: %s", rej)
	}

	for _, args := range [][]string{
		{"compress", "--in", in, "--out", filepath.Join(dir, "o2"), "--base-url", url, "--model", "m", "--over-limit", "burn"},
		{"compress", "--in", in, "--base-url", url, "--model", "m"},
		{"compress", "--in", in, "--out", filepath.Join(dir, "o3"), "--model", "m"},
		{"compress", "--in", filepath.Join(dir, "missing.jsonl"), "--dry-run"},
		{"compress", "--in", in, "--dry-run", "--tokenizer", "no_such_encoding"},
		{"compress", "--in", in, "--dry-run", "--summary-tokens", "2000", "--target-tokens", "1000"},
		{"compress", "--in", in, "--dry-run", "--summary-role", "assistant"},
		{"tokens"},
	} {
		if code, _, errs := hpc(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2: %s", args, code, errs)
		}
	}
}

func TestTokensCLI(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.jsonl")
	ta := strings.Repeat("Hello, world! 你好，世界。 func main() { return 42 }\n", 50000)
	tb := trajLine("x", 3, 50)
	os.WriteFile(a, []byte(ta), 0o644)
	os.WriteFile(b, []byte(tb), 0o644)
	tok, err := tokenizer.Load("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := hpc(t, "tokens", "--tokenizer", "o200k_base", a, b)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	na, nb := tok.Count(ta), tok.Count(tb)
	want := fmt.Sprintf("%d\t%s\n%d\t%s\n%d\ttotal\n", na, a, nb, b, na+nb)
	if out != want {
		t.Errorf("tokens printed\n%s\nwant\n%s", out, want)
	}
}

// TestTokensTokenizerPattern: a tiktoken-format file of no known family (the
// first 30,000 ranks of cl100k_base) is refused with an error naming
// --tokenizer-pattern; with --tokenizer-pattern cl100k and the special tokens
// of a tokenizer_config.json beside it, tokens counts every text of the
// tokenizer golden corpus as npm tiktoken encodes it with the same file,
// pattern and special tokens (stages/tokenizer/testdata/golden).
func TestTokensTokenizerPattern(t *testing.T) {
	testdata := filepath.Join("..", "..", "stages", "tokenizer", "testdata")
	type gcase struct {
		Name string  `json:"name"`
		Text *string `json:"text"`
		Hex  *string `json:"hex"`
		IDs  []int   `json:"ids"`
	}
	var corpus, golden struct {
		Cases  []gcase `json:"cases"`
		SHA256 string  `json:"sha256"`
	}
	for path, v := range map[string]any{"corpus.json": &corpus, filepath.Join("golden", "cl100k-30k-file.json"): &golden} {
		raw, err := os.ReadFile(filepath.Join(testdata, path))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	want := map[string]int{}
	for _, c := range golden.Cases {
		want[c.Name] = len(c.IDs)
	}

	dir := t.TempDir()
	tokFile := filepath.Join(dir, "tok", "cut.tiktoken")
	if err := os.MkdirAll(filepath.Dir(tokFile), 0o755); err != nil {
		t.Fatal(err)
	}
	ranks, err := loader.NewOfflineLoader().LoadTiktokenBpe("cl100k_base.tiktoken")
	if err != nil {
		t.Fatal(err)
	}
	byRank := make([]string, len(ranks))
	for tok, r := range ranks {
		byRank[r] = tok
	}
	var file strings.Builder
	for r, tok := range byRank[:30000] {
		fmt.Fprintf(&file, "%s %d\n", base64.StdEncoding.EncodeToString([]byte(tok)), r)
	}
	if sum := sha256.Sum256([]byte(file.String())); hex.EncodeToString(sum[:]) != golden.SHA256 {
		t.Fatalf("the cut file has SHA-256 %x, the golden was made from %s", sum, golden.SHA256)
	}
	cfg := `{"added_tokens_decoder": {"30000": {"content": "<|endoftext|>", "special": true},
	  "30001": {"content": "<|im_start|>", "special": true}, "30002": {"content": "<|im_end|>", "special": true}}}`
	for path, text := range map[string]string{tokFile: file.String(), filepath.Join(dir, "tok", "tokenizer_config.json"): cfg} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	var files []string
	expect := ""
	total := 0
	for i, c := range corpus.Cases {
		text := []byte{}
		switch {
		case c.Text != nil:
			text = []byte(*c.Text)
		case c.Hex != nil:
			if text, err = hex.DecodeString(*c.Hex); err != nil {
				t.Fatal(err)
			}
		}
		n, ok := want[c.Name]
		if !ok {
			t.Fatalf("no golden for corpus case %s", c.Name)
		}
		path := filepath.Join(dir, fmt.Sprintf("%02d-%s.txt", i, c.Name))
		if err := os.WriteFile(path, text, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, path)
		expect += fmt.Sprintf("%d\t%s\n", n, path)
		total += n
	}
	expect += fmt.Sprintf("%d\ttotal\n", total)
	if len(files) < 30 || total < 10000 {
		t.Fatalf("corpus of %d files, %d tokens: too small to tell", len(files), total)
	}

	code, out, errs := hpc(t, append([]string{"tokens", "--tokenizer", tokFile, "--tokenizer-pattern", "cl100k"}, files...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if out != expect {
		t.Errorf("tokens printed\n%s\nwant (npm tiktoken)\n%s", out, expect)
	}
	// The pattern given as a regex counts the same.
	regex := `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	if code, out, errs := hpc(t, append([]string{"tokens", "--tokenizer", tokFile, "--tokenizer-pattern", regex}, files...)...); code != 0 || out != expect {
		t.Errorf("pattern as a regex: exit %d, %s\n%s", code, errs, out)
	}
	// compress budgets with the same tokenizer.
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(trajLine("a", 2, 20)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := hpc(t, "compress", "--in", in, "--dry-run", "--tokenizer", tokFile, "--tokenizer-pattern", "cl100k"); code != 0 {
		t.Errorf("compress --dry-run with --tokenizer-pattern: exit %d: %s", code, errs)
	}

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"tokens", "--tokenizer", tokFile, files[1]}, []string{tokFile, "30000 ranks", "--tokenizer-pattern", "cl100k, o200k, llama3, kimi, qwen"}},
		{[]string{"compress", "--in", in, "--dry-run", "--tokenizer", tokFile}, []string{tokFile, "--tokenizer-pattern"}},
		{[]string{"tokens", "--tokenizer", tokFile, "--tokenizer-pattern", "cl100", files[1]}, []string{"--tokenizer-pattern", "no known name"}},
		{[]string{"tokens", "--tokenizer", tokFile, "--tokenizer-pattern", `(?<=a)b`, files[1]}, []string{"--tokenizer-pattern", "split pattern"}},
		{[]string{"tokens", "--tokenizer", "cl100k_base", "--tokenizer-pattern", "cl100k", files[1]}, []string{"--tokenizer-pattern", "only to tiktoken-format files"}},
	} {
		code, out, errs := hpc(t, tc.args...)
		if code != exitUsage || out != "" {
			t.Errorf("%v: exit %d, stdout %q, want exit 2 and nothing counted", tc.args[3:], code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: stderr %q lacks %q", tc.args[3:], errs, w)
			}
		}
	}
}

func TestCompressGenerateOutput(t *testing.T) {
	url := startFake(t, fakellm.Config{SummaryWords: 30}, `{"scripts": [{"match": "^count", "steps": [
	  {"tool_calls": [{"name": "terminal", "arguments": {"command": "seq 1 250"}}]},
	  {"tool_calls": [{"name": "terminal", "arguments": {"command": "seq 251 500"}}]},
	  {"tool_calls": [{"name": "terminal", "arguments": {"command": "seq 501 750"}}]},
	  {"tool_calls": [{"name": "terminal", "arguments": {"command": "seq 751 1000"}}]},
	  {"tool_calls": [{"name": "terminal", "arguments": {"command": "seq 1001 1250"}}]},
	  {"tool_calls": [{"name": "terminal", "arguments": {"command": "seq 1251 1500"}}]},
	  {"content": "counted"}]}]}`)
	prompts := writePrompts(t, `{"prompt": "count a"}`, `{"prompt": "count b"}`, `{"prompt": "count c"}`)
	dir := t.TempDir()
	gen := filepath.Join(dir, "gen")
	if code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", gen, "--base-url", url, "--model", "m", "--progress", "none", "--toolsets", "terminal"); code != 0 {
		t.Fatalf("generate exit %d: %s", code, errs)
	}
	dst := filepath.Join(dir, "out")
	code, _, errs := hpc(t, "compress", "--in", gen, "--out", dst, "--target-tokens", "3000", "--summary-tokens", "100", "--turn-overhead", "5",
		"--base-url", url, "--model", "m", "--progress", "none")
	if code != 0 {
		t.Fatalf("compress exit %d: %s", code, errs)
	}
	genRecs, recs := catRecords(t, gen), catRecords(t, dst)
	if len(recs) != 3 {
		t.Fatalf("%d records", len(recs))
	}
	for i, r := range recs {
		if r["key"] != genRecs[i]["key"] || r["outcome"] != "completed" {
			t.Errorf("record %d: key %v outcome %v (input %v)", i, r["key"], r["outcome"], genRecs[i]["key"])
		}
		m, ok := r["compression_metrics"].(map[string]any)
		if !ok || m["outcome"] != "compressed" {
			t.Errorf("record %d not compressed: %v", i, r["compression_metrics"])
		}
	}
	// verify holds record and ledger to the same key, outcome and position.
	if code, out, errs := hp(t, "verify", dst); code != 0 {
		t.Errorf("verify exit %d: %s%s", code, out, errs)
	}
}

// TestCompressRejectsInvalidUTF8Rows: a row with bytes that are not UTF-8
// cannot be written unchanged (every written string is UTF-8), so it is a
// reject naming line and field, keeping its exact bytes, not a row silently
// rewritten with U+FFFD and called byte-identical.
func TestCompressRejectsInvalidUTF8Rows(t *testing.T) {
	_, url := startFakeServer(t, fakellm.Config{SummaryWords: 40})
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	bad := strings.Replace(trajLine("bad", 1, 5), "w0 ", "w0 \xff\xfe ", 1)
	if err := os.WriteFile(in, []byte(trajLine("a", 1, 5)+"\n"+bad+"\n"+trajLine("b", 1, 5)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "out")
	code, _, errs := hpc(t, "compress", "--in", in, "--out", dst, "--base-url", url, "--model", "m", "--progress", "none")
	if code != exitRowsFailed {
		t.Fatalf("exit %d, want 3: %s", code, errs)
	}
	recs := catRecords(t, dst)
	if len(recs) != 2 || recs[0]["id"] != "a" || recs[1]["id"] != "b" {
		t.Fatalf("records = %v", recs)
	}
	raw, err := os.ReadFile(filepath.Join(dst, "rejects.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var rj struct {
		Line      int    `json:"line"`
		Field     string `json:"field"`
		Reason    string `json:"reason"`
		RawBase64 string `json:"raw_base64"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(raw), &rj); err != nil {
		t.Fatalf("rejects.jsonl %q: %v", raw, err)
	}
	if rj.Line != 2 || rj.Field != "conversations[3].value" || !strings.Contains(rj.Reason, "invalid UTF-8") || rj.RawBase64 == "" {
		t.Errorf("reject = %+v", rj)
	}
}

// TestShareGPTRejectsInvalidUTF8 names the line and field instead of
// converting the bytes to U+FFFD.
func TestShareGPTRejectsInvalidUTF8(t *testing.T) {
	in := `{"messages": [{"role": "user", "content": "fine"}]}` + "\n" + "{\"messages\": [{\"role\": \"user\", \"content\": \"bad \xff\"}]}\n"
	var out, errb strings.Builder
	err := convertShareGPT("t.jsonl", strings.NewReader(in), &out, &errb, schemas.ConvertOptions{})
	if exitCode(err) != exitRowsFailed || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("exit %d, output %q", exitCode(err), out.String())
	}
	if want := "t.jsonl:2: messages[0].content: invalid UTF-8"; !strings.Contains(errb.String(), want) {
		t.Errorf("stderr %q does not say %q", errb.String(), want)
	}
}

// multiRunLine is a ShareGPT row with two runs of unsummarised turns split by
// the first (protected) tool turn: runA gpt turns, then runB tool-call pairs,
// so a row over budget may need a summary pass in each run.
func multiRunLine(id string, runA, runB, words int) string {
	w := func(n, salt int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "w%d ", (i*7+salt)%97)
		}
		return b.String()
	}
	turns := []map[string]string{{"from": "system", "value": "You are a function calling AI model."}, {"from": "human", "value": "do " + id}, {"from": "gpt", "value": "plan " + w(words, 1)}}
	for i := range runA {
		turns = append(turns, map[string]string{"from": "gpt", "value": "thinking " + w(words, i+2)})
	}
	turns = append(turns, map[string]string{"from": "tool", "value": "<tool_response>\nfirst " + w(words, 3) + "\n</tool_response>"})
	for i := range runB {
		turns = append(turns, map[string]string{"from": "gpt", "value": "<tool_call>\n{\"name\": \"terminal\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>"},
			map[string]string{"from": "tool", "value": "<tool_response>\n" + w(words, i+5) + "\n</tool_response>"})
	}
	turns = append(turns, map[string]string{"from": "gpt", "value": "done"})
	b, _ := json.Marshal(map[string]any{"conversations": turns, "id": id})
	return string(b)
}

// TestCompressDryRunProjectsEveryPass: the dry run projects the summary
// passes a row takes, not one call per row; with summaries of the expected
// length (fakellm writes --summary-tokens words) the projection is the
// number of calls the run makes.
func TestCompressDryRunProjectsEveryPass(t *testing.T) {
	fk, url := startFakeServer(t, fakellm.Config{SummaryWords: 100})
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	var lines []string
	for i := range 8 {
		lines = append(lines, multiRunLine(fmt.Sprint("r", i), 2+i%3, 3+i, 150+10*i))
	}
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	budget := []string{"--target-tokens", "3000", "--summary-tokens", "100"}
	code, out, errs := hpc(t, append([]string{"compress", "--in", in, "--dry-run", "--json"}, budget...)...)
	if code != 0 {
		t.Fatalf("dry run exit %d: %s", code, errs)
	}
	var rep struct {
		OverTarget     int `json:"over_target"`
		ProjectedCalls int `json:"projected_calls"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.ProjectedCalls <= rep.OverTarget {
		t.Fatalf("fixture needs several passes per row: %d calls for %d rows over target", rep.ProjectedCalls, rep.OverTarget)
	}
	dst := filepath.Join(dir, "out")
	code, _, errs = hpc(t, append([]string{"compress", "--in", in, "--out", dst, "--base-url", url, "--model", "m", "--progress", "none"}, budget...)...)
	if code != 0 {
		t.Fatalf("compress exit %d: %s", code, errs)
	}
	if got := int(fk.Stats().Requests); got != rep.ProjectedCalls {
		t.Errorf("dry run projected %d summary calls, the run made %d", rep.ProjectedCalls, got)
	}
}

// Every summary request carries --temperature: 0.3 by default (Hermes'
// summariser), the flag's value when given.
func TestCompressSendsTemperature(t *testing.T) {
	fk := fakellm.New(fakellm.Config{SummaryWords: 40, KeepRequests: true})
	srv := httptest.NewServer(fk)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	lines := []string{trajLine("a", 12, 200), trajLine("b", 12, 200)}
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want float64
	}{{nil, 0.3}, {[]string{"--temperature", "0"}, 0}} {
		before := len(fk.Requests())
		args := append([]string{"compress", "--in", in, "--out", filepath.Join(dir, fmt.Sprint("out", tc.want)), "--target-tokens", "1500",
			"--summary-tokens", "100", "--base-url", srv.URL + "/v1", "--model", "m", "--progress", "none"}, tc.args...)
		if code, _, errs := hpc(t, args...); code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		var got []any
		for _, body := range fk.Requests()[before:] {
			var req map[string]any
			if err := json.Unmarshal([]byte(body), &req); err != nil {
				t.Fatalf("request %s: %v", body, err)
			}
			got = append(got, req["temperature"])
		}
		if len(got) < 2 {
			t.Fatalf("%d summary requests, want at least 2", len(got))
		}
		for i, v := range got {
			if f, ok := v.(float64); !ok || f != tc.want {
				t.Errorf("%v: request %d temperature %v, want %v", tc.args, i, v, tc.want)
			}
		}
	}
}

// A tokenizer of another family than --model is noted on stderr; a matching
// or unknown one is not.
func TestCompressNotesTokenizerFamilyMismatch(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(trajLine("a", 2, 20)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		model, tok string
		note       bool
	}{
		{"moonshotai/Kimi-K2-Instruct", "cl100k_base", true},
		{"gpt-4o", "o200k_base", false},
		{"my-local-model", "cl100k_base", false},
	} {
		code, _, errs := hpc(t, "compress", "--in", in, "--dry-run", "--tokenizer", tc.tok, "--model", tc.model)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		if got := strings.Contains(errs, "note: --tokenizer "+tc.tok); got != tc.note {
			t.Errorf("%s with %s: note %v, want %v (stderr %q)", tc.model, tc.tok, got, tc.note, errs)
		}
	}
}
