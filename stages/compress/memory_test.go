package compress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// bigRow is one over-target row of about mb MB: tool turns of about 256 KB
// whose text holds escaped newlines, as scripts/bench-compress-bigrow.sh
// writes them.
func bigRow(id string, mb int) []byte {
	var line bytes.Buffer
	for w := range 20 {
		fmt.Fprintf(&line, "%d ", w*37%5000)
	}
	line.WriteString(`\n`)
	body := bytes.Repeat(line.Bytes(), 256<<10/line.Len())
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"id": %q, "conversations": [{"from": "system", "value": "You are a function calling AI model."}, {"from": "human", "value": "task"}`, id)
	for s := range mb * 4 {
		fmt.Fprintf(&b, `, {"from": "gpt", "value": "<tool_call>\n{\"name\": \"terminal\", \"arguments\": {\"command\": \"step %d\"}}\n</tool_call>"}`, s)
		fmt.Fprintf(&b, `, {"from": "tool", "value": "<tool_response>\n%d `, s)
		b.Write(body)
		b.WriteString(`</tool_response>"}`)
	}
	b.WriteString(`, {"from": "gpt", "value": "done"}]}`)
	return b.Bytes()
}

// BenchmarkBigRow compresses one 50 MB row end to end (source, stage,
// output) against fakellm: its -memprofile shows where the row's bytes are
// copied. scripts/bench-compress-bigrow.sh measures the peak RSS.
func BenchmarkBigRow(b *testing.B) {
	dir := b.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	writeLines(b, in, [][]byte{bigRow("big", 50)})
	_, url := fake(b, fakellm.Config{SummaryWords: 60})
	b.ResetTimer()
	for i := range b.N {
		o := testOptions(b, url, []string{in}, filepath.Join(dir, fmt.Sprint("out", i)))
		o.Config = Config{}
		if _, err := Run(bg, o); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRowBytesBoundsRowsInWork: with a bound of three rows' bytes and
// eight workers, the source hands out no row while the rows in the stage
// hold the bound (the source blocks instead), a row longer than the bound is
// compressed alone, every row is compressed, and a row longer than the read
// buffer arrives whole and is kept without a copy of it.
func TestRowBytesBoundsRowsInWork(t *testing.T) {
	dir := t.TempDir()
	var lines [][]byte
	for i := range 12 {
		lines = append(lines, bigRow(fmt.Sprint("r", i), 0)) // a few hundred bytes
	}
	long := bigRow("long", 1) // 1 MB: longer than the bound and the read buffer
	lines = append(lines, long)
	in := filepath.Join(dir, "in.jsonl")
	writeLines(t, in, lines)
	each := len(lines[0])

	rb := newRowBytes(int64(3 * each))
	src := OpenSource(SourceOptions{Inputs: []Input{{Path: in, Name: "in.jsonl", Kind: KindJSONL}}, inflight: rb})
	defer src.Close()
	var (
		mu            sync.Mutex
		inWork, most  int64
		alone, sawBig bool
	)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for {
		rec, err := src.Next(bg)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n := int64(len(rec.Raw))
		mu.Lock()
		inWork += min(n, rb.max)
		most = max(most, inWork)
		if n > rb.max {
			sawBig = true
			alone = inWork == rb.max
			if !bytes.Equal(rec.Raw, long) {
				t.Error("the long row did not arrive whole")
			}
		}
		mu.Unlock()
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			time.Sleep(time.Millisecond) // a row in work for a while
			mu.Lock()
			inWork -= min(n, rb.max)
			mu.Unlock()
			rb.release(int(n))
		})
	}
	wg.Wait()
	if !sawBig || !alone {
		t.Errorf("long row seen %v, alone %v: it must be handed out alone", sawBig, alone)
	}
	if most > rb.max {
		t.Errorf("the rows in work held %d bytes, bound %d", most, rb.max)
	}
	if src.Rows() != len(lines) {
		t.Errorf("%d rows handed out of %d", src.Rows(), len(lines))
	}
	// The bound stops the source: with the bound held, Next waits until
	// its context ends.
	rb2 := newRowBytes(int64(each))
	if err := rb2.acquire(bg, each); err != nil {
		t.Fatal(err)
	}
	src2 := OpenSource(SourceOptions{Inputs: []Input{{Path: in, Name: "in.jsonl", Kind: KindJSONL}}, inflight: rb2})
	defer src2.Close()
	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	if _, err := src2.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with the bound held: %v, want it to wait", err)
	}
}

// TestCheckRowAgreesWithParseRow: the source's check, which unescapes
// nothing, accepts and refuses exactly the rows the stage's parse does.
func TestCheckRowAgreesWithParseRow(t *testing.T) {
	rows := []string{
		`{"conversations": [{"from": "human", "value": "hi\nthere \"q\""}]}`,
		`{"conversations":[{"from":"human","value":"a"},{"from":"gpt","value":"b","extra":{"value":1}}]}`,
		`{"conversations": [{"meta": {"value": "x", "from": "y"}, "from": "human", "value": 3}]}`,
		`{"conversations": [{"from": "human"}]}`,
		`{"conversations": [{"from": 1, "value": "a"}]}`,
		`{"conversations": [{"value": "a", "from" : "gpt" }]}`,
		`{"conversations": [{"\u0076alue": "a", "from": "gpt"}]}`,
		`{"conversations": [{"\u0076alue": 5, "from": "gpt"}]}`,
		`{"conversations": [{"from": "gpt", "value": "a", "value": 5}]}`,
		`{"conversations": [{"from": "gpt", "value": 5, "value": "a"}]}`,
		`{"conversations": [{"from": "gpt", "value": ["value", ":"]}]}`,
		`{"conversations": ["x"]}`,
		`{"conversations": {}}`,
		`{"conversations": []}`,
		`{"other": 1}`,
		`{"conversations": [{"k": "\\", "from": "gpt", "value": "\\\""}]}`,
	}
	for _, r := range rows {
		_, perr := parseRow([]byte(r))
		cerr := checkRow([]byte(r))
		if (perr == nil) != (cerr == nil) {
			t.Errorf("%s: parse %v, check %v", r, perr, cerr)
		}
	}
}
