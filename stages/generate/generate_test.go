package generate_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/fake"
	"github.com/hermes-pipe/hermes-pipe/sandbox/local"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/generate"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// The tests set options field by field rather than with a composite literal,
// so they keep compiling when run-wide fields move into an embedded struct.

const echoScript = `{"scripts": [{"match": "^echo (.*)$", "steps": [
  {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo {{m1}}"}}]},
  {"content": "printed {{m1}}"}]}]}`

// startFake serves fakellm with cfg (and scriptJSON, when set) on loopback.
func startFake(t *testing.T, cfg fakellm.Config, scriptJSON string) (*fakellm.Server, string) {
	t.Helper()
	if scriptJSON != "" {
		s, err := fakellm.ParseScripts([]byte(scriptJSON))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Scripts = s
	}
	fs := fakellm.New(cfg)
	srv := httptest.NewServer(fs)
	t.Cleanup(srv.Close)
	return fs, srv.URL + "/v1"
}

// newClient returns an LLM client for url with fast retries and generous
// timeouts (the timeouts are not what these tests are about).
func newClient(t *testing.T, url string, retries int) llm.Client {
	t.Helper()
	c, err := llm.New(llm.Options{BaseURL: url, Model: "m", MaxRetries: retries,
		BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond, RequestTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writePrompts(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "prompts.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// options returns the options of a run over prompts into out, with the
// terminal toolset, the fake sandbox and a client of url.
func options(t *testing.T, url, prompts, out string) generate.Options {
	t.Helper()
	var o generate.Options
	o.Prompts = prompts
	o.Out = out
	o.Workers = 4
	o.CommitInterval = 10 * time.Millisecond
	o.ToolVersion = "test"
	o.Rollout.Client = newClient(t, url, 1)
	o.Rollout.Model = "m"
	o.Rollout.Driver = fake.New()
	o.Rollout.Toolsets = []string{"terminal"}
	return o
}

// records returns the live records of the output folder dir (pipeline.Cat).
func records(t *testing.T, dir string) []schemas.Record {
	t.Helper()
	var buf bytes.Buffer
	if err := pipeline.Cat(dir, &buf); err != nil {
		t.Fatalf("cat %s: %v", dir, err)
	}
	var recs []schemas.Record
	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var r schemas.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("cat line %q: %v", sc.Bytes(), err)
		}
		recs = append(recs, r)
	}
	return recs
}

// rejects returns the lines of the folder's rejects.jsonl.
func rejects(t *testing.T, dir string) []schemas.Reject {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, pipeline.RejectsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []schemas.Reject
	for _, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var r schemas.Reject
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("rejects line %q: %v", l, err)
		}
		out = append(out, r)
	}
	return out
}

// mustVerify fails t unless pipeline.Verify finds the folder whole.
func mustVerify(t *testing.T, dir string) {
	t.Helper()
	rep, err := pipeline.Verify(dir)
	if err != nil {
		t.Fatalf("verify %s: %v", dir, err)
	}
	if !rep.OK() {
		var b strings.Builder
		_ = rep.WriteText(&b)
		t.Fatalf("verify %s:\n%s", dir, b.String())
	}
}

// turnText joins a record's conversation for substring checks.
func turnText(r schemas.Record) string {
	var b strings.Builder
	for _, tu := range r.Conversations {
		b.WriteString(tu.From + ": " + tu.Value + "\n")
	}
	return b.String()
}

func TestRunRefusesIncompleteOptionsBeforeAnyWork(t *testing.T) {
	fs, url := startFake(t, fakellm.Config{}, echoScript)
	prompts := writePrompts(t, `{"prompt": "echo hi"}`)
	cases := []struct {
		name  string
		edit  func(o *generate.Options)
		wants string
	}{
		{"no prompts", func(o *generate.Options) { o.Prompts = "" }, "prompts file and output folder are required"},
		{"no output", func(o *generate.Options) { o.Out = "" }, "prompts file and output folder are required"},
		{"no client", func(o *generate.Options) { o.Rollout.Client = nil }, "no LLM client"},
		{"no driver", func(o *generate.Options) { o.Rollout.Driver = nil }, "no sandbox driver"},
		{"no model", func(o *generate.Options) { o.Rollout.Model = "" }, "no model name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			o := options(t, url, prompts, out)
			tc.edit(&o)
			_, err := generate.Run(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), tc.wants) {
				t.Fatalf("err = %v, want one saying %q", err, tc.wants)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused run created its output folder (%v)", err)
			}
		})
	}
	if n := fs.Stats().Requests; n != 0 {
		t.Fatalf("refused runs made %d model calls", n)
	}
}

