package schemas

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

var inputCorpus = []string{
	`{"prompt": "hi"}`,
	`{"prompt": "hi", "id": "a", "image": "img:1", "cwd": "/w", "toolsets": ["file", "terminal"], "metadata": {"k": [1, 2]}}`,
	`{"prompt": "hi", "docker_image": "img:2", "extra": {"x": 1}}`,
	`{"prompt": "hi", "image": "a", "docker_image": "b"}`,
	`{"prompt": "hi", "image": "a", "docker_image": "a"}`,
	`{"prompt": "hi", "id": null, "image": null, "toolsets": null, "metadata": null}`,
	`{"prompt": "hi", "prompt": "again"}`,
	`{"pr\u006fmpt": "escaped key"}`,
	`{"prompt": "caf\u00e9 \ud83c\udf0d"}`,
	`{"prompt": ""}`,
	`{"prompt": 1}`,
	`{"prompt": "x", "toolsets": []}`,
	`{"prompt": "x", "toolsets": ["web"]}`,
	`{"prompt": "x", "toolsets": [1]}`,
	`{"prompt": "x", "metadata": "str"}`,
	`{"prompt": "x", "id": 5}`,
	`{"prompt": "x"} trailing`,
	`[1, 2]`,
	`{"prompt": "x",}`,
	`{"id": "no prompt"}`,
	`{"prompt": "tab\there", "cwd": "/a b"}`,
	`{"prompt": "lone \ud800 surrogate \udc00 x"}`,
	`{"prompt": "nul \u0000 and \/ slash"}`,
	`{"prompt": "p", "verify": "pytest -q tests/", "answer": "42"}`,
	`{"prompt": "p", "verify": null, "answer": null}`,
	`{"prompt": "p", "verify": "", "answer": " "}`,
	`{"prompt": "p", "answer": 42}`,
	`{"prompt": "p", "verify": ["make", "test"]}`,
	`{"prompt": "p", "verify": "a\u0000b"}`,
	`{"prompt": "p", "answer": "\\boxed{42}", "verify": "test -f \"out put\""}`,
}

// TestFastAndSlowParsersAgree: the fast path accepts only rows the slow,
// explaining path accepts, and yields the same row.
func TestFastAndSlowParsersAgree(t *testing.T) {
	for _, line := range inputCorpus {
		checkAgree(t, []byte(line))
	}
}

// TestFastPathAcceptsPlainRows: the common valid shapes must not fall back
// to the slow path, or resuming a large run pays encoding/json per row.
func TestFastPathAcceptsPlainRows(t *testing.T) {
	for _, line := range []string{
		inputCorpus[0], inputCorpus[1], inputCorpus[2], inputCorpus[4], inputCorpus[5],
		`{"prompt": "x", "toolsets": ["terminal"], "cwd": null, "docker_image": null}`,
		`{"prompt": "p", "verify": "pytest -q tests/", "answer": "42"}`,
		`{"prompt": "p", "verify": null, "answer": null}`,
	} {
		if _, ok := parseInputRowFast([]byte(line)); !ok {
			t.Errorf("%s: fast path fell back to the slow one", line)
		}
	}
}

func checkAgree(t *testing.T, line []byte) {
	slow, serr := parseInputRowSlow(line)
	fast, ok := parseInputRowFast(line)
	if ok && serr != nil {
		t.Errorf("%s: fast path accepted a row the slow path rejects (%v)", line, serr)
	}
	if ok && !reflect.DeepEqual(fast, slow) {
		t.Errorf("%s: fast %+v != slow %+v", line, fast, slow)
	}
}

func FuzzInputParsersAgree(f *testing.F) {
	for _, l := range inputCorpus {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, line []byte) { checkAgree(t, line) })
}

// TestNullPromptIsAWrongTypeNotEmpty: {"prompt": null} names the field and
// its type; only "" is empty.
func TestNullPromptIsAWrongTypeNotEmpty(t *testing.T) {
	for line, want := range map[string]string{
		`{"prompt": null}`: "prompt: must be a string, got null",
		`{"prompt": ""}`:   "prompt: empty",
		`{"prompt": []}`:   "prompt: must be a string, got an array",
	} {
		_, err := ParseInputRow([]byte(line))
		if err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %q", line, err, want)
		}
		checkAgree(t, []byte(line))
	}
}

// nested returns a JSON object nested depth levels deep ({} is one level).
func nested(depth int) string {
	return strings.Repeat(`{"a": `, depth-1) + "{}" + strings.Repeat("}", depth-1)
}

