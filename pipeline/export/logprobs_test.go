package export

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// logprobsRecords are testRecords with logprobs at every gpt turn (token
// ids on even prompts only) and, on prompt 0, one entry at its human turn,
// which no export keeps.
func logprobsRecords() []*schemas.Record {
	recs := testRecords(6, 2)
	for _, rec := range recs {
		for i, tn := range rec.Conversations {
			if tn.From != "gpt" {
				continue
			}
			lp := schemas.TurnLogprobs{Turn: i, Tokens: []string{rec.Key, "\"q\"\n", ""}, Logprobs: []float64{-0.25, -1e-7, 0}}
			if rec.PromptIndex%2 == 0 {
				lp.TokenIDs = []int64{int64(i), 7, 151643}
			}
			rec.Logprobs = append(rec.Logprobs, lp)
		}
		if rec.PromptIndex == 0 {
			rec.Logprobs = append(rec.Logprobs, schemas.TurnLogprobs{Turn: 1, Tokens: []string{"x"}, Logprobs: []float64{-1}})
		}
	}
	return recs
}

// TestExportLogprobs exports records with logprobs in both formats and
// both file formats: every entry the record kept at a gpt turn is in the
// row, pointing at that reply's assistant message (messages) or gpt turn
// (sharegpt), tokens, logprobs and ids as recorded; the entry at a human
// turn is left out and counted; without --logprobs there is no column.
func TestExportLogprobs(t *testing.T) {
	needInverse(t)
	recs := logprobsRecords()
	src := writeFolder(t, filepath.Join(t.TempDir(), "run"), "run-lp", "", 5, recs)
	byKey := map[string]*schemas.Record{}
	for _, r := range recs {
		byKey[r.Key] = r
	}
	for _, format := range []string{FormatMessages, FormatShareGPT} {
		for _, ff := range []string{FileJSONL, FileParquet} {
			t.Run(format+"/"+ff, func(t *testing.T) {
				to := filepath.Join(t.TempDir(), "x")
				man := run(t, Options{To: to, Format: format, FileFormat: ff, Logprobs: true}, src)
				if man.LogprobsDropped != 2 || !man.Options.Logprobs {
					t.Errorf("dropped %d (want prompt 0's two samples), options %+v", man.LogprobsDropped, man.Options)
				}
				rows := exportedLogprobs(t, to, man.Splits["train"].Files, format, ff)
				if len(rows) != len(recs) {
					t.Fatalf("%d rows", len(rows))
				}
				for _, r := range rows {
					checkExportedLogprobs(t, byKey[r.key], r, format)
				}
				card := treeBytes(t, to)[CardFile]
				if !strings.Contains(card, "- name: logprobs\n") || !strings.Contains(card, "sequence: float64") {
					t.Errorf("card has no logprobs feature:\n%s", card)
				}
			})
		}
	}
	to := filepath.Join(t.TempDir(), "plain")
	man := run(t, Options{To: to, FileFormat: FileJSONL}, src)
	for _, l := range readLines(t, to, man.Splits["train"].Files) {
		if strings.Contains(l, `"logprobs":`) {
			t.Fatalf("logprobs without the option: %s", l)
		}
	}
}

// lpRow is one exported row's key, chat or turns, and logprobs column.
type lpRow struct {
	key   string
	msgs  []schemas.Message
	turns []schemas.Turn
	lps   []schemas.TurnLogprobs // Turn: the message or turn index
}