// TestRunReadyFailureStopsBeforeAnyModelCall: a driver pre-flight left to
// the run (Rollout.Ready, as generate --resume does) is called once before
// any record, and its error stops the run with no model call.
func TestRunReadyFailureStopsBeforeAnyModelCall(t *testing.T) {
	fs, url := startFake(t, fakellm.Config{}, echoScript)
	prompts := writePrompts(t, `{"prompt": "echo hi"}`, `{"prompt": "echo ho"}`)
	o := options(t, url, prompts, filepath.Join(t.TempDir(), "out"))
	calls := 0
	o.Rollout.Ready = func(context.Context) error {
		calls++
		return errors.New("sandbox pre-flight: cannot confine commands")
	}
	_, err := generate.Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "cannot confine commands") {
		t.Fatalf("err = %v, want the pre-flight's", err)
	}
	if calls != 1 {
		t.Errorf("Ready called %d times, want 1", calls)
	}
	if n := fs.Stats().Requests; n != 0 {
		t.Fatalf("a run whose sandbox failed its pre-flight made %d model calls", n)
	}
}

func TestRunMissingPromptsFileIsAnError(t *testing.T) {
	_, url := startFake(t, fakellm.Config{}, echoScript)
	missing := filepath.Join(t.TempDir(), "nope.jsonl")
	o := options(t, url, missing, filepath.Join(t.TempDir(), "out"))
	if _, err := generate.Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "nope.jsonl") {
		t.Fatalf("err = %v, want one naming the missing file", err)
	}
}

// TestRunWritesRecordsRejectsAndResumes wires the prompts source to the
// rollout stage on the runtime: every (row, sample) ends as one completed
// record with the tool result in its conversation, a bad line becomes a
// reject naming file, line and field, the folder verifies, and a resume
// skips every done record without a model call.
func TestRunWritesRecordsRejectsAndResumes(t *testing.T) {
	fs, url := startFake(t, fakellm.Config{}, echoScript)
	prompts := writePrompts(t,
		`{"prompt": "echo alpha"}`,
		`{"prompt": 7}`,
		`{"prompt": "echo beta", "id": "b"}`,
		``,
		`{"prompt": "echo alpha"}`, // a duplicated prompt is a row of its own
	)
	out := filepath.Join(t.TempDir(), "out")
	o := options(t, url, prompts, out)
	o.Samples = 2
	driver := fake.New()
	o.Rollout.Driver = driver
	res, err := generate.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	if s.Read != 6 || s.Written != 6 || s.OK != 6 || s.Failed != 0 || s.Rejected != 1 || res.NothingToDo || pipeline.ExitCode(s) != pipeline.ExitFailedRows {
		t.Fatalf("summary %+v (nothing to do %v), exit %d", s, res.NothingToDo, pipeline.ExitCode(s))
	}
	recs := records(t, out)
	if len(recs) != 6 {
		t.Fatalf("%d records, want 6", len(recs))
	}
	keys := map[string]bool{}
	for i, r := range recs {
		row, sample := i/2, i%2
		word := []string{"alpha", "beta", "alpha"}[row]
		if r.Outcome != schemas.OutcomeCompleted || r.Sample != sample || keys[r.Key] {
			t.Errorf("record %d: outcome %s sample %d key %q (seen %v)", i, r.Outcome, r.Sample, r.Key, keys[r.Key])
		}
		keys[r.Key] = true
		text := turnText(r)
		if !strings.Contains(text, "printed "+word) || !strings.Contains(text, `"command": "echo `+word+`"`) {
			t.Errorf("record %d conversation lacks the %s tool call and answer:\n%s", i, word, text)
		}
	}
	if recs[2].ID != "b" || recs[0].PromptIndex == recs[4].PromptIndex {
		t.Errorf("ids and row positions not kept: %+v / %d %d", recs[2].ID, recs[0].PromptIndex, recs[4].PromptIndex)
	}
	rj := rejects(t, out)
	if len(rj) != 1 || rj[0].Line != 2 || rj[0].Field != "prompt" || !strings.HasSuffix(rj[0].File, "prompts.jsonl") || rj[0].Raw != `{"prompt": 7}` {
		t.Fatalf("rejects %+v", rj)
	}
	var cmds []string
	for _, c := range driver.Calls() {
		cmds = append(cmds, c.Command)
	}
	slices.Sort(cmds)
	if want := []string{"echo alpha", "echo alpha", "echo alpha", "echo alpha", "echo beta", "echo beta"}; !slices.Equal(cmds, want) {
		t.Fatalf("sandbox commands %q, want %q", cmds, want)
	}
	mustVerify(t, out)

	calls := fs.Stats().Requests
	o.Mode = pipeline.ModeResume
	res, err = generate.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	// The bad line is rejected again, so the run is not "nothing to do".
	if res.NothingToDo || res.PreviouslyDone != 6 || res.Summary.Skipped != 6 || res.Summary.Processed != 0 || res.Summary.Rejected != 1 {
		t.Fatalf("resume: nothing to do %v, previously %d, summary %+v", res.NothingToDo, res.PreviouslyDone, res.Summary)
	}
	if n := fs.Stats().Requests; n != calls {
		t.Fatalf("resume of a finished run made %d model calls", n-calls)
	}
	mustVerify(t, out)

	// A fresh run refuses the used folder and leaves it as it was.
	o.Mode = pipeline.ModeFresh
	if _, err := generate.Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Fatalf("fresh run into a used folder: %v", err)
	}
	if len(records(t, out)) != 6 {
		t.Fatal("the refused fresh run changed the folder")
	}
	mustVerify(t, out)
}

