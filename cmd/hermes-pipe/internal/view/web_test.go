package view

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

type keep struct{}

func (keep) Name() string { return "keep" }
func (keep) Process(_ context.Context, r *schemas.Record) ([]*schemas.Record, error) {
	return []*schemas.Record{r}, nil
}

// folder writes 30 records through the runtime: every third an api_error,
// every fifth with a failed terminal call, record 7 mentions a capybara.
// Three workers and two kinds of shard (data and failed) commit them out of
// prompt order: the ledger's order is not the list's.
func folder(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "out")
	var recs []*schemas.Record
	for i := range 30 {
		r := &schemas.Record{Key: "k" + string(rune('A'+i)), PromptIndex: i, Outcome: schemas.OutcomeCompleted, Completed: true,
			Conversations: []schemas.Turn{{From: "human", Value: "question"}, {From: "gpt", Value: "answer"}},
			Usage:         schemas.Usage{TotalTokens: int64(100 + i)}, ToolsetsUsed: []string{"terminal"},
			ToolStats: map[string]schemas.ToolStat{"terminal": {Count: 1, Success: 1}}}
		if i%3 == 0 {
			r.Outcome, r.Completed = schemas.OutcomeAPIError, false
		}
		if i%5 == 0 {
			r.ToolStats["terminal"] = schemas.ToolStat{Count: 2, Success: 1, Failure: 1}
		}
		if i == 7 {
			r.Conversations[0].Value = "tell me about the Capybara"
			c := 0.5
			r.CostUSD = &c
		}
		recs = append(recs, r)
	}
	writeRun(t, dir, pipeline.OutputOptions{Kind: "generate", MaxShardRows: 7}, 3, recs)
	return dir
}

// writeRun writes recs into dir through the runtime with workers workers, as
// a mode would (opt.Mode ModeResume to add to a finished run).
func writeRun(t *testing.T, dir string, opt pipeline.OutputOptions, workers int, recs []*schemas.Record) {
	t.Helper()
	o, err := pipeline.OpenOutput(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	_, err = pipeline.Run(context.Background(), pipeline.Options{Workers: workers}, pipeline.SliceSource(recs), []pipeline.Stage{keep{}}, o)
	if cerr := o.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

func find(t *testing.T, s *Server, q Query) Result {
	t.Helper()
	if q.Size == 0 {
		q.Size = 50
	}
	for _, p := range []*int64{&q.TurnsMin, &q.TurnsMax, &q.TokensMin, &q.TokensMax} {
		if *p == 0 {
			*p = -1
		}
	}
	if q.CostMin == 0 && q.CostMax == 0 {
		q.CostMin, q.CostMax = math.NaN(), math.NaN()
	}
	if q.RewardMin == 0 && q.RewardMax == 0 {
		q.RewardMin, q.RewardMax = math.NaN(), math.NaN()
	}
	res, err := s.Find(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestIndexCachedOutsideTheFolderAndFilters(t *testing.T) {
	dir := folder(t)
	cache := filepath.Join(t.TempDir(), "cache")
	before, _ := os.ReadDir(dir)
	ix, built, warn, err := OpenIndex([]string{dir}, cache)
	if err != nil || warn != nil || !built {
		t.Fatalf("first open: built %v, warn %v, err %v", built, warn, err)
	}
	again, built, _, err := OpenIndex([]string{dir}, cache)
	if err != nil || built {
		t.Fatalf("second open rebuilt (%v) or failed: %v", built, err)
	}
	after, _ := os.ReadDir(dir)
	if len(after) != len(before) {
		t.Fatalf("view wrote into the output folder: %v -> %v", before, after)
	}
	if ents, _ := os.ReadDir(cache); len(ents) != 1 {
		t.Fatalf("cache holds %d files, want 1", len(ents))
	}
	if ix.Len() != 30 || again.Len() != 30 {
		t.Fatalf("records %d / %d", ix.Len(), again.Len())
	}
	for i := range 30 {
		a, b := NewServer(ix, dir, "").row(i), NewServer(again, dir, "").row(i)
		if a.Key != b.Key || a.Outcome != b.Outcome || a.Tokens != b.Tokens || a.Failures != b.Failures || (a.Cost == nil) != (b.Cost == nil) {
			t.Fatalf("row %d differs after loading: %+v vs %+v", i, a, b)
		}
	}
	s := NewServer(again, dir, "")
	defer s.Close()
	if r := find(t, s, Query{Outcome: "api_error"}); r.Total != 10 {
		t.Errorf("api_error: %d, want 10", r.Total)
	}
	if r := find(t, s, Query{Failures: "yes"}); r.Total != 6 {
		t.Errorf("failures: %d, want 6", r.Total)
	}
	if r := find(t, s, Query{Outcome: "api_error", Failures: "yes"}); r.Total != 2 { // 0 and 15
		t.Errorf("api_error with failures: %d, want 2", r.Total)
	}
	if r := find(t, s, Query{TokensMin: 120, TokensMax: 124}); r.Total != 5 {
		t.Errorf("tokens 120..124: %d", r.Total)
	}
	if r := find(t, s, Query{Tool: "web_search"}); r.Total != 0 {
		t.Errorf("unused tool matched %d", r.Total)
	}
	if r := find(t, s, Query{CostMin: 0.1, CostMax: math.NaN()}); r.Total != 1 || r.Rows[0].Key != "kH" {
		t.Errorf("cost filter: %+v", r)
	}
	r := find(t, s, Query{Text: "capybara"})
	if r.Total != 1 || !r.Complete || r.Scanned != 30 || r.Rows[0].Key != "kH" {
		t.Errorf("search: %+v", r)
	}
	r = find(t, s, Query{Sort: "-tokens", Size: 4, Page: 1})
	if r.Total != 30 || len(r.Rows) != 4 || r.Rows[0].Tokens != 125 || r.Rows[3].Tokens != 122 {
		t.Errorf("sort -tokens page 1: %+v", r.Rows)
	}
	if _, err := s.Find(context.Background(), Query{Sort: "colour", Size: 1}); err == nil {
		t.Error("unknown sort accepted")
	}
}

func TestHandlerIsReadOnlyAndChecksToken(t *testing.T) {
	dir := folder(t)
	ix, _, _, err := OpenIndex([]string{dir}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(ix, dir, "sesame")
	defer s.Close()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/api/meta"); code != http.StatusUnauthorized {
		t.Errorf("no token: %d", code)
	}
	if code, body := get(fmt.Sprintf("/raw/%d?token=sesame", pos(t, s, "kH"))); code != 200 || !strings.Contains(body, "Capybara") {
		t.Errorf("raw record: %d %s", code, body)
	}
	if code, _ := get("/api/record/30?token=sesame"); code != http.StatusNotFound {
		t.Errorf("record past the end: %d", code)
	}
	if code, _ := get("/api/records?token=sesame&turns_min=x"); code != http.StatusBadRequest {
		t.Errorf("bad filter: %d", code)
	}
	resp, err := http.Post(srv.URL+"/api/records?token=sesame", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
	if code, body := get("/?token=sesame"); code != 200 || strings.Contains(body, "http://") || strings.Contains(body, "https://") {
		t.Errorf("page: %d or refers outside", code)
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:8080": true, "[::1]:0": true, "localhost:1": true, "0.0.0.0:8080": false, ":8080": false, "10.0.0.2:80": false} {
		if got, err := IsLoopback(addr); err != nil || got != want {
			t.Errorf("%s: %v %v", addr, got, err)
		}
	}
}
