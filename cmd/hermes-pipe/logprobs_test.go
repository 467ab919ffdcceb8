package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

const logprobsScript = `{"scripts": [
 {"match": "^count (.*)$", "steps": [
  {"reasoning": "list them first", "tool_calls": [{"name": "terminal", "arguments": {"command": "echo {{m1}}"}}]},
  {"content": "two at once", "tool_calls": [{"name": "terminal", "arguments": {"command": "echo a"}}, {"name": "terminal", "arguments": {"command": "echo b"}}]},
  {"content": "There are {{m1}}: {{last_tool}}"}]},
 {"match": "^mute", "steps": [
  {"tool_calls": [{"name": "terminal", "arguments": {"command": "true"}}], "no_logprobs": true},
  {"content": "quiet answer"}]}]}`

// replyTokens serves the fake and keeps the completion tokens of every reply
// it sends, by the request's first user message and step (its assistant
// messages so far), read from the reply's own usage (the JSON body or the
// usage chunk of a stream).
type replyTokens struct {
	mu sync.Mutex
	n  map[string]int64
}

func (rt *replyTokens) key(prompt string, step int) string { return fmt.Sprintf("%s#%d", prompt, step) }

func (rt *replyTokens) wrap(t *testing.T, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		r.Body = readTee(r, &body)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		if rec.Code != http.StatusOK || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			return
		}
		var req struct {
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body.Bytes(), &req); err != nil {
			t.Errorf("request: %v", err)
			return
		}
		prompt, step := "", 0
		for _, m := range req.Messages {
			switch {
			case m.Role == "user" && prompt == "":
				prompt = m.Content
			case m.Role == "assistant":
				step++
			}
		}
		n := usageOfReply(t, rec.Body.Bytes())
		rt.mu.Lock()
		rt.n[rt.key(prompt, step)] = n
		rt.mu.Unlock()
	})
}

// readTee reads r's body into buf and gives it back as the body.
func readTee(r *http.Request, buf *bytes.Buffer) *bodyReader {
	_, _ = buf.ReadFrom(r.Body)
	return &bodyReader{bytes.NewReader(buf.Bytes())}
}

type bodyReader struct{ *bytes.Reader }

func (bodyReader) Close() error { return nil }

// usageOfReply is the completion_tokens of a chat reply, direct or streamed.
func usageOfReply(t *testing.T, b []byte) int64 {
	var u struct {
		Usage *struct {
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if !bytes.HasPrefix(b, []byte("data: ")) {
		if err := json.Unmarshal(b, &u); err != nil || u.Usage == nil {
			t.Errorf("reply without usage: %s", b)
			return -1
		}
		return u.Usage.CompletionTokens
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok || string(line) == "[DONE]" {
			continue
		}
		u.Usage = nil
		if json.Unmarshal(line, &u) == nil && u.Usage != nil {
			return u.Usage.CompletionTokens
		}
	}
	t.Errorf("stream without a usage chunk")
	return -1
}

// TestGenerateLogprobsOnePerCompletionToken is the acceptance of --logprobs:
// against the fake, every assistant turn of every record holds one logprob
// (and, with --logprob-token-ids, one token id) per completion token of the
// reply it came from, at the index of its gpt turn; a reply sent without
// logprobs is left out and counted in the closing warning; export
// --logprobs puts each entry at its assistant message.
func TestGenerateLogprobsOnePerCompletionToken(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			rt := &replyTokens{n: map[string]int64{}}
			srv := httptest.NewServer(rt.wrap(t, fakellm.New(fakellm.Config{Scripts: mustScripts(t, logprobsScript)})))
			t.Cleanup(srv.Close)
			prompts := writePrompts(t, `{"prompt": "count apples"}`, `{"prompt": "count pears"}`, `{"prompt": "mute it"}`)
			out := filepath.Join(t.TempDir(), "out")
			args := []string{"generate", "--prompts", prompts, "--out", out, "--base-url", srv.URL + "/v1", "--model", "m",
				"--progress", "none", "--samples", "2", "--toolsets", "terminal", "--logprobs", "--logprob-token-ids"}
			if stream { // and Parquet shards, whose raw_json keeps the member
				args = append(args, "--stream", "--format", "parquet")
			}
			code, _, errs := hp(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if !strings.Contains(errs, "generate: warning: 2 model replies came without logprobs") {
				t.Errorf("no warning of the two muted replies: %s", errs)
			}
			recs := catRecords(t, out)
			if len(recs) != 6 {
				t.Fatalf("%d records", len(recs))
			}
			for _, r := range recs {
				checkRecordLogprobs(t, rt, r)
			}
			mustVerify(t, out)
			checkExportLogprobs(t, out, recs)
		})
	}
}

