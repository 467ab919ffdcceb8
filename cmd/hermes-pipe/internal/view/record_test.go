package view

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/compress"
)

func serve(t *testing.T, dirs ...string) *Server {
	t.Helper()
	ix, _, _, err := OpenIndex(dirs, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(ix, dirs[0], "")
	t.Cleanup(s.Close)
	return s
}

func near(t *testing.T, s *Server, q Query, i int) (int, int) {
	t.Helper()
	for _, p := range []*int64{&q.TurnsMin, &q.TurnsMax, &q.TokensMin, &q.TokensMax} {
		*p = -1
	}
	q.CostMin, q.CostMax = nan(), nan()
	q.RewardMin, q.RewardMax = nan(), nan()
	n, err := s.Near(context.Background(), q, i)
	if err != nil {
		t.Fatal(err)
	}
	return n.Prev, n.Next
}

func nan() float64 { return math.NaN() }

// pos is the index position of the record with key.
func pos(t *testing.T, s *Server, key string) int {
	t.Helper()
	for i := range s.idx().Len() {
		if s.idx().Key(i) == key {
			return i
		}
	}
	t.Fatalf("no record %s", key)
	return -1
}

// j and k walk the list a query gives, not the folder.
func TestNearWalksTheFilteredList(t *testing.T) {
	s := serve(t, folder(t))
	key := func(i int) string {
		if i < 0 {
			return "none"
		}
		return s.idx().Key(i)
	}
	for _, tc := range []struct {
		name       string
		q          Query
		at         string
		prev, next string
	}{
		{"all", Query{}, "kD", "kC", "kE"},
		{"outcome", Query{Outcome: "api_error"}, "kD", "kA", "kG"},
		{"outcome, first", Query{Outcome: "api_error"}, "kA", "none", "kD"},
		{"outcome, from outside the list", Query{Outcome: "completed"}, "kD", "kC", "kE"},
		{"outcome, sorted by tokens descending", Query{Outcome: "api_error", Sort: "-tokens"}, "kG", "kJ", "kD"},
		{"text", Query{Text: "capybara"}, "kH", "none", "none"},
		{"text from elsewhere", Query{Text: "capybara"}, "kA", "none", "kH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, n := near(t, s, tc.q, pos(t, s, tc.at))
			if key(p) != tc.prev || key(n) != tc.next {
				t.Errorf("near %s: prev %s next %s, want %s and %s", tc.at, key(p), key(n), tc.prev, tc.next)
			}
		})
	}
}

// origInput is an entry of compress.InputsFile as compress writes it.
type origInput struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Kind string `json:"kind"`
}

// compressedFolder writes what a compress run leaves: records whose keys
// name their input (a JSONL file's row by NAME:LINE:HASH, an output
// folder's record by its own key) and compress_inputs.json.
func compressedFolder(t *testing.T, inputs []origInput, keys ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "compressed")
	var recs []*schemas.Record
	for i, k := range keys {
		recs = append(recs, &schemas.Record{Key: k, PromptIndex: i, Outcome: schemas.OutcomeCompleted, Completed: true,
			Conversations: []schemas.Turn{{From: "human", Value: "[CONTEXT SUMMARY]: short"}}})
	}
	writeRun(t, dir, pipeline.OutputOptions{Kind: "compress"}, 1, recs)
	if inputs != nil {
		b, _ := json.Marshal(map[string]any{"inputs": inputs})
		if err := os.WriteFile(filepath.Join(dir, compress.InputsFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func fileKey(name string, line int, text string) string {
	h := sha256.Sum256([]byte(strings.TrimSpace(text)))
	return fmt.Sprintf("%s:%d:%s", name, line, hex.EncodeToString(h[:6]))
}

func TestOriginalOfACompressedRecord(t *testing.T) {
	tmp := t.TempDir()
	jsonl := filepath.Join(tmp, "in", "rows.jsonl")
	os.MkdirAll(filepath.Dir(jsonl), 0o755)
	row2 := `{"conversations": [{"from": "human", "value": "the long original"}, {"from": "gpt", "value": "yes"}]}`
	if err := os.WriteFile(jsonl, []byte("{\"conversations\": []}\n\n"+row2+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := folder(t) // records kA..
	fk := fileKey("rows.jsonl", 3, row2)
	inputs := []origInput{{Path: jsonl, Name: "rows.jsonl", Kind: "jsonl"}, {Path: run, Name: "out", Kind: "run"}}
	dir := compressedFolder(t, inputs, fk, "kH", "nowhere")
	s := serve(t, dir)
	get := func(key string) Original {
		d, _ := s.idx().Ref(pos(t, s, key))
		return s.orig.find(d, key)
	}

	o := get(fk)
	if !o.Found || o.Source != jsonl+":3" || string(o.Record) != row2 {
		t.Errorf("file row: %+v", o)
	}
	o = get("kH")
	if !o.Found || o.Source != run || !strings.Contains(string(o.Record), "Capybara") {
		t.Errorf("folder record: %+v", o)
	}
	if o = get("nowhere"); o.Found || !strings.Contains(o.Why, `no input of this folder holds key "nowhere"`) || !strings.Contains(o.Why, "--original") {
		t.Errorf("missing record: %+v", o)
	}

	// The file changed since the run: its line is not taken for the original.
	if err := os.WriteFile(jsonl, []byte("{\"conversations\": []}\n\n"+strings.Replace(row2, "long", "edited", 1)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if o = get(fk); o.Found || !strings.Contains(o.Why, "has changed since the run") {
		t.Errorf("changed file: %+v", o)
	}

	// --original replaces the recorded inputs: a folder of JSONL files is
	// named as compress names them.
	moved := filepath.Join(tmp, "moved")
	os.MkdirAll(moved, 0o755)
	if err := os.WriteFile(filepath.Join(moved, "rows.jsonl"), []byte("{\"conversations\": []}\n\n"+row2+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.SetOriginals([]string{moved}); err != nil {
		t.Fatal(err)
	}
	if o = get(fk); !o.Found || o.Source != filepath.Join(moved, "rows.jsonl")+":3" {
		t.Errorf("--original: %+v", o)
	}
	if err := s.SetOriginals([]string{filepath.Join(tmp, "none")}); err == nil {
		t.Error("--original of a missing path was accepted")
	}

	// A folder compressed before compress_inputs.json existed.
	old := serve(t, compressedFolder(t, nil, "kH"))
	d, _ := old.idx().Ref(0)
	if o = old.orig.find(d, "kH"); o.Found || !strings.Contains(o.Why, "--original") {
		t.Errorf("no inputs file: %+v", o)
	}
}
