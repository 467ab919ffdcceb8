package compress

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/tidwall/gjson"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// mixedInputs writes n rows over three files (plain, gzip and zstd, the
// second in Python's spaced style); every third row is over budget. It
// returns the paths and the lines in input order.
func mixedInputs(t *testing.T, dir string, n int) ([]string, [][]byte, [][]schemas.Turn) {
	t.Helper()
	var lines [][]byte
	var convs [][]schemas.Turn
	per := [][]byte{nil, nil, nil}
	for i := range n {
		steps, words := 3, 40
		if i%3 == 1 {
			steps, words = 16, 90
		}
		tr := trajectory(uint64(i), steps, words)
		l := row("r"+itoa(i), tr, (i*3)/n == 1)
		lines = append(lines, l)
		convs = append(convs, tr)
		f := (i * 3) / n
		per[f] = append(per[f], l...)
		per[f] = append(per[f], '\n')
	}
	paths := []string{filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl.gz"), filepath.Join(dir, "c.jsonl.zst")}
	mustWrite(t, paths[0], per[0])
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(per[1])
	zw.Close()
	mustWrite(t, paths[1], gz.Bytes())
	enc, _ := zstd.NewWriter(nil)
	mustWrite(t, paths[2], enc.EncodeAll(per[2], nil))
	return paths, lines, convs
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestRunCompressesEveryRowInOrder(t *testing.T) {
	dir := t.TempDir()
	fk, url := fake(t, fakellm.Config{SummaryWords: 60})
	paths, lines, convs := mixedInputs(t, dir, 30)
	out := filepath.Join(dir, "out")
	o := testOptions(t, url, paths, out)
	res, err := Run(bg, o)
	if err != nil {
		t.Fatal(err)
	}
	if code := pipeline.ExitCode(res.Summary); code != 0 {
		t.Fatalf("exit code %d, summary %+v", code, res.Summary)
	}
	got := catLines(t, out)
	if len(got) != len(lines) {
		t.Fatalf("%d output rows for %d input rows", len(got), len(lines))
	}
	tok := cl100k(t)
	compressed := 0
	for i, l := range got {
		r := decode(t, l)
		if r.ID != "r"+itoa(i) {
			t.Fatalf("row %d is %s: output order differs from input order", i, r.ID)
		}
		in := convs[i]
		total := countTurns(tok, in, 4)
		if total <= 1500 {
			if !bytes.Equal(l, lines[i]) {
				t.Errorf("row %d under budget was changed:\n%s\n%s", i, lines[i], l)
			}
			continue
		}
		m := metricsOf(t, r)
		if m["outcome"] != "compressed" {
			t.Errorf("row %d: outcome %v", i, m["outcome"])
			continue
		}
		compressed++
		if n := countTurns(tok, r.Conversations, 4); n > 1500 || n != int(m["compressed_tokens"].(float64)) {
			t.Errorf("row %d: %d tokens after compression (metrics %v), budget 1500", i, n, m["compressed_tokens"])
		}
		// Per-turn counts: the tokenizer's, overhead included, of each turn
		// of the input and of the output, summing to the totals.
		var mt struct {
			Orig []int `json:"original_turn_tokens"`
			Comp []int `json:"compressed_turn_tokens"`
		}
		if err := json.Unmarshal(r.Metrics, &mt); err != nil {
			t.Fatal(err)
		}
		for side, c := range map[string]struct {
			got   []int
			turns []schemas.Turn
		}{"original": {mt.Orig, in}, "compressed": {mt.Comp, r.Conversations}} {
			if len(c.got) != len(c.turns) {
				t.Errorf("row %d: %d %s turn counts for %d turns", i, len(c.got), side, len(c.turns))
				continue
			}
			for k, tt := range c.turns {
				if want := tok.Count(tt.Value) + 4; c.got[k] != want {
					t.Errorf("row %d: %s turn %d counted %d, want %d", i, side, k, c.got[k], want)
				}
			}
		}
		// Fields keep their order; compression_metrics comes last.
		var keys []string
		gjson.ParseBytes(l).ForEach(func(k, _ gjson.Result) bool { keys = append(keys, k.Str); return true })
		if strings.Join(keys, ",") != "id,conversations,meta,compression_metrics" {
			t.Errorf("row %d: fields %v", i, keys)
		}
		var mkeys []string
		gjson.GetBytes(l, "compression_metrics").ForEach(func(k, _ gjson.Result) bool { mkeys = append(mkeys, k.Str); return true })
		if strings.Join(mkeys[:8], ",") != "original_tokens,compressed_tokens,tokens_saved,compression_ratio,original_turns,compressed_turns,turns_removed,compression_region" {
			t.Errorf("row %d: metrics fields %v", i, mkeys)
		}
		// Protected turns: the head and the last four, byte for byte.
		if r.Conversations[0].Value != in[0].Value+DefaultNotice {
			t.Errorf("row %d: system turn %q", i, r.Conversations[0].Value)
		}
		for k := 1; k < 4; k++ {
			if r.Conversations[k] != in[k] {
				t.Errorf("row %d: protected turn %d changed", i, k)
			}
		}
		for k := 1; k <= 4; k++ {
			if r.Conversations[len(r.Conversations)-k] != in[len(in)-k] {
				t.Errorf("row %d: protected tail turn -%d changed", i, k)
			}
		}
		for k, tt := range r.Conversations {
			if strings.HasPrefix(tt.Value, SummaryPrefix) && (tt.From != "human" || r.Conversations[k+1].From == "tool") {
				t.Errorf("row %d: summary turn %d is %s followed by %s", i, k, tt.From, r.Conversations[k+1].From)
			}
		}
		if spaced := bytes.Contains(lines[i], []byte(`"from": `)); spaced != bytes.Contains(l, []byte(`{"from": "human", "value": "[CONTEXT SUMMARY]:`)) {
			t.Errorf("row %d: the summary turn does not follow the line's style", i)
		}
	}
	if compressed != 10 {
		t.Errorf("%d rows compressed, want 10", compressed)
	}
	if st := fk.Stats(); st.Requests != int64(compressed) {
		t.Errorf("fakellm saw %d requests for %d compressed rows", st.Requests, compressed)
	}
	rep, err := readReport(out)
	if err != nil || rep == nil {
		t.Fatalf("metrics file: %v", err)
	}
	if rep.Summary.TotalTrajectories != 30 || rep.Summary.TrajectoriesCompressed != 10 || rep.Summary.SkippedUnderTarget != 20 ||
		rep.Summarization.TotalAPICalls != 10 || rep.Outcomes["compressed"] != 10 {
		t.Errorf("aggregate %+v", rep)
	}
	verifyOK(t, out)
	// The inputs are recorded, absolute, so a reader finds the originals.
	var ins inputsDoc
	if b, err := os.ReadFile(filepath.Join(out, InputsFile)); err != nil || json.Unmarshal(b, &ins) != nil {
		t.Fatalf("%s: %v %s", InputsFile, err, b)
	}
	if len(ins.Inputs) != len(o.Inputs) {
		t.Fatalf("%s lists %d inputs, want %d: %+v", InputsFile, len(ins.Inputs), len(o.Inputs), ins)
	}
	for k, e := range ins.Inputs {
		if abs, _ := filepath.Abs(o.Inputs[k].Path); e.Path != abs || e.Name != o.Inputs[k].Name || e.Kind != o.Inputs[k].Kind {
			t.Errorf("%s input %d: %+v, want %+v", InputsFile, k, e, o.Inputs[k])
		}
	}

	// Resume of a finished run: nothing to do, no call.
	o2 := testOptions(t, url, paths, out)
	o2.Mode = pipeline.ModeResume
	res2, err := Run(bg, o2)
	if err != nil {
		t.Fatal(err)
	}
	if !res2.NothingToDo || fk.Stats().Requests != int64(compressed) {
		t.Errorf("resume of a finished run: %+v, %d requests", res2.Summary, fk.Stats().Requests)
	}
	if rep2, _ := readReport(out); rep2.Summary.TotalTrajectories != 30 || rep2.Sums.Runs != 2 {
		t.Errorf("aggregate after resume: %+v", rep2.Summary)
	}
}

func TestSummaryFailuresKeepRowsAndFail(t *testing.T) {
	cases := []struct {
		name string
		cfg  fakellm.Config
		row  func(i int) []schemas.Turn
	}{
		{"500s", fakellm.Config{Fail500: 1, MaxFaults: -1}, nil},
		{"hangs", fakellm.Config{Hang: 1, MaxFaults: -1, HangFor: time.Minute}, nil},
		{"truncates", fakellm.Config{}, func(i int) []schemas.Turn {
			tr := trajectory(uint64(i), 16, 90)
			tr[5].Value += " [[words=5000]]"
			return tr
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			_, url := fake(t, tc.cfg)
			var lines [][]byte
			for i := range 4 {
				tr := trajectory(uint64(i), 16, 90)
				if tc.row != nil {
					tr = tc.row(i)
				}
				lines = append(lines, row("r"+itoa(i), tr, false))
			}
			writeLines(t, filepath.Join(dir, "in.jsonl"), lines)
			out := filepath.Join(dir, "out")
			o := testOptions(t, url, []string{filepath.Join(dir, "in.jsonl")}, out)
			if tc.name == "hangs" {
				o.Summary.Client = client(t, url, 100*time.Millisecond, 1)
			}
			res, err := Run(bg, o)
			if err != nil {
				t.Fatal(err)
			}
			if code := pipeline.ExitCode(res.Summary); code != pipeline.ExitFailedRows || res.Summary.Failed != 4 {
				t.Fatalf("exit code %d, summary %+v", code, res.Summary)
			}
			got := catLines(t, out)
			if len(got) != 4 {
				t.Fatalf("%d rows out of 4", len(got))
			}
			for i, l := range got {
				r := decode(t, l)
				want := decode(t, lines[i])
				if len(r.Conversations) != len(want.Conversations) {
					t.Fatalf("row %d: conversation changed on failure", i)
				}
				for k := range r.Conversations {
					if r.Conversations[k] != want.Conversations[k] {
						t.Fatalf("row %d turn %d changed on failure", i, k)
					}
				}
				if !bytes.Contains(l, []byte(gjson.GetBytes(lines[i], "conversations").Raw)) {
					t.Errorf("row %d: conversations not byte-identical", i)
				}
				m := metricsOf(t, r)
				if m["outcome"] != "summary_failed" || m["error"] == "" || m["summarization_errors"].(float64) < 1 {
					t.Errorf("row %d metrics %v", i, m)
				}
			}
			verifyOK(t, out)
		})
	}
}

func TestResumeAfterKillRepeatsNoPaidCall(t *testing.T) {
	dir := t.TempDir()
	fk, url := fake(t, fakellm.Config{Latency: 40 * time.Millisecond})
	var lines [][]byte
	for i := range 60 {
		lines = append(lines, row("r"+itoa(i), trajectory(uint64(i), 16, 90), false))
	}
	in := filepath.Join(dir, "in.jsonl")
	writeLines(t, in, lines)
	out := filepath.Join(dir, "out")
	o := testOptions(t, url, []string{in}, out)
	o.Workers = 4
	ctx, cancel := context.WithCancel(bg)
	go func() {
		// Kill once some rows are committed.
		for ctx.Err() == nil {
			if data, _ := os.ReadFile(filepath.Join(out, pipeline.LedgerFile)); bytes.Count(data, []byte("\n")) >= 2 {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	res, err := Run(ctx, o)
	cancel()
	if err != nil && !strings.Contains(err.Error(), "context canceled") {
		t.Fatal(err)
	}
	if !res.Summary.Interrupted {
		t.Fatalf("the run was not interrupted: %+v", res.Summary)
	}
	done := len(catLines(t, out))
	if done == 0 || done == 60 {
		t.Fatalf("%d rows done before the kill; the test needs a partial run", done)
	}
	before := fk.Stats().Requests

	o2 := testOptions(t, url, []string{in}, out)
	o2.Mode = pipeline.ModeResume
	res2, err := Run(bg, o2)
	if err != nil {
		t.Fatal(err)
	}
	after := fk.Stats().Requests - before
	if after != int64(60-done) {
		t.Errorf("resume made %d calls for %d unfinished rows (%d were done)", after, 60-done, done)
	}
	if res2.Summary.Skipped != done || len(catLines(t, out)) != 60 {
		t.Errorf("resume skipped %d of %d done; %d rows out", res2.Summary.Skipped, done, len(catLines(t, out)))
	}
	verifyOK(t, out)
}

func TestOverLimitPolicies(t *testing.T) {
	for _, policy := range []string{OverLimitKeep, OverLimitDrop, OverLimitQuarantine} {
		t.Run(policy, func(t *testing.T) {
			dir := t.TempDir()
			fk, url := fake(t, fakellm.Config{})
			// Two steps: every turn is protected, nothing can be summarised.
			lines := [][]byte{row("fits", trajectory(1, 1, 20), false), row("big", trajectory(2, 2, 900), false),
				row("fits2", trajectory(3, 1, 20), false)}
			in := filepath.Join(dir, "in.jsonl")
			writeLines(t, in, lines)
			out := filepath.Join(dir, "out")
			o := testOptions(t, url, []string{in}, out)
			o.OverLimit = policy
			res, err := Run(bg, o)
			if err != nil {
				t.Fatal(err)
			}
			got := catLines(t, out)
			q, _ := os.ReadFile(filepath.Join(out, QuarantineFile))
			switch policy {
			case OverLimitKeep:
				if len(got) != 3 || metricsOf(t, decode(t, got[1]))["outcome"] != "still_over_limit" {
					t.Fatalf("keep: %d rows", len(got))
				}
			case OverLimitDrop, OverLimitQuarantine:
				if len(got) != 2 || res.Summary.Filtered != 1 {
					t.Fatalf("%s: %d rows, summary %+v", policy, len(got), res.Summary)
				}
				rep, _ := readReport(out)
				if rep.Outcomes[map[string]string{"drop": "dropped", "quarantine": "quarantined"}[policy]] != 1 {
					t.Errorf("not counted: %v", rep.Outcomes)
				}
			}
			if policy == OverLimitQuarantine {
				var e QuarantineEntry
				if err := json.Unmarshal(bytes.TrimSpace(q), &e); err != nil || e.Reason != "still_over_limit" ||
					gjson.GetBytes(e.Record, "id").Str != "big" || !gjson.GetBytes(e.Record, "compression_metrics").Exists() {
					t.Errorf("quarantine file %q: %v", q, err)
				}
			} else if len(q) != 0 {
				t.Errorf("quarantine file written under %s", policy)
			}
			if fk.Stats().Requests != 0 {
				t.Errorf("%d calls for rows that cannot be compressed", fk.Stats().Requests)
			}
			// Resume does not redo the dropped or quarantined row.
			o2 := testOptions(t, url, []string{in}, out)
			o2.Mode, o2.OverLimit = pipeline.ModeResume, policy
			res2, err := Run(bg, o2)
			if err != nil || !res2.NothingToDo {
				t.Errorf("resume: %v %+v", err, res2.Summary)
			}
			if q2, _ := os.ReadFile(filepath.Join(out, QuarantineFile)); !bytes.Equal(q, q2) {
				t.Errorf("resume changed the quarantine file")
			}
			verifyOK(t, out)
		})
	}
}

// TestAggregateSurvivesALostMetricsFile: a run killed by SIGKILL never writes
// compression_metrics.json. The next --resume rebuilds the aggregate from the
// row journal, so it equals the aggregate of an uninterrupted run; rows a
// dead run journalled but never committed are not counted.
func TestAggregateSurvivesALostMetricsFile(t *testing.T) {
	dir := t.TempDir()
	_, url := fake(t, fakellm.Config{SummaryWords: 60})
	paths, _, _ := mixedInputs(t, dir, 24)
	full := filepath.Join(dir, "full")
	want, err := Run(bg, testOptions(t, url, paths, full))
	if err != nil {
		t.Fatal(err)
	}
	// Simulate the kill: the metrics file is gone, and the journal holds a
	// line of a row that was in flight (not in the ledger) and a torn line.
	if err := os.Remove(filepath.Join(full, MetricsFile)); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(full, RowsFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"k":"never-committed","m":{"OriginalTokens":99999,"Outcome":"compressed","WasCompressed":true}}` + "\n" + `{"k":"torn`)
	f.Close()
	o := testOptions(t, url, paths, full)
	o.Mode = pipeline.ModeResume
	got, err := Run(bg, o)
	if err != nil {
		t.Fatal(err)
	}
	w, g := want.Metrics, got.Metrics
	if g.Summary != w.Summary || g.Tokens != w.Tokens || g.Turns != w.Turns || g.Summarization.TotalAPICalls != w.Summarization.TotalAPICalls {
		t.Fatalf("rebuilt aggregate differs:\n got %+v %+v %+v\nwant %+v %+v %+v", g.Summary, g.Tokens, g.Turns, w.Summary, w.Tokens, w.Turns)
	}
	if g.Summary.TotalTrajectories != 24 {
		t.Fatalf("total = %d, want 24", g.Summary.TotalTrajectories)
	}
	verifyOK(t, full)
}

// TestRowJournalTornTailThenAppend: a journal whose last line was torn (the
// disk filled or the machine lost power mid-write) is resumed. Rows settled
// by the resumed run are appended after the torn fragment and must still be
// counted, so the rebuilt aggregate equals that of an uninterrupted run.
func TestRowJournalTornTailThenAppend(t *testing.T) {
	dir := t.TempDir()
	_, url := fake(t, fakellm.Config{SummaryWords: 60})
	paths, _, _ := mixedInputs(t, dir, 24)
	want, err := Run(bg, testOptions(t, url, paths, filepath.Join(dir, "full")))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "torn")
	o := testOptions(t, url, paths, out)
	o.Filter = func(rec *schemas.Record) bool { return rec.Key[len(rec.Key)-1]%2 == 0 }
	if _, err := Run(bg, o); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(out, MetricsFile)); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(out, RowsFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"k":"torn`)
	f.Close()
	o = testOptions(t, url, paths, out)
	o.Mode = pipeline.ModeResume
	got, err := Run(bg, o)
	if err != nil {
		t.Fatal(err)
	}
	if got.PreviouslyDone == 0 || got.Summary.Processed == 0 {
		t.Fatalf("the test needs rows from both runs: %d done before, %d processed", got.PreviouslyDone, got.Summary.Processed)
	}
	w, g := want.Metrics, got.Metrics
	if g.Summary != w.Summary || g.Tokens != w.Tokens || g.Turns != w.Turns {
		t.Fatalf("rebuilt aggregate differs:\n got %+v %+v %+v\nwant %+v %+v %+v", g.Summary, g.Tokens, g.Turns, w.Summary, w.Tokens, w.Turns)
	}
	verifyOK(t, out)
}

// TestCompressRemapsLogprobs: a record's logprobs entries (one per gpt
// turn, by index) follow their turns into the compressed conversations;
// the entries of summarised turns are left out, none points at a turn that
// is not the one it was made for.
func TestCompressRemapsLogprobs(t *testing.T) {
	dir := t.TempDir()
	_, url := fake(t, fakellm.Config{SummaryWords: 60})
	turns := trajectory(11, 30, 80)
	var entries []schemas.TurnLogprobs
	for i, tt := range turns {
		if tt.From == "gpt" {
			// The entry names its turn's text, so a wrong index shows.
			entries = append(entries, schemas.TurnLogprobs{Turn: i, Tokens: []string{tt.Value}, Logprobs: []float64{-float64(i)}})
		}
	}
	lp, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	line := row("r0", turns, false)
	line = append(line[:len(line)-1], `,"logprobs":`+string(lp)+`}`...)
	in := filepath.Join(dir, "in.jsonl")
	writeLines(t, in, [][]byte{line})
	out := filepath.Join(dir, "out")
	if _, err := Run(bg, testOptions(t, url, []string{in}, out)); err != nil {
		t.Fatal(err)
	}
	got := catLines(t, out)
	r := decode(t, got[0])
	if len(r.Conversations) >= len(turns) {
		t.Fatalf("the row was not compressed: %d turns", len(r.Conversations))
	}
	var kept []schemas.TurnLogprobs
	if err := json.Unmarshal([]byte(gjson.GetBytes(got[0], "logprobs").Raw), &kept); err != nil {
		t.Fatal(err)
	}
	if len(kept) == 0 || len(kept) >= len(entries) {
		t.Fatalf("%d of %d entries kept; want the protected turns' only", len(kept), len(entries))
	}
	for _, e := range kept {
		if e.Turn >= len(r.Conversations) || r.Conversations[e.Turn].Value != e.Tokens[0] {
			t.Errorf("entry for turn %d does not name that turn", e.Turn)
		}
	}
	// The last gpt turn is always protected, and moved.
	last := entries[len(entries)-1]
	if k := kept[len(kept)-1]; k.Tokens[0] != last.Tokens[0] || k.Turn != len(r.Conversations)-1 {
		t.Errorf("the last turn's entry is at %d, want %d", k.Turn, len(r.Conversations)-1)
	}
}
