package view

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// gradedFolder writes 12 records through the runtime, by i%4: ungraded,
// passed (reward 1), failed (reward 0.25), and a grader that failed
// (reward null).
func gradedFolder(t *testing.T, format string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "out")
	var recs []*schemas.Record
	for i := range 12 {
		r := &schemas.Record{Key: fmt.Sprintf("k%02d", i), PromptIndex: i / 4, Sample: i % 4, Outcome: schemas.OutcomeCompleted, Completed: true,
			Conversations: []schemas.Turn{{From: "human", Value: "question"}, {From: "gpt", Value: "answer"}}}
		yes, no := true, false
		one, quarter := 1.0, 0.25
		switch i % 4 {
		case 1:
			r.Reward, r.Grade = &one, &schemas.Grade{Grader: "cmd", Passed: &yes, Value: &one, Output: "ok\n", DurationMS: 12}
		case 2:
			r.Reward, r.Grade = &quarter, &schemas.Grade{Grader: "number", Passed: &no, Value: &quarter}
		case 3:
			r.Grade = &schemas.Grade{Grader: "cmd", Error: "verify timed out after 5m", DurationMS: 300000}
		}
		recs = append(recs, r)
	}
	writeRun(t, dir, pipeline.OutputOptions{Kind: "generate", Format: format, MaxShardRows: 5}, 3, recs)
	return dir
}

