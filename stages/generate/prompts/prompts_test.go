package prompts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "prompts.jsonl")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func drain(t *testing.T, src *Source) []*schemas.Record {
	t.Helper()
	var out []*schemas.Record
	for {
		rec, err := src.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
}

func TestBadRowsBecomeRejectsAndValidRowsGoOn(t *testing.T) {
	long := `{"prompt": "` + strings.Repeat("x", 300) + `"}`
	lines := []string{
		`{"prompt": "first"}`,                  // 1 ok
		`{"prompt": "broken"`,                  // 2 invalid JSON
		"{\"prompt\": \"bad \xff utf8\"}",      // 3 invalid UTF-8
		`{"id": "x"}`,                          // 4 missing prompt
		`{"prompt": 42}`,                       // 5 non-string prompt
		`{"prompt": "p", "toolsets": "file"}`,  // 6 wrong type
		`{"prompt": "p", "metadata": [1]}`,     // 7 wrong type
		long,                                   // 8 over-long
		``,                                     // 9 blank: skipped, no reject
		`{"prompt": "p", "toolsets": ["web"]}`, // 10 unknown toolset
		`["prompt"]`,                           // 11 not an object
		`{"prompt": "second", "id": "a"}`,      // 12 ok
		`{"prompt": "dup", "id": "a"}`,         // 13 duplicate id
		`{"prompt": "p", "image": 3}`,          // 14 wrong type
		`{"prompt": "third", "metadata": {"k": 1}, "toolsets": ["file"]}`, // 15 ok
	}
	path := writeFile(t, strings.Join(lines, "\n")+"\n")
	var rejects []schemas.Reject
	src, err := Open(path, Options{MaxLineBytes: 200, Reject: func(r schemas.Reject) { rejects = append(rejects, r) }})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	recs := drain(t, src)

	var prompts []string
	for _, r := range recs {
		prompts = append(prompts, r.Input.Prompt)
	}
	if got := strings.Join(prompts, ","); got != "first,second,third" {
		t.Fatalf("valid rows = %q", got)
	}
	want := map[int]string{2: "invalid JSON", 3: "invalid UTF-8", 4: "prompt: missing", 5: "prompt: must be a string",
		6: "toolsets: must be an array", 7: "metadata: must be a JSON object", 8: "over the 200-byte limit",
		10: `unknown toolset "web"`, 11: "JSON object", 13: "duplicate id", 14: "image: must be a string"}
	if len(rejects) != len(want) {
		t.Fatalf("got %d rejects, want %d: %+v", len(rejects), len(want), rejects)
	}
	for _, rj := range rejects {
		sub, ok := want[rj.Line]
		if !ok {
			t.Errorf("unexpected reject on line %d: %s", rj.Line, rj.Reason)
			continue
		}
		if !strings.Contains(rj.Reason, sub) {
			t.Errorf("line %d: reason %q does not mention %q", rj.Line, rj.Reason, sub)
		}
		if rj.File != path {
			t.Errorf("line %d: file %q", rj.Line, rj.File)
		}
		if rj.Raw != lines[rj.Line-1] && rj.RawBase64 == "" {
			t.Errorf("line %d: raw text lost: %q", rj.Line, rj.Raw)
		}
	}
	if rejects[1].RawBase64 == "" {
		t.Errorf("invalid UTF-8 line must keep its exact bytes in raw_base64")
	}
	// prompt_index counts non-blank lines, so it is stable when a bad row is fixed.
	if recs[1].PromptIndex != 10 || recs[2].PromptIndex != 13 {
		t.Errorf("prompt indexes = %d, %d", recs[1].PromptIndex, recs[2].PromptIndex)
	}
	if string(recs[2].Metadata) != `{"k": 1}` {
		t.Errorf("metadata not carried: %s", recs[2].Metadata)
	}
}

func TestSamplesAndDuplicatedPromptsHaveDistinctKeys(t *testing.T) {
	path := writeFile(t, "{\"prompt\": \"same\"}\n{\"prompt\": \"same\"}\n")
	src, err := Open(path, Options{Samples: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	recs := drain(t, src)
	if len(recs) != 6 {
		t.Fatalf("got %d records, want 6", len(recs))
	}
	seen := map[string]bool{}
	for _, r := range recs {
		if seen[r.Key] {
			t.Fatalf("duplicate key %s", r.Key)
		}
		seen[r.Key] = true
	}
	// Keys are stable across reads.
	src2, _ := Open(path, Options{Samples: 3})
	defer src2.Close()
	for i, r := range drain(t, src2) {
		if r.Key != recs[i].Key {
			t.Fatalf("key %d changed: %s vs %s", i, r.Key, recs[i].Key)
		}
	}
}

func TestImagesListsEveryRowsImage(t *testing.T) {
	path := writeFile(t, `{"prompt": "a", "image": "good:1"}`+"\n"+`{"prompt": "b", "docker_image": "gone:1"}`+"\n"+`{"prompt": "c"}`+"\n")
	imgs, err := Images(path, Options{})
	if err != nil || strings.Join(imgs, ",") != "good:1,gone:1" {
		t.Fatalf("Images = %v, %v", imgs, err)
	}
}

func TestByteOrderMarkAndCRLFAreAccepted(t *testing.T) {
	path := writeFile(t, "\xef\xbb\xbf{\"prompt\": \"a\"}\r\n{\"prompt\": \"b\"}\r\n")
	var rejects []schemas.Reject
	src, err := Open(path, Options{Reject: func(r schemas.Reject) { rejects = append(rejects, r) }})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	recs := drain(t, src)
	if len(recs) != 2 || len(rejects) != 0 || recs[0].Input.Prompt != "a" {
		t.Fatalf("records %d, rejects %+v", len(recs), rejects)
	}
}

// TestDeepMetadataIsRejectedAsInput: metadata nested past the limit would
// cost model calls and then fail to encode on every resume; it is a reject
// naming the line and the field.
func TestDeepMetadataIsRejectedAsInput(t *testing.T) {
	deep := strings.Repeat(`{"a": `, 19999) + "{}" + strings.Repeat("}", 19999)
	path := writeFile(t, `{"prompt": "ok"}`+"\n"+`{"prompt": "deep", "metadata": `+deep+"}\n")
	var rejects []schemas.Reject
	src, err := Open(path, Options{Reject: func(r schemas.Reject) { rejects = append(rejects, r) }})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if recs := drain(t, src); len(recs) != 1 || recs[0].Input.Prompt != "ok" {
		t.Fatalf("records = %+v", recs)
	}
	if len(rejects) != 1 || rejects[0].Line != 2 || rejects[0].Field != "metadata" ||
		!strings.Contains(rejects[0].Reason, fmt.Sprintf("nested deeper than %d levels", schemas.MaxFieldDepth)) {
		t.Fatalf("rejects = %.300v", rejects)
	}
}

// TestOverLongLineIsStreamedPast: a line over the limit is read past without
// being held (allocation stays near the limit, not the line's size), its
// reject keeps only the first KiB as raw and names file, line and limit, and
// the rows after it are read as usual.
func TestOverLongLineIsStreamedPast(t *testing.T) {
	const size = 50 << 20
	const limit = 1 << 20
	p := filepath.Join(t.TempDir(), "prompts.jsonl")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"prompt": "before"}` + "\n")
	head := `{"prompt": "é` // a 2-byte character straddles byte 1024
	f.WriteString(head + strings.Repeat("x", RawHeadBytes-len(head)-1) + "é")
	chunk := strings.Repeat("y", 1<<20)
	for written := RawHeadBytes + 1; written < size; written += len(chunk) {
		f.WriteString(chunk)
	}
	f.WriteString("\"}\n   \n" + `{"prompt": "after"}` + "\n")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(p)
	longLen := int(fi.Size()) - len(`{"prompt": "before"}`+"\n") - len("\n   \n"+`{"prompt": "after"}`+"\n")

	var rejects []schemas.Reject
	src, err := Open(p, Options{MaxLineBytes: limit, Reject: func(r schemas.Reject) { rejects = append(rejects, r) }})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	recs := drain(t, src)
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8*limit {
		t.Errorf("reading a %d-byte line allocated %d bytes: it was held, not streamed", longLen, alloc)
	}
	if len(recs) != 2 || recs[0].Input.Prompt != "before" || recs[1].Input.Prompt != "after" {
		t.Fatalf("records = %+v", recs)
	}
	if recs[1].PromptIndex != 2 || recs[1].Input.Line != 4 {
		t.Errorf("row after the long line: index %d line %d, want 2 and 4", recs[1].PromptIndex, recs[1].Input.Line)
	}
	if len(rejects) != 1 {
		t.Fatalf("rejects = %d", len(rejects))
	}
	rj := rejects[0]
	if rj.Line != 2 || rj.File != p || rj.RawBase64 != "" {
		t.Errorf("reject line %d file %q raw_base64 %d bytes", rj.Line, rj.File, len(rj.RawBase64))
	}
	if want := head + strings.Repeat("x", RawHeadBytes-len(head)-1); rj.Raw != want {
		t.Errorf("raw is %d bytes %.40q..., want the first %d bytes cut before the split character", len(rj.Raw), rj.Raw, len(want))
	}
	for _, sub := range []string{p + " line 2", fmt.Sprintf("is %d bytes", longLen), fmt.Sprintf("over the %d-byte limit", limit)} {
		if !strings.Contains(rj.Reason, sub) {
			t.Errorf("reason %q does not say %q", rj.Reason, sub)
		}
	}
}

// TestOpenRefusesAFolder: a folder is refused when opened, not at the
// first read, with a message saying what to give instead.
func TestOpenRefusesAFolder(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), dir+" is a folder") {
		t.Fatalf("Open(folder) = %v", err)
	}
}

// TestTotalCountsWhatNextYields: the pre-count equals the records Next
// yields (samples multiplied, bad and blank lines and another shard's units
// left out), and it reports no reject of its own.
func TestTotalCountsWhatNextYields(t *testing.T) {
	path := writeFile(t, "{\"prompt\": \"a\"}\n\n{\"prompt\": \"broken\"\n{\"prompt\": \"b\", \"id\": \"x\"}\n{\"prompt\": \"c\", \"id\": \"x\"}\n{\"prompt\": \"d\"}\n")
	for _, c := range []struct {
		samples int
		filter  func(*schemas.Record) bool
		want    int
	}{
		{1, nil, 3},
		{4, nil, 12},
		{3, func(r *schemas.Record) bool { return r.Sample != 1 }, 6},
	} {
		var rejects int
		src, err := Open(path, Options{Samples: c.samples, Filter: c.filter, Reject: func(schemas.Reject) { rejects++ }})
		if err != nil {
			t.Fatal(err)
		}
		if got := src.Total(); got != c.want || rejects != 0 {
			t.Fatalf("samples %d: Total %d, %d rejects; want %d, 0", c.samples, got, rejects, c.want)
		}
		if got := len(drain(t, src)); got != c.want || rejects != 2 {
			t.Fatalf("samples %d: Next yielded %d with %d rejects; want %d with 2", c.samples, got, rejects, c.want)
		}
		src.Close()
	}
}

// TestSkipDonePassesOverDoneLinesWithTheirKeys: with SkipDone, a line whose
// every sample is done yields records with the keys, indexes and samples
// parsing gives, without its input; a line with an id, an escape or a
// sample not done is parsed as before, and Total counts the same.
func TestSkipDonePassesOverDoneLinesWithTheirKeys(t *testing.T) {
	lines := []string{
		`{"prompt": "a"}`,                // done: passed over
		`{"prompt": "b", "id": "x"}`,     // id: parsed
		`{"prompt": "c\n"}`,              // escape: parsed
		`{"prompt": "d"}`,                // one sample not done: parsed
		`{"prompt": "e", "toolsets": 1}`, // invalid, keys not done: rejected
		`{"prompt": "f"}`,                // done
	}
	path := writeFile(t, strings.Join(lines, "\n")+"\n")
	const samples = 2
	plain, err := Open(path, Options{Samples: samples, Reject: func(schemas.Reject) {}})
	if err != nil {
		t.Fatal(err)
	}
	want := drain(t, plain)
	plain.Close()
	done := map[string]bool{}
	for _, rec := range want {
		if rec.PromptIndex != 3 || rec.Sample != 1 {
			done[rec.Key] = true
		}
	}
	var rejects int
	src, err := Open(path, Options{Samples: samples, Reject: func(schemas.Reject) { rejects++ }})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	src.SkipDone(func() func(string) bool { return func(key string) bool { return done[key] } })
	if got := src.Total(); got != len(want) {
		t.Fatalf("Total %d, want %d", got, len(want))
	}
	var got []schemas.Record // copies: a passed-over record's memory is reused
	parsed := map[int]bool{}
	for {
		rec, err := src.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		c := *rec
		c.Key = strings.Clone(rec.Key)
		got = append(got, c)
		if rec.Input != nil {
			parsed[rec.PromptIndex] = true
		}
	}
	if len(got) != len(want) || rejects != 1 {
		t.Fatalf("%d records, %d rejects; want %d, 1", len(got), rejects, len(want))
	}
	for i, w := range want {
		if got[i].Key != w.Key || got[i].PromptIndex != w.PromptIndex || got[i].Sample != w.Sample {
			t.Errorf("record %d: key %q index %d sample %d; want %q %d %d", i, got[i].Key, got[i].PromptIndex, got[i].Sample, w.Key, w.PromptIndex, w.Sample)
		}
	}
	for index, wantParsed := range map[int]bool{0: false, 1: true, 2: true, 3: true, 5: false} {
		if parsed[index] != wantParsed {
			t.Errorf("line of index %d parsed = %v, want %v", index, parsed[index], wantParsed)
		}
	}
	if src.Rows() != 5 {
		t.Errorf("Rows %d, want 5", src.Rows())
	}
}

// TestNeedImageRejectsRowsWithoutOne: with NeedImage a row naming no image
// (image or docker_image) is rejected with field "image" and its line, the
// others go on; FirstValid finds no valid row in a file of such rows only.
func TestNeedImageRejectsRowsWithoutOne(t *testing.T) {
	path := writeFile(t, `{"prompt": "a"}`+"\n"+`{"prompt": "b", "image": "x"}`+"\n"+`{"prompt": "c", "docker_image": "y"}`+"\n")
	var rejects []schemas.Reject
	src, err := Open(path, Options{NeedImage: true, Reject: func(r schemas.Reject) { rejects = append(rejects, r) }})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	recs := drain(t, src)
	if len(recs) != 2 || recs[0].Input.Image != "x" || recs[1].Input.Image != "y" {
		t.Fatalf("records %+v", recs)
	}
	if len(rejects) != 1 || rejects[0].Line != 1 || rejects[0].Field != "image" || rejects[0].Reason != ReasonNoImage {
		t.Fatalf("rejects %+v", rejects)
	}

	none := writeFile(t, `{"prompt": "a"}`+"\n"+`{"prompt": "b"}`+"\n")
	ok, bad, rj, err := FirstValid(context.Background(), none, Options{NeedImage: true}, 5)
	if err != nil || ok || bad != 2 || len(rj) != 2 || rj[1].Line != 2 || rj[1].Field != "image" {
		t.Fatalf("FirstValid: ok %v bad %d rejects %+v err %v", ok, bad, rj, err)
	}
	if ok, _, _, _ := FirstValid(context.Background(), none, Options{}, 5); !ok {
		t.Fatalf("without NeedImage the rows are valid")
	}
}