// TestRunModelFailureIsARetryableRecord: a model that always answers 500
// gives api_error records (failed, retryable), not a fatal error; a resume
// against a healthy model completes them, and one more finds nothing to do.
func TestRunModelFailureIsARetryableRecord(t *testing.T) {
	_, bad := startFake(t, fakellm.Config{Fail500: 1, MaxFaults: -1}, echoScript)
	prompts := writePrompts(t, `{"prompt": "echo one"}`, `{"prompt": "echo two"}`)
	out := filepath.Join(t.TempDir(), "out")
	o := options(t, bad, prompts, out)
	res, err := generate.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.Failed != 2 || res.Summary.OK != 0 || pipeline.ExitCode(res.Summary) != pipeline.ExitFailedRows {
		t.Fatalf("summary %+v exit %d", res.Summary, pipeline.ExitCode(res.Summary))
	}
	for _, r := range records(t, out) {
		if r.Outcome != schemas.OutcomeAPIError || !r.Outcome.Retryable() || r.Error == "" {
			t.Fatalf("record %s: %s (%s)", r.Key, r.Outcome, r.Error)
		}
	}
	mustVerify(t, out)

	_, good := startFake(t, fakellm.Config{}, echoScript)
	o = options(t, good, prompts, out)
	o.Mode = pipeline.ModeResume
	res, err = generate.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.Processed != 2 || res.Summary.OK != 2 || res.NothingToDo {
		t.Fatalf("resume summary %+v", res.Summary)
	}
	for _, r := range records(t, out) {
		if r.Outcome != schemas.OutcomeCompleted {
			t.Fatalf("record %s after resume: %s", r.Key, r.Outcome)
		}
	}
	mustVerify(t, out)

	// Everything is done now: a further resume has nothing to do.
	res, err = generate.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.NothingToDo || res.PreviouslyDone != 2 || res.Summary.Processed != 0 {
		t.Fatalf("second resume: nothing to do %v, previously %d, summary %+v", res.NothingToDo, res.PreviouslyDone, res.Summary)
	}
	mustVerify(t, out)
}

