package compress

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/tokenizer"
)

func TestSourceRowsKeysAndRejects(t *testing.T) {
	dir := t.TempDir()
	conv := `"conversations":[{"from":"human","value":"hi"}]`
	mustWrite(t, filepath.Join(dir, "in", "b.jsonl"), []byte(strings.Join([]string{
		`{"id":1,` + conv + `}`,
		``,
		`{not json`,
		`{"id":2,"conversations":"nope"}`,
		`{"key":"k1","prompt_index":7,"sample":2,"outcome":"completed",` + conv + `}`,
		`{"key":"k1","prompt_index":7,"sample":2,"outcome":"completed",` + conv + `}`,
		`{"key":"k2","outcome":"api_error",` + conv + `}`,
		`{"id":3,"pad":"` + strings.Repeat("x", 300) + `",` + conv + `}`,
		`{"id":4,` + conv + `}`,
	}, "\n")+"\n"))
	mustWrite(t, filepath.Join(dir, "in", "a.jsonl"), []byte(`{"id":0,`+conv+"}\r\n"))
	mustWrite(t, filepath.Join(dir, "in", ".hidden.jsonl"), []byte("garbage\n"))
	mustWrite(t, filepath.Join(dir, "in", "notes.txt"), []byte("not an input\n"))

	inputs, err := ExpandInputs([]string{filepath.Join(dir, "in")})
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) != 2 || inputs[0].Name != "a.jsonl" || inputs[1].Name != "b.jsonl" {
		t.Fatalf("inputs %+v", inputs)
	}
	var rejects []schemas.Reject
	src := OpenSource(SourceOptions{Inputs: inputs, MaxLineBytes: 200, Reject: func(r schemas.Reject) { rejects = append(rejects, r) }})
	defer src.Close()
	// The pre-count is what Next yields, without reporting a reject; a
	// compressed input is not counted (a second full decode).
	if n := src.Total(); n != 4 || len(rejects) != 0 {
		t.Fatalf("Total %d with %d rejects, want 4 with none", n, len(rejects))
	}
	if n := OpenSource(SourceOptions{Inputs: append(inputs, Input{Path: "x.jsonl.gz", Name: "x.jsonl.gz", Kind: KindGzip})}).Total(); n != -1 {
		t.Fatalf("Total with a gzip input %d, want -1", n)
	}
	var recs []*schemas.Record
	for {
		rec, err := src.Next(bg)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4", len(recs))
	}
	if !bytes.Equal(recs[0].Raw, []byte(`{"id":0,`+conv+"}")) || !strings.HasPrefix(recs[0].Key, "a.jsonl:1:") || recs[0].PromptIndex != 0 {
		t.Errorf("first record %q key %s pi %d", recs[0].Raw, recs[0].Key, recs[0].PromptIndex)
	}
	if recs[2].Key != "k1" || recs[2].PromptIndex != 7 || recs[2].Sample != 2 {
		t.Errorf("keyed record: %+v", recs[2])
	}
	// Unkeyed rows take their global position: the output keeps input order.
	if recs[1].PromptIndex >= recs[3].PromptIndex || recs[3].PromptIndex != 8 {
		t.Errorf("positions %d, %d", recs[1].PromptIndex, recs[3].PromptIndex)
	}
	reasons := ""
	for _, r := range rejects {
		reasons += r.Reason + "|"
	}
	for _, want := range []string{"not a JSON object", "no conversations array", "already read", "waiting for a retry", "longer than 200 bytes"} {
		if !strings.Contains(reasons, want) {
			t.Errorf("no reject for %q in %s", want, reasons)
		}
	}
	if len(rejects) != 5 || src.Rejected() != 5 {
		t.Errorf("%d rejects", len(rejects))
	}

	if _, err := ExpandInputs([]string{filepath.Join(dir, "missing")}); err == nil {
		t.Error("a missing input is not an error")
	}
	empty := filepath.Join(dir, "empty")
	os.MkdirAll(empty, 0o755)
	if _, err := ExpandInputs([]string{empty}); err == nil {
		t.Error("a folder without inputs is not an error")
	}
}

func TestCountTokensChunksExactly(t *testing.T) {
	tok, err := tokenizer.Load("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r := newRand(3)
	for b.Len() < 3<<20 {
		b.WriteString(text(r, 200))
		b.WriteString("\n\n  \t\nCJK 你好世界 ")
		b.WriteString(text(r, 50))
		b.WriteString("\r\nfunc x() {\n\treturn 1\n}\n")
	}
	s := b.String()
	n, err := CountTokens(tok, strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	if want := tok.Count(s); n != int64(want) {
		t.Fatalf("chunked count %d, whole count %d", n, want)
	}
}
