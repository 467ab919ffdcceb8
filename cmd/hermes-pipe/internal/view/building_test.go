package view

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// retriedFolder is folder's 30 records, then a resumed run over the ten
// api_errors: those of an even prompt index now complete (and say
// "retried"), the others fail again. The ledger then holds superseded rows,
// out of prompt order, in data and failed shards.
func retriedFolder(t *testing.T) string {
	t.Helper()
	dir := folder(t)
	var recs []*schemas.Record
	for i := 0; i < 30; i += 3 {
		r := &schemas.Record{Key: "k" + string(rune('A'+i)), PromptIndex: i, Outcome: schemas.OutcomeAPIError,
			Conversations: []schemas.Turn{{From: "human", Value: "question"}, {From: "gpt", Value: "answer"}},
			Usage:         schemas.Usage{TotalTokens: int64(1000 + i)}}
		if i%2 == 0 {
			r.Outcome, r.Completed = schemas.OutcomeCompleted, true
			r.Conversations[1].Value = "retried answer"
		}
		recs = append(recs, r)
	}
	writeRun(t, dir, pipeline.OutputOptions{Mode: pipeline.ModeResume, Kind: "generate", MaxShardRows: 4}, 2, recs)
	return dir
}

// getJSON asks srv for path and decodes the answer into v; it returns the
// status and, when it is not 200, the body.
func getJSON(t *testing.T, srv *httptest.Server, path string, v any) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, string(b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v: %s", path, err, b)
	}
	return resp.StatusCode, ""
}

// sameRows compares the rows of a page with the index's, toolsets and
// tools as sets (the index names them in its dictionary's order).
func sameRows(got, want []Row) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d rows, want %d", len(got), len(want))
	}
	for k := range got {
		g, w := got[k], want[k]
		slices.Sort(g.Toolsets)
		slices.Sort(g.Tools)
		slices.Sort(w.Toolsets)
		slices.Sort(w.Tools)
		gj, _ := json.Marshal(g)
		wj, _ := json.Marshal(w)
		if string(gj) != string(wj) {
			return fmt.Errorf("row %d: %s, want %s", k, gj, wj)
		}
	}
	return nil
}