// TestDeepFieldsAreRejectedAtTheLimit: a field may nest MaxFieldDepth
// containers and no more; the error names the field, even an ignored one, and
// escaped keys or brackets inside strings do not confuse the count.
func TestDeepFieldsAreRejectedAtTheLimit(t *testing.T) {
	ok := `{"prompt": "p", "metadata": ` + nested(MaxFieldDepth) + `}`
	if _, err := ParseInputRow([]byte(ok)); err != nil {
		t.Fatalf("metadata %d deep: %v", MaxFieldDepth, err)
	}
	if _, fast := parseInputRowFast([]byte(ok)); !fast {
		t.Errorf("metadata %d deep fell back to the slow path", MaxFieldDepth)
	}
	limit := fmt.Sprintf("nested deeper than %d levels", MaxFieldDepth)
	for line, want := range map[string]string{
		`{"prompt": "p", "metadata": ` + nested(MaxFieldDepth+1) + `}`:                                             "metadata: " + limit,
		`{"prompt": "p", "metadata": ` + nested(20000) + `}`:                                                       "metadata: " + limit,
		`{"prompt": "[[{{", "m\u0065ta": {"s": "}}]]"}, "x": ` + nested(MaxFieldDepth+500) + `}`:                   "x: " + limit,
		`{"prompt": "p", "x": [` + strings.Repeat("[", MaxFieldDepth) + strings.Repeat("]", MaxFieldDepth+1) + `}`: "x: " + limit,
	} {
		_, err := ParseInputRow([]byte(line))
		if err == nil || err.Error() != want {
			t.Errorf("%.60s: error %v, want %q", line, err, want)
		}
		checkAgree(t, []byte(line))
	}
}

// TestCwdMustBeAnAbsolutePath: an empty, relative or NUL-holding cwd is a
// reject naming the field; null means the session's own folder.
func TestCwdMustBeAnAbsolutePath(t *testing.T) {
	for line, want := range map[string]string{
		`{"prompt": "p", "cwd": ""}`:          "cwd: empty",
		`{"prompt": "p", "cwd": "work/dir"}`:  `cwd: "work/dir" is not an absolute path`,
		`{"prompt": "p", "cwd": "./x"}`:       `cwd: "./x" is not an absolute path`,
		`{"prompt": "p", "cwd": "/a\u0000b"}`: "cwd: contains a NUL character",
		`{"prompt": "p", "cwd": 3}`:           "cwd: must be a string, got a number",
	} {
		_, err := ParseInputRow([]byte(line))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", line, err, want)
		}
		checkAgree(t, []byte(line))
	}
	for _, line := range []string{`{"prompt": "p", "cwd": "/nonexistent"}`, `{"prompt": "p", "cwd": null}`} {
		if _, ok := parseInputRowFast([]byte(line)); !ok {
			t.Errorf("%s: not accepted by the fast path", line)
		}
	}
}

// BenchmarkParseInputRow measures a plain row (the fast path) and a row the
// fast path hands to the slow, explaining one.
func BenchmarkParseInputRow(b *testing.B) {
	for _, bc := range []struct{ name, line string }{
		{"fast", inputCorpus[1]},
		{"slow", `{"prompt": "x", "toolsets": ["file", "web"]}`},
	} {
		line := []byte(bc.line)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				_, _ = ParseInputRow(line)
			}
		})
	}
}

// TestVerifyAndAnswerAreCheckedStrings: verify and answer are non-empty
// strings (or null, for none); a bad one is a reject naming the field, and
// both parsers read them the same.
func TestVerifyAndAnswerAreCheckedStrings(t *testing.T) {
	row, err := ParseInputRow([]byte(`{"prompt": "p", "verify": "test -f out.txt", "answer": "$1,234"}`))
	if err != nil || row.Verify != "test -f out.txt" || row.Answer != "$1,234" {
		t.Fatalf("row = %+v, %v", row, err)
	}
	for line, want := range map[string]string{
		`{"prompt": "p", "verify": ""}`:         "verify: empty",
		`{"prompt": "p", "verify": "  \n"}`:     "verify: empty",
		`{"prompt": "p", "verify": 1}`:          "verify: must be a string, got a number",
		`{"prompt": "p", "verify": "a\u0000b"}`: "verify: contains a NUL character",
		`{"prompt": "p", "answer": ""}`:         "answer: empty",
		`{"prompt": "p", "answer": 42}`:         "answer: must be a string, got a number",
		`{"prompt": "p", "answer": {"x": 1}}`:   "answer: must be a string, got an object",
	} {
		_, err := ParseInputRow([]byte(line))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", line, err, want)
		}
		checkAgree(t, []byte(line))
	}
}

// TestRowKeyCoversVerifyAndAnswer: a row without an id is keyed by its whole
// line, so a changed verify or answer is new work, and a row without them
// keeps the key it always had.
func TestRowKeyCoversVerifyAndAnswer(t *testing.T) {
	plain := []byte(`{"prompt": "p"}`)
	// The key such a row has had since keys were made: sha256 of the
	// trimmed line, first 6 bytes.
	if got, want := RowKey(3, "", plain, 1), "row:3:ac7c9a6b466e#1"; got != want {
		t.Errorf("key of a plain row = %q, want %q", got, want)
	}
	seen := map[string]string{RowKey(3, "", plain, 1): string(plain)}
	for _, line := range []string{
		`{"prompt": "p", "verify": "true"}`, `{"prompt": "p", "verify": "false"}`,
		`{"prompt": "p", "answer": "1"}`, `{"prompt": "p", "answer": "2"}`,
	} {
		k := RowKey(3, "", []byte(line), 1)
		if prev, dup := seen[k]; dup {
			t.Errorf("%s and %s share the key %s", line, prev, k)
		}
		seen[k] = line
	}
}
