package view

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
)

func cacheFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestIndexRebuiltWhenTheFolderOrTheCacheFileChanges(t *testing.T) {
	dir := folder(t)
	cache := t.TempDir()
	ix, built, _, err := OpenIndex([]string{dir}, cache)
	if err != nil || !built {
		t.Fatalf("first open: built %v, err %v", built, err)
	}
	defer ix.Close()
	files := cacheFiles(t, cache)
	if len(files) != 1 {
		t.Fatalf("cache holds %v, want one index and no build leftovers", files)
	}

	// A damaged cache file is rebuilt, not trusted.
	idx := filepath.Join(cache, files[0])
	data, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	for _, damaged := range [][]byte{data[:len(data)-9], append([]byte("x"), data[1:]...), data[:len(indexMagic)+3]} {
		if err := os.WriteFile(idx, damaged, 0o644); err != nil {
			t.Fatal(err)
		}
		again, built, warn, err := OpenIndex([]string{dir}, cache)
		if err != nil || warn != nil || !built || again.Len() != 30 {
			t.Fatalf("damaged cache file of %d bytes: built %v, warn %v, err %v", len(damaged), built, warn, err)
		}
		again.Close()
	}
	got, _ := os.ReadFile(idx)
	if !bytes.Equal(got, data) {
		t.Fatal("the rebuilt index differs from the first one")
	}

	// The ledger changing (every commit appends to it) names another index,
	// and writing it removes the older one of the same folder, while a
	// viewer that has the older one mapped still reads it.
	other := folder(t)
	oix, _, _, err := OpenIndex([]string{other}, cache)
	if err != nil {
		t.Fatal(err)
	}
	defer oix.Close()
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, pipeline.LedgerFile), later, later); err != nil {
		t.Fatal(err)
	}
	again, built, _, err := OpenIndex([]string{dir}, cache)
	if err != nil || !built {
		t.Fatalf("open after the ledger changed: built %v, err %v", built, err)
	}
	defer again.Close()
	now := cacheFiles(t, cache)
	if len(now) != 2 || slices.Contains(now, files[0]) {
		t.Fatalf("cache holds %v, want the new index of the folder (not %s) and the other folder's", now, files[0])
	}
	for i := range ix.Len() {
		if ix.Key(i) != again.Key(i) || ix.OutcomeName(i) != again.OutcomeName(i) {
			t.Fatalf("record %d: the removed index, still mapped, reads %s %s; the new one %s %s", i, ix.Key(i), ix.OutcomeName(i), again.Key(i), again.OutcomeName(i))
		}
	}
}

func TestIndexWithoutAWritableCacheStillOpens(t *testing.T) {
	dir := folder(t)
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ix, built, warn, err := OpenIndex([]string{dir}, filepath.Join(notDir, "cache"))
	if err != nil || warn == nil || !built {
		t.Fatalf("unwritable cache: built %v, warn %v, err %v", built, warn, err)
	}
	defer ix.Close()
	s := NewServer(ix, dir, "")
	defer s.Close()
	if r := find(t, s, Query{Outcome: "completed"}); r.Total != 20 || r.Rows[0].Key != "kB" {
		t.Fatalf("completed: %+v", r)
	}
}

func TestMetaCountsOutcomes(t *testing.T) {
	dir := folder(t)
	ix, _, _, err := OpenIndex([]string{dir}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	s := NewServer(ix, dir, "")
	defer s.Close()
	w := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/api/meta", nil)
	req.Host = "127.0.0.1" // httptest's example.com is not a loopback name
	s.Handler().ServeHTTP(w, req)
	var meta struct {
		Records  int            `json:"records"`
		Outcomes map[string]int `json:"outcomes"`
		Compress map[string]int `json:"compress"`
		Tools    []string       `json:"tools"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &meta); err != nil {
		t.Fatalf("%v: %s", err, w.Body)
	}
	if meta.Records != 30 || meta.Outcomes["completed"] != 20 || meta.Outcomes["api_error"] != 10 || len(meta.Outcomes) != 2 ||
		len(meta.Compress) != 0 || len(meta.Tools) != 1 || meta.Tools[0] != "terminal" {
		t.Fatalf("meta: %s", w.Body)
	}
}

// The search's scanner returns each record's own line whatever order the
// list walks them in (file order, a sort, backwards), across shards.
func TestSearchScannerReadsEveryLineInAnyOrder(t *testing.T) {
	dir := folder(t)
	ix, _, _, err := OpenIndex([]string{dir}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	s := NewServer(ix, dir, "")
	defer s.Close()
	orders := [][]int{{}, {}, {}}
	for i := range ix.Len() {
		orders[0] = append(orders[0], i)
		orders[1] = append(orders[1], ix.Len()-1-i)
		orders[2] = append(orders[2], (i*7)%ix.Len())
	}
	for o, order := range orders {
		scan := newLineScanner(s)
		for _, i := range order {
			got, err := scan.line(i)
			if err != nil {
				t.Fatalf("order %d, record %d: %v", o, i, err)
			}
			want, err := s.Line(i)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("order %d, record %d: scanner read %q, want %q", o, i, got, want)
			}
		}
		scan.close()
	}
	if r := find(t, s, Query{Text: "QUESTION", Sort: "-tokens", Size: 5}); r.Total != 29 || !r.Complete || r.Rows[0].Tokens != 129 {
		t.Errorf("QUESTION by -tokens: %+v", r)
	}
	if r := find(t, s, Query{Text: "capybara", Outcome: "completed"}); r.Total != 1 || r.Scanned != 20 {
		t.Errorf("capybara among completed: %+v", r)
	}
}

// TestBuildRefusesAShardWhoseContentChanged: a shard of its ledger size but
// other bytes, newer than the ledger, fails the build as cat fails.
func TestBuildRefusesAShardWhoseContentChanged(t *testing.T) {
	dir := folder(t)
	shards, err := filepath.Glob(filepath.Join(dir, "data", "*.jsonl"))
	if err != nil || len(shards) == 0 {
		t.Fatalf("no data shards: %v", err)
	}
	b, err := os.ReadFile(shards[0])
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte(`"human"`))
	if i < 0 {
		t.Fatalf("no human turn in %s", shards[0])
	}
	copy(b[i:], `"HUMAN"`)
	if err := os.WriteFile(shards[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(shards[0], later, later); err != nil {
		t.Fatal(err)
	}
	_, err = BuildIndex([]string{dir})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("does not match its ledger SHA-256")) {
		t.Fatalf("build over a changed shard: %v", err)
	}
}