func checkRecordLogprobs(t *testing.T, rt *replyTokens, r map[string]any) {
	t.Helper()
	conv := r["conversations"].([]any)
	prompt := conv[1].(map[string]any)["value"].(string)
	byTurn := map[int]map[string]any{}
	lps, _ := r["logprobs"].([]any)
	for _, e := range lps {
		m := e.(map[string]any)
		byTurn[int(m["turn"].(float64))] = m
	}
	step, kept := 0, 0
	var sum int64
	for i, tn := range conv {
		if tn.(map[string]any)["from"] != "gpt" {
			if byTurn[i] != nil {
				t.Errorf("%s: logprobs at turn %d, a %v turn", prompt, i, tn.(map[string]any)["from"])
			}
			continue
		}
		want, ok := rt.n[rt.key(prompt, step)]
		if !ok {
			t.Fatalf("%s: no reply seen for step %d", prompt, step)
		}
		sum += want
		lp := byTurn[i]
		muted := strings.HasPrefix(prompt, "mute") && step == 0
		step++
		if muted {
			if lp != nil {
				t.Errorf("%s: turn %d kept logprobs the reply did not send", prompt, i)
			}
			continue
		}
		if lp == nil {
			t.Errorf("%s: gpt turn %d has no logprobs", prompt, i)
			continue
		}
		kept++
		for _, col := range []string{"tokens", "logprobs", "token_ids"} {
			if got := len(lp[col].([]any)); int64(got) != want {
				t.Errorf("%s: turn %d has %d %s, its reply %d completion tokens", prompt, i, got, col, want)
			}
		}
	}
	if kept != len(lps) || step < 2 {
		t.Errorf("%s: %d logprobs entries, %d matched gpt turns of %d", prompt, len(lps), kept, step)
	}
	usage := r["usage"].(map[string]any)
	if got := int64(usage["completion_tokens"].(float64)); got != sum {
		t.Errorf("%s: usage %d completion tokens, the replies %d", prompt, got, sum)
	}
}

// TestGenerateLogprobsFlags: the token ids need --logprobs, and
// --extra-body may not set a field the flags set.
func TestGenerateLogprobsFlags(t *testing.T) {
	prompts := writePrompts(t, `{"prompt": "x"}`)
	base := []string{"generate", "--prompts", prompts, "--out", filepath.Join(t.TempDir(), "o"), "--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--progress", "none"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--logprob-token-ids"}, "--logprob-token-ids needs --logprobs"},
		{[]string{"--logprobs", "--extra-body", `{"logprobs": false}`}, `"logprobs" is also given by --logprobs`},
	} {
		code, _, errs := hp(t, append(base, c.args...)...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %s", c.args, code, errs)
		}
	}
}

// checkExportLogprobs exports out with --logprobs (messages, JSONL): each
// row's logprobs entries name its assistant messages, in order, holding the
// record's entries of the same replies.
func checkExportLogprobs(t *testing.T, out string, recs []map[string]any) {
	t.Helper()
	to := filepath.Join(t.TempDir(), "sft")
	if code, _, errs := hp(t, "export", out, "--to", to, "--file-format", "jsonl", "--logprobs", "--progress", "none"); code != 0 {
		t.Fatalf("export exit %d: %s", code, errs)
	}
	files, _ := filepath.Glob(filepath.Join(to, "data", "*.jsonl"))
	var rows []map[string]any
	for _, f := range files {
		rows = append(rows, readJSONL(t, f)...)
	}
	if len(rows) != len(recs) {
		t.Fatalf("%d rows of %d records", len(rows), len(recs))
	}
	for i, row := range rows {
		msgs := row["messages"].([]any)
		got, _ := row["logprobs"].([]any)
		want, _ := recs[i]["logprobs"].([]any)
		if row["key"] != recs[i]["key"] || len(got) != len(want) || len(got) == 0 {
			t.Fatalf("row %d (%v): %d entries, the record %d", i, row["key"], len(got), len(want))
		}
		for k, e := range got {
			m := e.(map[string]any)
			at := int(m["message"].(float64))
			if msgs[at].(map[string]any)["role"] != "assistant" {
				t.Errorf("row %d entry %d names message %d, a %v", i, k, at, msgs[at].(map[string]any)["role"])
			}
			w := want[k].(map[string]any)
			if fmt.Sprint(m["tokens"]) != fmt.Sprint(w["tokens"]) || fmt.Sprint(m["token_ids"]) != fmt.Sprint(w["token_ids"]) {
				t.Errorf("row %d entry %d differs from the record's", i, k)
			}
		}
	}
}

// readJSONL reads every line of a JSONL file as an object.
func readJSONL(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, m)
	}
	return out
}

// TestSWELogprobs: swe shares generate's --logprobs; its record keeps one
// entry per gpt turn, each with as many tokens as logprobs.
func TestSWELogprobs(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	base := startFake(t, fakellm.Config{}, `{"scripts": [{"match": "^Create hello.py", "steps": [
 {"tool_calls": [{"name": "terminal", "arguments": {"command": "printf 'print(1)\\n' > hello.py"}}]},
 {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo MINI_SWE_AGENT_FINAL_OUTPUT; echo created hello.py"}}]}]}]}`)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, errs := hpSWE(t, "swe", "--task", "Create hello.py that prints 1", "--out", out, "--base-url", base, "--model", "fake",
		"--sandbox", "local", "--progress", "none", "--logprobs")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, errs)
	}
	recs := catRecords(t, out)
	if len(recs) != 1 || recs[0]["outcome"] != "resolved" {
		t.Fatalf("records %v", recs)
	}
	conv := recs[0]["conversations"].([]any)
	lps, _ := recs[0]["logprobs"].([]any)
	gpt := 0
	for _, tn := range conv {
		if tn.(map[string]any)["from"] == "gpt" {
			gpt++
		}
	}
	if gpt != 2 || len(lps) != gpt {
		t.Fatalf("%d gpt turns, %d logprobs entries", gpt, len(lps))
	}
	for _, e := range lps {
		m := e.(map[string]any)
		at := int(m["turn"].(float64))
		if conv[at].(map[string]any)["from"] != "gpt" || len(m["tokens"].([]any)) == 0 || len(m["tokens"].([]any)) != len(m["logprobs"].([]any)) {
			t.Errorf("entry %v", m)
		}
	}
}