func exportedLogprobs(t *testing.T, dir string, files []string, format, ff string) []lpRow {
	t.Helper()
	var out []lpRow
	if ff == FileJSONL {
		for _, l := range readLines(t, dir, files) {
			var r struct {
				Key      string            `json:"key"`
				Messages []schemas.Message `json:"messages"`
				Conv     []schemas.Turn    `json:"conversations"`
				Logprobs []struct {
					Message, Turn *int
					Tokens        []string
					Logprobs      []float64
					TokenIDs      []int64 `json:"token_ids"`
				} `json:"logprobs"`
			}
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("%v: %s", err, l)
			}
			row := lpRow{key: r.Key, msgs: r.Messages, turns: r.Conv}
			for _, e := range r.Logprobs {
				at := e.Turn
				if format == FormatMessages {
					at = e.Message
				}
				if at == nil || (e.Message != nil && e.Turn != nil) {
					t.Fatalf("entry index: %s", l)
				}
				row.lps = append(row.lps, schemas.TurnLogprobs{Turn: *at, Tokens: e.Tokens, Logprobs: e.Logprobs, TokenIDs: e.TokenIDs})
			}
			out = append(out, row)
		}
		return out
	}
	if format == FormatMessages {
		for _, r := range readParquet[messagesLogprobsRow](t, dir, files, messagesConfig(), messagesLogprobsSchema()) {
			row := lpRow{key: r.Key, msgs: messagesOf(r.messagesRow)}
			for _, e := range r.Logprobs {
				row.lps = append(row.lps, schemas.TurnLogprobs{Turn: int(e.Message), Tokens: e.Tokens, Logprobs: e.Logprobs, TokenIDs: e.TokenIDs})
			}
			out = append(out, row)
		}
		return out
	}
	for _, r := range readParquet[shareGPTLogprobsRow](t, dir, files, shareGPTConfig(), shareGPTLogprobsSchema()) {
		row := lpRow{key: r.Key}
		for _, tn := range r.Conversations {
			row.turns = append(row.turns, schemas.Turn{From: tn.From, Value: tn.Value})
		}
		for _, e := range r.Logprobs {
			row.lps = append(row.lps, schemas.TurnLogprobs{Turn: int(e.Turn), Tokens: e.Tokens, Logprobs: e.Logprobs, TokenIDs: e.TokenIDs})
		}
		out = append(out, row)
	}
	return out
}

func checkExportedLogprobs(t *testing.T, rec *schemas.Record, r lpRow, format string) {
	t.Helper()
	if rec == nil {
		t.Fatalf("row %s is no record", r.key)
	}
	// The record's entries at gpt turns, in order, and where each must be.
	var want []schemas.TurnLogprobs
	var assistants []int
	for i, m := range r.msgs {
		if m.Role == "assistant" {
			assistants = append(assistants, i)
		}
	}
	gpt := 0
	for i, tn := range rec.Conversations {
		if tn.From != "gpt" {
			continue
		}
		for _, lp := range rec.Logprobs {
			if lp.Turn != i {
				continue
			}
			if format == FormatMessages {
				lp.Turn = assistants[gpt]
			}
			if lp.TokenIDs == nil {
				lp.TokenIDs = []int64{}
			}
			want = append(want, lp)
		}
		gpt++
	}
	got := r.lps
	for i := range got {
		if got[i].TokenIDs == nil {
			got[i].TokenIDs = []int64{}
		}
	}
	if len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("%s: logprobs\n%+v\nwant\n%+v", r.key, got, want)
	}
	if format == FormatShareGPT && r.turns != nil && !reflect.DeepEqual(r.turns, rec.Conversations) {
		t.Errorf("%s: turns changed", r.key)
	}
}

// TestMessageOfTurn: the gpt turns of a record map to their assistant
// messages, with a compressed record's leading system message counted.
func TestMessageOfTurn(t *testing.T) {
	turns := []schemas.Turn{{From: "system"}, {From: "human"}, {From: "gpt"}, {From: "tool"}, {From: "gpt"}, {From: "human"}, {From: "gpt"}}
	msgs := []schemas.Message{{Role: "user"}, {Role: "assistant"}, {Role: "tool"}, {Role: "tool"}, {Role: "assistant"}, {Role: "user"}, {Role: "assistant"}}
	if got := messageOfTurn(turns, msgs); !reflect.DeepEqual(got, []int{-1, -1, 1, -1, 4, -1, 6}) {
		t.Errorf("got %v", got)
	}
	withNotice := append([]schemas.Message{{Role: "system"}}, msgs...)
	if got := messageOfTurn(turns, withNotice); !reflect.DeepEqual(got, []int{-1, -1, 2, -1, 5, -1, 7}) {
		t.Errorf("with a notice: got %v", got)
	}
	if got := messageOfTurn(turns, msgs[:3]); len(got) != 0 {
		t.Errorf("messages that do not line up: got %v", got)
	}
}