// TestRunImagePreflight: CheckImages is asked once, before any model call,
// with every distinct image (and the default); rows whose image is missing
// end sandbox_error with the reason, cost no model call, and are retried by
// --resume (as in every mode that runs images). A row without an image when
// no default is set is rejected as it is read (rejects.jsonl, field image).
func TestRunImagePreflight(t *testing.T) {
	prompts := writePrompts(t,
		`{"prompt": "echo good", "image": "img/good"}`,
		`{"prompt": "echo bad", "image": "img/bad"}`,
		`{"prompt": "echo none"}`,
		`{"prompt": "echo good again", "image": "img/good"}`,
	)
	type call struct{ images []string }
	for _, tc := range []struct {
		name         string
		defaultImage string
		wantAsked    []string          // distinct, sorted
		wantDone     []string          // words of the rows that ran
		wantFailed   map[string]string // word of the row -> error prefix
		wantRejected int
	}{
		{"no default", "", []string{"img/bad", "img/good"}, []string{"good", "good again"},
			map[string]string{"bad": "image unavailable: img/bad: not here"}, 1},
		{"default present", "img/good", []string{"img/bad", "img/good"}, []string{"good", "none", "good again"},
			map[string]string{"bad": "image unavailable: img/bad: not here"}, 0},
		{"default missing", "img/bad", []string{"img/bad", "img/good"}, []string{"good", "good again"},
			map[string]string{"bad": "image unavailable: img/bad: not here", "none": "image unavailable: img/bad: not here"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, url := startFake(t, fakellm.Config{}, `{"scripts": [{"match": "^echo (.*)$", "steps": [{"content": "did {{m1}}"}]}]}`)
			out := filepath.Join(t.TempDir(), "out")
			o := options(t, url, prompts, out)
			o.DefaultImage = tc.defaultImage
			var mu sync.Mutex
			var calls []call
			o.CheckImages = func(_ context.Context, images []string) map[string]error {
				mu.Lock()
				defer mu.Unlock()
				if n := fs.Stats().Requests; n != 0 {
					t.Errorf("images checked after %d model calls", n)
				}
				calls = append(calls, call{slices.Clone(images)})
				return map[string]error{"img/bad": errors.New("not here")}
			}
			res, err := generate.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			var asked []string
			if len(calls) == 1 {
				asked = slices.Compact(slices.Sorted(slices.Values(calls[0].images)))
			}
			if len(calls) != 1 || !slices.Equal(asked, tc.wantAsked) {
				t.Fatalf("CheckImages calls %+v, want one with %q", calls, tc.wantAsked)
			}
			if res.MissingImages["img/bad"] == nil {
				t.Errorf("MissingImages %v lacks img/bad", res.MissingImages)
			}
			var done []string
			failed := map[string]string{}
			words := []string{"good", "bad", "none", "good again"} // by prompt index
			for _, r := range records(t, out) {
				word := words[r.PromptIndex]
				switch r.Outcome {
				case schemas.OutcomeCompleted:
					done = append(done, word)
				case schemas.OutcomeSandboxError:
					failed[word] = r.Error
				default:
					t.Errorf("record %s: %s", r.Key, r.Outcome)
				}
			}
			if !slices.Equal(done, tc.wantDone) {
				t.Errorf("rows run %q, want %q", done, tc.wantDone)
			}
			if n := fs.Stats().Requests; n != int64(len(tc.wantDone)) {
				t.Errorf("%d model calls for %d rows", n, len(tc.wantDone))
			}
			for word, want := range tc.wantFailed {
				if !strings.HasPrefix(failed[word], want) {
					t.Errorf("row %q failed with %q, want %q…", word, failed[word], want)
				}
			}
			if len(failed) != len(tc.wantFailed) || res.Summary.Failed != len(tc.wantFailed) || res.Summary.Rejected != tc.wantRejected {
				t.Errorf("failed %v (summary %d failed, %d rejected), want %d failed, %d rejected", failed, res.Summary.Failed, res.Summary.Rejected, len(tc.wantFailed), tc.wantRejected)
			}
			rejects, _ := os.ReadFile(filepath.Join(out, pipeline.RejectsFile))
			if got := strings.Count(string(rejects), `"field":"image"`); got != tc.wantRejected ||
				tc.wantRejected > 0 && !strings.Contains(string(rejects), "names no image") {
				t.Errorf("rejects.jsonl holds %d image rejects, want %d:\n%s", got, tc.wantRejected, rejects)
			}
			mustVerify(t, out)
		})
	}
}

