package generate_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/generate"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// readBack is a Python program that reads every line of the JSONL files it
// is given with json.loads at the default recursion limit and prints the
// deepest nesting it met (an error exits non-zero with the traceback).
const readBack = `
import json, sys
assert sys.getrecursionlimit() == 1000, sys.getrecursionlimit()
def depth(v):
    # iterative: the point is what json.loads accepts, not this walk
    best, stack = 0, [(v, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            best = max(best, d); stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            best = max(best, d); stack.extend((x, d + 1) for x in v)
    return best
deepest, n = 0, 0
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            deepest = max(deepest, depth(json.loads(line))); n += 1
print(n, deepest)
`

// TestDeepestMetadataReadsBackInPython: metadata nested as deep as a row may
// (schemas.MaxFieldDepth) is written into the record, and Python's
// json.loads at its default recursion limit reads the shard back; a row one
// level deeper is a reject naming its line and field.
func TestDeepestMetadataReadsBackInPython(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("python3 is not installed; CI requires the read-back test: %v", err)
		}
		t.Skip("python3 not installed")
	}
	// nested is objects and arrays in turn, depth levels with the final {}.
	nested := func(depth int) string {
		pairs, odd := (depth-1)/2, (depth-1)%2
		return strings.Repeat(`{"a": [`, pairs) + strings.Repeat(`{"b": `, odd) + "{}" +
			strings.Repeat("}", odd) + strings.Repeat("]}", pairs)
	}
	_, url := startFake(t, fakellm.Config{}, echoScript)
	prompts := writePrompts(t,
		`{"prompt": "echo deep", "metadata": `+nested(schemas.MaxFieldDepth)+`}`,
		`{"prompt": "echo deeper", "metadata": `+nested(schemas.MaxFieldDepth+1)+`}`)
	out := filepath.Join(t.TempDir(), "out")
	res, err := generate.Run(context.Background(), options(t, url, prompts, out))
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.OK != 1 || res.Summary.Rejected != 1 {
		t.Fatalf("summary %+v, want 1 ok and 1 rejected", res.Summary)
	}
	rj := rejects(t, out)
	if len(rj) != 1 || rj[0].Line != 2 || rj[0].Field != "metadata" ||
		rj[0].Reason != fmt.Sprintf("metadata: nested deeper than %d levels", schemas.MaxFieldDepth) {
		t.Fatalf("rejects = %.300v", rj)
	}
	shards, _ := filepath.Glob(filepath.Join(out, "data", "*.jsonl"))
	if len(shards) == 0 {
		t.Fatalf("no data shard in %s", out)
	}
	cmd := exec.Command(python, append([]string{"-c", readBack}, shards...)...)
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 json.loads of the shard: %v\n%s", err, got)
	}
	// The record is one level, its metadata field holds the row's object.
	if want := fmt.Sprintf("1 %d", schemas.MaxFieldDepth+1); strings.TrimSpace(string(got)) != want {
		t.Fatalf("python3 read %q (records, deepest nesting), want %q", got, want)
	}
	mustVerify(t, out)
}
