package view

import (
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// timedFolder writes 10 records with timings (record i: model 100·i ms,
// tool 10·i ms, queue 20 ms, duration exactly model + tool) and one
// without.
func timedFolder(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "out")
	var recs []*schemas.Record
	for i := 0; i <= 10; i++ {
		r := &schemas.Record{Key: fmt.Sprintf("k%02d", i), PromptIndex: i, Outcome: schemas.OutcomeCompleted, Completed: true,
			Conversations: []schemas.Turn{{From: "human", Value: "question"}, {From: "gpt", Value: "answer"}}}
		if i > 0 {
			n := int64(i)
			r.Timings = &schemas.Timings{ModelMS: 100 * n, ToolMS: 10 * n, QueueMS: 20}
			r.DurationMS = 110 * n
		}
		recs = append(recs, r)
	}
	writeRun(t, dir, pipeline.OutputOptions{Kind: "generate", MaxShardRows: 4}, 1, recs) // one worker: record i is k0i
	return dir
}

// TestTimingsAPIAndPage: /api/timings gives the run's parts as `stats`
// computes them, the timings page shows them, a record's page its own.
func TestTimingsAPIAndPage(t *testing.T) {
	dir := timedFolder(t)
	ix, err := BuildIndex([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(ix, dir, "")
	defer s.Close()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	var got struct {
		Timings *pipeline.TimingStatistics `json:"timings"`
	}
	if code, body := getJSON(t, srv, "/api/timings", &got); code != 200 {
		t.Fatalf("/api/timings: %d %s", code, body)
	}
	st, err := pipeline.Stats(dir)
	if err != nil {
		t.Fatal(err)
	}
	tm := got.Timings
	if tm == nil || tm.Records != 10 || tm.WallMS != 6250 || fmt.Sprint(tm.Parts) != fmt.Sprint(st.Timings.Parts) {
		t.Fatalf("api timings %+v, stats %+v", tm, st.Timings)
	}
	if m := tm.Parts[0]; m.Name != pipeline.PartModel || m.TotalMS != 5500 || m.P90MS != 900 || m.MaxMS != 1000 {
		t.Fatalf("model part %+v", m)
	}

	ctx, pageErrors := chromium(t)
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v (page errors: %v)", what, err, pageErrors())
		}
	}
	rows := func() []string {
		t.Helper()
		r, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#timings tr")].map(r => r.innerText)`))
		if err != nil {
			t.Fatalf("read rows: %v", err)
		}
		return r
	}
	run("timings page", chromedp.Navigate(srv.URL+"/#/timings"), chromedp.WaitReady(chromedp.CSS(`body[data-ready="#/timings"]`)))
	r := rows()
	// The header, then model, tool and queue: the parts that took time.
	if len(r) != 4 || !strings.HasPrefix(r[1], "model") || !strings.Contains(r[1], "88.0 %") || !strings.Contains(r[1], "900 ms") ||
		!strings.HasPrefix(r[3], "queue") {
		t.Fatalf("timings rows %q", r)
	}
	run("record page", chromedp.Navigate(srv.URL+"/#/r/3"), chromedp.WaitReady(chromedp.CSS(`body[data-ready="#/r/3"]`)))
	rt, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#record-timings")))
	if err != nil {
		t.Fatal(err)
	}
	if rt != "model 300 ms · tool 30 ms · queue 20 ms" {
		t.Fatalf("record timings %q", rt)
	}
	if e := pageErrors(); len(e) > 0 {
		t.Fatalf("page errors: %v", e)
	}
}