// TestRunFilterKeepsOnlyAcceptedRecords: Filter (the shard split) decides
// which records run; the others are neither written nor counted as done.
func TestRunFilterKeepsOnlyAcceptedRecords(t *testing.T) {
	fs, url := startFake(t, fakellm.Config{}, echoScript)
	var lines []string
	for i := range 6 {
		lines = append(lines, fmt.Sprintf(`{"prompt": "echo r%d"}`, i))
	}
	out := filepath.Join(t.TempDir(), "out")
	o := options(t, url, writePrompts(t, lines...), out)
	o.Filter = func(rec *schemas.Record) bool { return rec.PromptIndex%3 == 0 }
	res, err := generate.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	recs := records(t, out)
	if len(recs) != 2 || recs[0].PromptIndex != 0 || recs[1].PromptIndex != 3 || res.Summary.Written != 2 {
		t.Fatalf("records %d (%+v), summary %+v", len(recs), recs, res.Summary)
	}
	if n := fs.Stats().Requests; n != 4 { // two model calls per echo rollout
		t.Fatalf("%d model calls, want 4", n)
	}
	mustVerify(t, out)
}

// TestRunStopBeforeStartIsInterrupted: a closed Stop reads no input and
// reports an interrupted run with an output folder that verifies.
func TestRunStopBeforeStartIsInterrupted(t *testing.T) {
	fs, url := startFake(t, fakellm.Config{}, echoScript)
	out := filepath.Join(t.TempDir(), "out")
	o := options(t, url, writePrompts(t, `{"prompt": "echo a"}`, `{"prompt": "echo b"}`), out)
	stop := make(chan struct{})
	close(stop)
	o.Stop = stop
	res, err := generate.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Summary.Interrupted || res.Summary.Written != 0 || pipeline.ExitCode(res.Summary) != pipeline.ExitInterrupted || res.NothingToDo {
		t.Fatalf("summary %+v, nothing to do %v", res.Summary, res.NothingToDo)
	}
	if n := fs.Stats().Requests; n != 0 {
		t.Fatalf("%d model calls after a stop", n)
	}
	mustVerify(t, out)
}

// TestRunParquetFormat writes the same run as Parquet: same records, and the
// folder verifies.
func TestRunParquetFormat(t *testing.T) {
	_, url := startFake(t, fakellm.Config{}, echoScript)
	prompts := writePrompts(t, `{"prompt": "echo p"}`, `{"prompt": "echo q"}`)
	var texts [2][]string
	for i, format := range []string{"jsonl", "parquet"} {
		out := filepath.Join(t.TempDir(), format)
		o := options(t, url, prompts, out)
		o.Format = format
		o.Workers = 1
		if _, err := generate.Run(context.Background(), o); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		mustVerify(t, out)
		for _, r := range records(t, out) {
			texts[i] = append(texts[i], r.Key+"\n"+turnText(r))
		}
		if format == "parquet" {
			if shards, _ := filepath.Glob(filepath.Join(out, "*", "*.parquet")); len(shards) == 0 {
				t.Fatal("no Parquet shard written")
			}
		}
	}
	if len(texts[0]) != 2 || !slices.Equal(texts[0], texts[1]) {
		t.Fatalf("jsonl and parquet runs differ:\n%q\n%q", texts[0], texts[1])
	}
}