// TestRewardInListAndFilters: the list shows each record's reward and grade,
// filters by grade and reward range, sorts by reward, and its meta counts
// the graded records; a record read while the index builds is filtered the
// same way (oneRecord).
func TestRewardInListAndFilters(t *testing.T) {
	for _, format := range []string{pipeline.FormatJSONL, pipeline.FormatParquet} {
		s := serve(t, gradedFolder(t, format))
		ix := s.idx()
		keys := func(qs string) string {
			t.Helper()
			q, err := parseQuery(httptest.NewRequest("GET", "/?"+qs, nil))
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.Find(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			m, _ := s.matcher(q)
			var out []string
			for _, r := range res.Rows {
				f := ix.fields(r.I)
				one, ok := newIndexFilter(oneRecord(&f), q)
				if !ok || !one.match(0) || !m(r.I) {
					t.Errorf("%s: row %s matched the index but not its own fields", qs, r.Key)
				}
				reward := "-"
				if r.Reward != nil {
					reward = fmt.Sprint(*r.Reward)
				}
				out = append(out, r.Key+":"+r.Grade+":"+reward)
			}
			return strings.Join(out, " ")
		}
		for qs, want := range map[string]string{
			"grade=passed":                "k01:passed:1 k05:passed:1 k09:passed:1",
			"grade=failed":                "k02:failed:0.25 k06:failed:0.25 k10:failed:0.25",
			"grade=errored":               "k03:errored:- k07:errored:- k11:errored:-",
			"grade=ungraded":              "k00::- k04::- k08::-",
			"grade=graded&reward_min=0.5": "k01:passed:1 k05:passed:1 k09:passed:1",
			"reward_max=0.5":              "k02:failed:0.25 k06:failed:0.25 k10:failed:0.25",
			"reward_min=-1&reward_max=2":  "k01:passed:1 k02:failed:0.25 k05:passed:1 k06:failed:0.25 k09:passed:1 k10:failed:0.25",
			"grade=passed&reward_max=0.5": "",
		} {
			if got := keys(qs); got != want {
				t.Errorf("%s %s: %s\nwant %s", format, qs, got, want)
			}
		}
		// Sorted by reward, descending: no reward (NaN) last; ties in any order.
		var rewards []string
		for _, r := range strings.Fields(keys("sort=-reward")) {
			rewards = append(rewards, r[strings.LastIndexByte(r, ':')+1:])
		}
		if got := strings.Join(rewards, " "); got != "1 1 1 0.25 0.25 0.25 - - - - - -" {
			t.Errorf("%s: sort=-reward gives rewards %s", format, got)
		}
		if got := len(strings.Fields(keys("grade=graded"))); got != 9 {
			t.Errorf("%s: %d graded records, want 9", format, got)
		}
		if _, err := parseQuery(httptest.NewRequest("GET", "/?grade=great", nil)); !errors.Is(err, errBadQuery) {
			t.Errorf("grade=great: %v", err)
		}
		if _, err := parseQuery(httptest.NewRequest("GET", "/?reward_min=high", nil)); !errors.Is(err, errBadQuery) {
			t.Errorf("reward_min=high: %v", err)
		}
		if g, ok := (indexed{s: s, ix: s.idx()}).meta()["graded"]; !ok || g != 9 {
			t.Errorf("%s: meta graded %v", format, g)
		}
		// The JSON API as the page reads it.
		srv := httptest.NewServer(s.Handler())
		resp, err := srv.Client().Get(srv.URL + "/api/records?grade=errored&size=1")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		var res struct{ Rows []map[string]any }
		if err := json.Unmarshal(b, &res); err != nil || len(res.Rows) != 1 || res.Rows[0]["grade"] != "errored" {
			t.Fatalf("%s: /api/records?grade=errored: %s", format, b)
		}
		if _, has := res.Rows[0]["reward"]; has {
			t.Fatalf("%s: an errored record's row has a reward: %s", format, b)
		}
	}
	// An ungraded run: no graded count in meta, no grade or reward in rows.
	s := serve(t, folder(t))
	if _, ok := (indexed{s: s, ix: s.idx()}).meta()["graded"]; ok {
		t.Error("an ungraded run's meta counts graded records")
	}
	b, _ := json.Marshal(s.row(0))
	if strings.Contains(string(b), "grade") || strings.Contains(string(b), "reward") {
		t.Errorf("an ungraded row: %s", b)
	}
}

// TestPageShowsRewards: the page lists the reward of each graded record,
// filters by grade from its form, and a record's page shows its reward,
// its grade and the grader's output.
func TestPageShowsRewards(t *testing.T) {
	ctx, pageErrors := chromium(t)
	s := serve(t, gradedFolder(t, pipeline.FormatJSONL))
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v (page errors: %v)", what, err, pageErrors())
		}
	}
	eval := func(js string) []string {
		t.Helper()
		r, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return r
	}
	run("load", chromedp.Navigate(srv.URL+"/#/?grade=passed"), chromedp.WaitReady(chromedp.CSS(`body[data-ready="#/?grade=passed"]`)))
	if r := eval(`[...document.querySelectorAll("#records tbody td.reward")].map(td => td.textContent + "/" + td.className)`); strings.Join(r, " ") != "1/n reward ok 1/n reward ok 1/n reward ok" {
		t.Errorf("reward cells of grade=passed: %q", r)
	}
	if r := eval(`[...document.querySelectorAll("#f-grade option")].map(o => o.value)`); strings.Join(r, ",") != ",passed,failed,errored,graded,ungraded" {
		t.Errorf("grade filter options: %q", r)
	}
	// The form's grade select lists the errored records.
	run("filter errored", chromedp.Evaluate[chromedp.Void](`const g = document.querySelector("#f-grade"); g.value = "errored"; g.dispatchEvent(new Event("change", {bubbles: true}))`),
		chromedp.WaitReady(chromedp.CSS(`body[data-ready="#/?grade=errored"]`)))
	if r := eval(`[...document.querySelectorAll("#records tbody td.reward")].map(td => td.textContent)`); strings.Join(r, ",") != "grader error,grader error,grader error" {
		t.Errorf("reward cells of grade=errored: %q", r)
	}
	row := func(key string) int {
		for i := range s.idx().Len() {
			if s.idx().Key(i) == key {
				return i
			}
		}
		t.Fatalf("no record %s", key)
		return -1
	}
	run("open an errored record", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = "#/r/%d"`, row("k03"))), chromedp.WaitVisible(chromedp.CSS("#grade")))
	if r := eval(`[document.querySelector("#reward").textContent, document.querySelector("#grade").textContent]`); r[0] != "null (the grader failed)" || r[1] != "cmd: no verdict · 300000 ms · error: verify timed out after 5m" {
		t.Errorf("errored record: %q", r)
	}
	run("open a passed record", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = "#/r/%d"`, row("k05"))), chromedp.WaitVisible(chromedp.CSS("#grade-output")))
	if r := eval(`[document.querySelector("#reward").textContent, document.querySelector("#reward").className, document.querySelector("#grade").textContent, document.querySelector("#grade-output").textContent]`); strings.Join(r, "|") != "1|ok|cmd: passed · 12 ms|ok\n" {
		t.Errorf("passed record: %q", r)
	}
	if e := pageErrors(); len(e) > 0 {
		t.Errorf("page errors: %v", e)
	}
}