// The list, filters, records and neighbours answer while the index is
// built (held back by the hook after its first ledger line), from the
// folder in ledger order, with the same rows the index gives and totals
// that are exact or said to be lower bounds; sorts say they wait for the
// index; once it is ready the answers are the index's.
func TestServedWhileTheIndexIsBuilt(t *testing.T) {
	dir := retriedFolder(t)
	cache := filepath.Join(t.TempDir(), "cache")

	// What cat sees: the live records and their ledger outcomes.
	liveOutcome := map[string]schemas.Outcome{}
	if err := pipeline.EachRecord(dir, func(ref pipeline.RecordRef, _ []byte) error {
		liveOutcome[ref.Key] = ref.Outcome
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want, err := BuildIndex([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	ref := NewServer(want, dir, "")
	defer ref.Close()
	if want.Len() != len(liveOutcome) || want.Len() != 30 {
		t.Fatalf("index of %d records, cat sees %d, want 30", want.Len(), len(liveOutcome))
	}
	for i := range want.Len() {
		if o := liveOutcome[want.Key(i)]; string(o) != want.OutcomeName(i) {
			t.Fatalf("record %s: index outcome %s, cat's %s", want.Key(i), want.OutcomeName(i), o)
		}
	}

	held, release := make(chan int, 1), make(chan struct{})
	var once sync.Once
	s, err := open([]string{dir}, cache, dir, "", func(done int) {
		if done > 0 {
			once.Do(func() { held <- done; <-release })
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	done := <-held
	if done >= 30 {
		t.Fatalf("the build was held after %d records, not within", done)
	}
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	queries := []string{"", "outcome=api_error", "outcome=completed", "failures=yes", "q=capybara", "q=retried",
		"outcome=api_error&failures=yes", "turns_min=2&tokens_min=1010", "tokens_max=105", "cost_min=0.1",
		"toolset=terminal", "tool=terminal", "outcome=none", "size=7&page=2", "outcome=completed&size=4&page=1",
		"sort=-ledger&size=5", "sort=-ledger&outcome=api_error&size=2"}
	for _, qs := range queries {
		var res Result
		if code, body := getJSON(t, srv, "/api/records?"+qs, &res); code != 200 {
			t.Fatalf("%s while building: %d %s", qs, code, body)
		}
		if res.Indexing == nil || res.Indexing.Total != 30 || res.Indexing.Done != done {
			t.Fatalf("%s while building: indexing %+v, want %d of 30", qs, res.Indexing, done)
		}
		v, _ := url.ParseQuery(qs)
		if !v.Has("sort") {
			v.Set("sort", "ledger")
		}
		r := httptest.NewRequest("GET", "/api/records?"+v.Encode(), nil)
		q, err := parseQuery(r)
		if err != nil {
			t.Fatal(err)
		}
		exp, err := ref.Find(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameRows(res.Rows, exp.Rows); err != nil {
			t.Errorf("%s while building: %v", qs, err)
		}
		if res.Complete && res.Total != exp.Total || !res.Complete && (res.Total > exp.Total || res.Total < len(res.Rows)) {
			t.Errorf("%s while building: total %d (complete %v), the index's %d", qs, res.Total, res.Complete, exp.Total)
		}
		if !res.Complete && len(res.Rows) < min(q.Size, exp.Total-q.Page*q.Size) {
			t.Errorf("%s while building: stopped with %d rows, before its page was full", qs, len(res.Rows))
		}
	}

	// A filtered page that is full stops there: its total is a lower bound.
	var res Result
	getJSON(t, srv, "/api/records?outcome=completed&size=3", &res)
	if res.Complete || res.Total != 3 || len(res.Rows) != 3 {
		t.Errorf("a full first page: total %d complete %v rows %d, want 3, a lower bound", res.Total, res.Complete, len(res.Rows))
	}

	// A page past what a filtered read reaches before it stops says so (a
	// request gone at once here).
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	q, err := parseQuery(httptest.NewRequest("GET", "/api/records?outcome=completed&size=3&page=2", nil))
	if err != nil {
		t.Fatal(err)
	}
	if res, err = s.Find(gone, q); err != nil || res.Complete || len(res.Rows) != 0 || !strings.Contains(res.Note, "page 3 of this list is past the matches among the 0 records read so far") {
		t.Errorf("a page past the matches while building: %+v %v", res, err)
	}

	// Sorts need the index: 503, with the build's progress.
	for _, qs := range []string{"sort=tokens", "sort=-cost", "sort=key"} {
		if code, body := getJSON(t, srv, "/api/records?"+qs, &res); code != http.StatusServiceUnavailable || !strings.Contains(body, fmt.Sprintf("indexing %d %%", done*100/30)) {
			t.Errorf("%s while building: %d %q, want 503 naming the progress", qs, code, body)
		}
	}
	if code, _ := getJSON(t, srv, "/api/records?turns_min=x", &res); code != http.StatusBadRequest {
		t.Errorf("a bad filter while building: %d", code)
	}

	// Meta: the records and outcomes the ledger names, the progress.
	var meta struct {
		Records  int            `json:"records"`
		Outcomes map[string]int `json:"outcomes"`
		Indexing *Indexing      `json:"indexing"`
	}
	getJSON(t, srv, "/api/meta", &meta)
	if meta.Records != 30 || meta.Indexing == nil || meta.Indexing.Done != done || meta.Outcomes["api_error"] != want.OutcomeCount[slices.Index(want.Outcomes, "api_error")] {
		t.Errorf("meta while building: %+v", meta)
	}

	// Record pages and neighbours: the same records as the index's numbers.
	for _, i := range []int{0, 13, 29} {
		var rec struct {
			Key      string          `json:"key"`
			Of       int             `json:"of"`
			Record   json.RawMessage `json:"record"`
			Indexing *Indexing       `json:"indexing"`
		}
		if code, body := getJSON(t, srv, fmt.Sprintf("/api/record/%d", i), &rec); code != 200 {
			t.Fatalf("record %d while building: %d %s", i, code, body)
		}
		line, err := ref.Line(i)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Key != want.Key(i) || rec.Of != 30 || rec.Indexing == nil || len(rec.Record) == 0 || !strings.Contains(string(line), string(rec.Record)) {
			t.Errorf("record %d while building: key %s of %d, want %s of 30", i, rec.Key, rec.Of, want.Key(i))
		}
		for _, qs := range []string{"", "outcome=api_error", "q=retried"} {
			var got Near
			getJSON(t, srv, fmt.Sprintf("/api/record/%d/near?%s", i, qs), &got)
			v, _ := url.ParseQuery(qs + "&sort=ledger")
			q, _ := parseQuery(httptest.NewRequest("GET", "/?"+v.Encode(), nil))
			exp, err := ref.Near(context.Background(), q, i)
			if err != nil {
				t.Fatal(err)
			}
			if got != exp {
				t.Errorf("near %d (%s) while building: %+v, the index's %+v", i, qs, got, exp)
			}
		}
	}
	if code, _ := getJSON(t, srv, "/api/record/30", &res); code != http.StatusNotFound {
		t.Errorf("record past the end while building: %d", code)
	}
	if code, body := getJSON(t, srv, "/api/record/3/near?sort=tokens", &res); code != http.StatusServiceUnavailable || !strings.Contains(body, "index") {
		t.Errorf("neighbours in another order while building: %d %s, want 503", code, body)
	}
	if code, body := getJSON(t, srv, "/api/records?sort=-bogus", &res); code != http.StatusBadRequest || !strings.Contains(body, `sort="-bogus"`) {
		t.Errorf("an unknown sort while building: %d %s, want 400", code, body)
	}

	close(release)
	<-s.Ready()
	if _, warn, err := s.BuildResult(); warn != nil || err != nil {
		t.Fatalf("build: warn %v, err %v", warn, err)
	}
	for _, qs := range append(queries, "sort=-tokens", "sort=key") {
		var res Result
		if code, body := getJSON(t, srv, "/api/records?"+qs, &res); code != 200 {
			t.Fatalf("%s once built: %d %s", qs, code, body)
		}
		q, _ := parseQuery(httptest.NewRequest("GET", "/api/records?"+qs, nil))
		exp, err := ref.Find(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if res.Indexing != nil || res.Order != "" || res.Total != exp.Total || res.Complete != exp.Complete {
			t.Errorf("%s once built: %+v, want the index's total %d", qs, res, exp.Total)
		}
		if err := sameRows(res.Rows, exp.Rows); err != nil {
			t.Errorf("%s once built: %v", qs, err)
		}
	}
	if files := cacheFiles(t, cache); len(files) != 1 || !strings.HasSuffix(files[0], ".idx") {
		t.Errorf("cache holds %v, want one index", files)
	}
	again, err := Open([]string{dir}, cache, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.Built() || again.Records() != 30 {
		t.Errorf("second open: built %v, %d records; want the cached index of 30", again.Built(), again.Records())
	}
}

// A folder that is not an output folder fails before anything is served.
func TestOpenRefusesWhatIsNotAnOutputFolder(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open([]string{dir}, t.TempDir(), dir, ""); err == nil || !strings.Contains(err.Error(), "not an output folder") {
		t.Errorf("open of an empty folder: %v", err)
	}
	// An output folder whose ledger is not written yet holds no record.
	run := filepath.Join(t.TempDir(), "out")
	writeRun(t, run, pipeline.OutputOptions{Kind: "generate"}, 1, nil)
	if err := os.Remove(filepath.Join(run, pipeline.LedgerFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	s, err := Open([]string{run}, t.TempDir(), run, "")
	if err != nil {
		t.Fatalf("open of a folder with no ledger yet: %v", err)
	}
	defer s.Close()
	if _, _, err := s.BuildResult(); err != nil || s.Records() != 0 {
		t.Errorf("folder with no ledger yet: build %v, %d records", err, s.Records())
	}
}

// The plan's table of each key's last row, grown from its smallest size,
// returns the row each put replaces.
func TestLastRowsTracksTheLastRowOfEachKey(t *testing.T) {
	tab := newLastRows(1)
	defer func() { tab.free() }()
	last := map[string]int{}
	for r := range 20000 {
		key := fmt.Sprintf("key-%d", (r*7919)%6000)
		got := tab.put(key, uint32(r))
		want, ok := last[key]
		if !ok {
			want = -1
		}
		if got != want {
			t.Fatalf("row %d (%s): replaced %d, want %d", r, key, got, want)
		}
		last[key] = r
	}
	if tab.used != len(last) || len(tab.a) < len(last) {
		t.Errorf("%d keys in %d slots, want %d", tab.used, len(tab.a), len(last))
	}
}

// A build that fails (a shard changed since it was committed) is said in
// the answers, which stay served from the folder; nothing is cached.
func TestBuildFailureIsShownAndTheListStaysServed(t *testing.T) {
	dir := retriedFolder(t)
	shards, err := filepath.Glob(filepath.Join(dir, "data", "*.jsonl"))
	if err != nil || len(shards) == 0 {
		t.Fatalf("no data shards: %v", err)
	}
	f, err := os.OpenFile(shards[len(shards)-1], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("\n")
	f.Close()
	cache := t.TempDir()
	s, err := Open([]string{dir}, cache, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	<-s.Ready()
	_, _, berr := s.BuildResult()
	if berr == nil || !strings.Contains(berr.Error(), "the ledger says") {
		t.Fatalf("build of a folder with a longer shard: %v", berr)
	}
	var res Result
	if code, body := getJSON(t, srv, "/api/records?outcome=api_error", &res); code != 200 || res.Indexing == nil || !strings.Contains(res.Indexing.Error, "the ledger says") || res.Total != 5 || !res.Complete {
		t.Errorf("list after a failed build: %d %s %+v", code, body, res)
	}
	if code, body := getJSON(t, srv, "/api/records?sort=tokens", &res); code != http.StatusServiceUnavailable || !strings.Contains(body, "build failed") {
		t.Errorf("sort after a failed build: %d %s", code, body)
	}
	if files := cacheFiles(t, cache); len(files) != 0 {
		t.Errorf("cache holds %v after a failed build", files)
	}
}

// A sharded run's folders are numbered one after the other while the index
// is built, as in the index.
func TestServedWhileBuildingAcrossFolders(t *testing.T) {
	dirs := []string{folder(t), retriedFolder(t)}
	srv, want, ref := servedWhileBuilding(t, dirs)
	for _, qs := range []string{"size=500", "outcome=api_error&size=500", "sort=-ledger&size=7&page=1"} {
		var res Result
		if code, body := getJSON(t, srv, "/api/records?"+qs, &res); code != 200 {
			t.Fatalf("%s: %d %s", qs, code, body)
		}
		v, _ := url.ParseQuery(qs)
		if v.Get("sort") == "" {
			v.Set("sort", "ledger")
		}
		q, _ := parseQuery(httptest.NewRequest("GET", "/?"+v.Encode(), nil))
		exp, err := ref.Find(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if res.Indexing == nil || res.Total != exp.Total || !res.Complete {
			t.Errorf("%s while building: %+v, want the index's total %d", qs, res, exp.Total)
		}
		if err := sameRows(res.Rows, exp.Rows); err != nil {
			t.Errorf("%s while building: %v", qs, err)
		}
	}
	var rec struct {
		Key string `json:"key"`
		Dir string `json:"dir"`
	}
	getJSON(t, srv, "/api/record/45", &rec)
	if d, _ := want.Ref(45); rec.Key != want.Key(45) || rec.Dir != d || d != dirs[1] {
		t.Errorf("record 45 while building: %+v, want %s in %s", rec, want.Key(45), dirs[1])
	}
}

// servedWhileBuilding serves dirs with the build held after its first shard
// until the test ends, next to the finished index of the same folders and a
// server over it, the reference of every answer.
func servedWhileBuilding(t *testing.T, dirs []string) (*httptest.Server, *Index, *Server) {
	t.Helper()
	want, err := BuildIndex(dirs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { want.Close() })
	ref := NewServer(want, dirs[0], "")
	t.Cleanup(func() { ref.Close() })
	held, release := make(chan struct{}), make(chan struct{})
	s, err := open(dirs, t.TempDir(), dirs[0], "", func(int) {
		select {
		case <-held:
		default:
			close(held)
			<-release
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	t.Cleanup(func() { close(release) })
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	<-held
	return srv, want, ref
}

// A Parquet folder: its records are read by row number, during the build
// and in the index alike.
func TestServedWhileBuildingParquet(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	var recs []*schemas.Record
	for i := range 12 {
		r := &schemas.Record{Key: fmt.Sprintf("p%02d", i), PromptIndex: i, Outcome: schemas.OutcomeCompleted, Completed: true,
			Conversations: []schemas.Turn{{From: "human", Value: fmt.Sprintf("question %d", i)}}, Usage: schemas.Usage{TotalTokens: int64(i)}}
		if i%4 == 0 {
			r.Outcome, r.Completed = schemas.OutcomeAPIError, false
		}
		recs = append(recs, r)
	}
	writeRun(t, dir, pipeline.OutputOptions{Kind: "generate", Format: pipeline.FormatParquet, MaxShardRows: 5}, 2, recs)
	srv, want, ref := servedWhileBuilding(t, []string{dir})
	for _, qs := range []string{"", "outcome=api_error", "q=question%207"} {
		var res Result
		if code, body := getJSON(t, srv, "/api/records?"+qs, &res); code != 200 {
			t.Fatalf("%s: %d %s", qs, code, body)
		}
		v, _ := url.ParseQuery(qs)
		v.Set("sort", "ledger")
		q, _ := parseQuery(httptest.NewRequest("GET", "/?"+v.Encode(), nil))
		exp, err := ref.Find(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if res.Indexing == nil || res.Total != exp.Total || exp.Total == 0 {
			t.Errorf("%s while building: total %d, the index's %d", qs, res.Total, exp.Total)
		}
		if err := sameRows(res.Rows, exp.Rows); err != nil {
			t.Errorf("%s while building: %v", qs, err)
		}
	}
	for i := range want.Len() {
		resp, err := http.Get(fmt.Sprintf("%s/raw/%d", srv.URL, i))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		line, err := ref.Line(i)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || string(got) != string(line) {
			t.Errorf("raw %d while building: %d %s, want %s", i, resp.StatusCode, got, line)
		}
	}
}

// TestRecordFilterIsTheIndexFilter: a record read while the index builds is
// filtered as a one-record index of its fields (oneRecord) by the index's
// own filter; that agrees with the index on every record of the folder for
// every kind of filter.
func TestRecordFilterIsTheIndexFilter(t *testing.T) {
	s := serve(t, retriedFolder(t))
	ix := s.idx()
	for _, qs := range []string{"", "outcome=api_error", "outcome=completed", "outcome=nope", "failures=yes", "failures=no",
		"tool=terminal", "toolset=terminal", "tool=nope", "turns_min=2", "turns_max=1", "tokens_min=1010", "tokens_max=1010",
		"cost_min=0.1", "cost_max=0.1", "outcome=completed&failures=yes"} {
		q, err := parseQuery(httptest.NewRequest("GET", "/?"+qs, nil))
		if err != nil {
			t.Fatal(err)
		}
		m, err := s.matcher(q)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i := range ix.Len() {
			f := ix.fields(i)
			one, ok := newIndexFilter(oneRecord(&f), q)
			if got, want := ok && one.match(0), m(i); got != want {
				t.Errorf("%s: record %s: its fields say %v, the index %v", qs, ix.Key(i), got, want)
			}
			if m(i) {
				n++
			}
		}
		t.Logf("%s: %d of %d", qs, n, ix.Len())
	}
}