// TestRunWithLocalSandbox runs the commands for real in the local sandbox.
func TestRunWithLocalSandbox(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("bash is not installed; CI requires the local sandbox test: %v", err)
		}
		t.Skip("bash not installed")
	}
	script := `{"scripts": [{"match": "^count$", "steps": [
	  {"tool_calls": [{"name": "terminal", "arguments": {"command": "printf '%s-%s' $((6*7)) \"$(basename \"$HOME\")\""}}]},
	  {"content": "counted"}]}]}`
	_, url := startFake(t, fakellm.Config{}, script)
	out := filepath.Join(t.TempDir(), "out")
	o := options(t, url, writePrompts(t, `{"prompt": "count"}`), out)
	d, err := local.New(sandbox.Config{RunID: "generate-test", Local: sandbox.LocalConfig{BaseDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	o.Rollout.Driver = d
	o.Rollout.RunID = "generate-test"
	res, err := generate.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	recs := records(t, out)
	if res.Summary.OK != 1 || len(recs) != 1 || recs[0].Outcome != schemas.OutcomeCompleted {
		t.Fatalf("summary %+v records %+v", res.Summary, recs)
	}
	if text := turnText(recs[0]); !strings.Contains(text, "42-") || !strings.Contains(text, "counted") {
		t.Fatalf("the command did not run in the local sandbox:\n%s", text)
	}
	mustVerify(t, out)
}

// TestTimingsAddUpToDuration runs rows against a model with a latency and a
// terminal command that takes time in the local sandbox: each record's
// timings must be there, and over the run model + tool + sandbox start and
// close (+ grader) must add up to duration_ms within 5 % (queue_ms is the
// wait before the rollout began and is not part of duration_ms). The sums
// cover seconds of latency, so the few milliseconds of the rollout's own
// bookkeeping stay far below the 5 % even on a loaded machine.
func TestTimingsAddUpToDuration(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("bash is not installed; CI requires the local sandbox test: %v", err)
		}
		t.Skip("bash not installed")
	}
	script := `{"scripts": [{"match": "^work", "steps": [
	  {"tool_calls": [{"name": "terminal", "arguments": {"command": "sleep 0.15; echo one"}}]},
	  {"tool_calls": [{"name": "terminal", "arguments": {"command": "sleep 0.15; echo two"}}]},
	  {"content": "worked"}]},
	  {"match": "^chat", "steps": [{"content": "hello"}]}]}`
	_, url := startFake(t, fakellm.Config{Latency: 150 * time.Millisecond}, script)
	out := filepath.Join(t.TempDir(), "out")
	lines := []string{`{"prompt": "chat"}`}
	for i := 0; i < 5; i++ {
		lines = append(lines, fmt.Sprintf(`{"prompt": "work %d"}`, i))
	}
	o := options(t, url, writePrompts(t, lines...), out)
	o.Workers = 2 // rows wait for a worker: queue_ms
	d, err := local.New(sandbox.Config{RunID: "timings-test", Local: sandbox.LocalConfig{BaseDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	o.Rollout.Driver = d
	o.Rollout.RunID = "timings-test"
	if _, err := generate.Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	recs := records(t, out)
	if len(recs) != len(lines) {
		t.Fatalf("%d records, want %d", len(recs), len(lines))
	}
	var parts, dur, queue int64
	for _, r := range recs {
		tm := r.Timings
		if r.Outcome != schemas.OutcomeCompleted || tm == nil {
			t.Fatalf("record %s: outcome %s, timings %+v: %s", r.Key, r.Outcome, tm, r.Error)
		}
		// The chat row runs no command: no sandbox, no tool time; every
		// other row ran two.
		chat := strings.Contains(turnText(r), "hello")
		if chat && (tm.SandboxStartMS != 0 || tm.ToolMS != 0) || !chat && tm.ToolMS == 0 {
			t.Fatalf("record %s: timings %+v", r.Key, tm)
		}
		parts += tm.ModelMS + tm.ToolMS + tm.SandboxStartMS + tm.SandboxCloseMS + tm.GraderMS
		dur += r.DurationMS
		queue += tm.QueueMS
	}
	t.Logf("over %d records: parts %d ms, duration %d ms, queue %d ms", len(recs), parts, dur, queue)
	if diff := dur - parts; diff < 0 || diff*20 > dur {
		t.Fatalf("model+tool+sandbox_start+sandbox_close+grader = %d ms over the run, duration_ms %d: more than 5%% apart", parts, dur)
	}
	if queue == 0 {
		t.Fatalf("6 rows on 2 workers, yet no record waited for one: queue_ms all 0")
	}
	mustVerify(t, out)
}
