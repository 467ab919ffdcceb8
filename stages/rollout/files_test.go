package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/fake"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// call is one scripted tool call.
type call struct {
	name string
	args map[string]any
}

// scriptOf builds a fakellm script answering prompts matching match: each
// step calls its tools, then the model ends with "done".
func scriptOf(t *testing.T, match string, steps ...[]call) []fakellm.Script {
	t.Helper()
	var st []fakellm.Step
	for _, calls := range steps {
		var s fakellm.Step
		for _, c := range calls {
			a, err := json.Marshal(c.args)
			if err != nil {
				t.Fatal(err)
			}
			s.ToolCalls = append(s.ToolCalls, fakellm.ToolCallSpec{Name: c.name, Arguments: a})
		}
		st = append(st, s)
	}
	st = append(st, fakellm.Step{Content: "done"})
	js, err := json.Marshal(map[string]any{"scripts": []fakellm.Script{{Match: match, Steps: st}}})
	if err != nil {
		t.Fatal(err)
	}
	return scripts(t, string(js))
}

// recorder keeps the messages of the last request, so a test reads the
// exact tool results the model saw.
type recorder struct {
	llm.Client
	mu   sync.Mutex
	last []schemas.Message
}

func (r *recorder) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	r.mu.Lock()
	r.last = append([]schemas.Message(nil), req.Messages...)
	r.mu.Unlock()
	return r.Client.Chat(ctx, req)
}

// toolResults returns the contents of the tool messages the model saw, in order.
func (r *recorder) toolResults() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.last {
		if m.Role == "tool" {
			out = append(out, m.Content)
		}
	}
	return out
}

// runFiles runs one rollout with the file and terminal toolsets on d and
// returns the record and the tool results.
func runFiles(t *testing.T, d sandbox.Driver, maxOutput int, steps ...[]call) (*schemas.Record, []string) {
	t.Helper()
	rec := &recorder{Client: env(t, fakellm.Config{Scripts: scriptOf(t, "^files", steps...)}, 0)}
	out := run(t, Options{Client: rec, Model: "m", Driver: d, Toolsets: []string{"file", "terminal"}, MaxOutput: maxOutput}, record("files"))
	return out, rec.toolResults()
}

// readResult is read_file's result.
type readResult struct {
	Content    string `json:"content"`
	TotalLines int    `json:"total_lines"`
	Truncated  bool   `json:"truncated"`
	Error      string `json:"error"`
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("tool result %.200q: %v", s, err)
	}
	return v
}

// numbered returns read_file's content for lines from..to of lines.
func numbered(lines []string, from, to int) string {
	var parts []string
	for i := from; i <= to && i <= len(lines); i++ {
		parts = append(parts, fmt.Sprintf("%d|%s", i, lines[i-1]))
	}
	return strings.Join(parts, "\n")
}

// countingDriver counts the bytes ReadRange returned in its sessions.
type countingDriver struct {
	sandbox.Driver
	mu    sync.Mutex
	bytes int64
}

func (c *countingDriver) Open(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	s, err := c.Driver.Open(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &countingSession{Session: s, d: c}, nil
}

func (c *countingDriver) read() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

type countingSession struct {
	sandbox.Session
	d *countingDriver
}

func (s *countingSession) ReadRange(ctx context.Context, path string, off int64, n int) ([]byte, int64, error) {
	b, size, err := s.Session.ReadRange(ctx, path, off, n)
	s.d.mu.Lock()
	s.d.bytes += int64(len(b))
	s.d.mu.Unlock()
	return b, size, err
}

// seeded opens a fake session and writes files into it before the rollout:
// the fake driver keeps files per session, so the test writes through a
// driver wrapper that seeds every session it opens.
type seeded struct {
	*fake.Driver
	files map[string]string
}

func (s seeded) Open(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	sess, err := s.Driver.Open(ctx, spec)
	if err != nil {
		return nil, err
	}
	for p, data := range s.files {
		if err := sess.WriteFile(ctx, p, []byte(data), 0o644); err != nil {
			return nil, err
		}
	}
	return sess, nil
}

func TestReadFilePagesAndFormat(t *testing.T) {
	var lines []string
	for i := 1; i <= 1234; i++ {
		lines = append(lines, fmt.Sprintf("line %d \xff é", i))
	}
	text := strings.Join(lines, "\n") // no newline at the end
	valid := make([]string, len(lines))
	for i, l := range lines {
		valid[i] = strings.ToValidUTF8(l, "\uFFFD")
	}
	d := seeded{fake.New(), map[string]string{"log.txt": text, "/data/empty": "", "/data/one\n": "x\n"}}
	rec, res := runFiles(t, d, 0, []call{
		{"read_file", map[string]any{"path": "log.txt"}},
		{"read_file", map[string]any{"path": "log.txt", "offset": 1001, "limit": 500}},
		{"read_file", map[string]any{"path": "/sandbox/log.txt", "offset": "1234", "limit": 5}},
		{"read_file", map[string]any{"path": "log.txt", "offset": 5000}},
		{"read_file", map[string]any{"path": "/data/empty"}},
		{"read_file", map[string]any{"path": "/data/one\n"}},
	})
	if rec.Outcome != schemas.OutcomeCompleted {
		t.Fatalf("outcome %s (%s)", rec.Outcome, rec.Error)
	}
	for i, want := range []readResult{
		{Content: numbered(valid, 1, 500), TotalLines: 1234, Truncated: true},
		{Content: numbered(valid, 1001, 1234), TotalLines: 1234},
		{Content: numbered(valid, 1234, 1234), TotalLines: 1234},
		{Content: "", TotalLines: 1234},
		{Content: "", TotalLines: 0},
		{Content: "1|x", TotalLines: 1},
	} {
		if got := decode[readResult](t, res[i]); got != want {
			t.Errorf("read %d = %+v\nwant %+v", i, abbrev(got), abbrev(want))
		}
	}
	// The result keeps its key order.
	if !strings.HasPrefix(res[5], `{"content":"1|x","total_lines":1,"truncated":false}`) {
		t.Errorf("result text %q", res[5])
	}
}

func abbrev(r readResult) readResult {
	if len(r.Content) > 80 {
		r.Content = r.Content[:40] + "..." + r.Content[len(r.Content)-40:]
	}
	return r
}

// TestReadFileReadsOnlyThePage reads page 1 and page 3 of a 100 MB file
// whose line count the sandbox answers (wc): only the bytes up to the page
// cross the driver.
func TestReadFileReadsOnlyThePage(t *testing.T) {
	const size = 100 << 20
	line := strings.Repeat("y", 99) + "\n"
	d := fake.New().OnPrefix("LC_ALL=C; export LC_ALL; wc -c", fake.Response{Result: sandbox.Result{Stdout: fmt.Sprintf("%d\n%d\n1\n", size, size/100)}})
	cd := &countingDriver{Driver: seeded{d, map[string]string{"big.log": strings.Repeat(line, size/100)[:size]}}}
	_, res := runFiles(t, cd, 0, []call{
		{"read_file", map[string]any{"path": "big.log"}},
		{"read_file", map[string]any{"path": "big.log", "offset": 1001}},
	})
	for i, r := range res {
		got := decode[readResult](t, r)
		if got.TotalLines != size/100 || !got.Truncated || strings.Count(got.Content, "\n") != 499 {
			t.Fatalf("page %d: total %d truncated %v lines %d", i, got.TotalLines, got.Truncated, strings.Count(got.Content, "\n")+1)
		}
	}
	if n := cd.read(); n > 1<<20 {
		t.Fatalf("two pages of a 100 MB file read %d bytes through the driver", n)
	}
}

// TestReadFileCountsWithoutWC: where the sandbox cannot count (no wc), the
// rest of the file is scanned and the count is still right.
func TestReadFileCountsWithoutWC(t *testing.T) {
	body := strings.Repeat("0123456789\n", 300_000) + "tail"
	_, res := runFiles(t, seeded{fake.New(), map[string]string{"f": body}}, 0, []call{{"read_file", map[string]any{"path": "f", "limit": 2}}})
	if got := decode[readResult](t, res[0]); got.TotalLines != 300_001 || got.Content != "1|0123456789\n2|0123456789" || !got.Truncated {
		t.Fatalf("got %+v", abbrev(got))
	}
}

// TestReadFileLongLines: a page stops before a line that would pass 1 MiB,
// and a single longer line is cut with a marker.
func TestReadFileLongLines(t *testing.T) {
	long := strings.Repeat("é", 700_000) // 1.4 MB
	body := "short\n" + long + "\nafter\n"
	_, res := runFiles(t, seeded{fake.New(), map[string]string{"f": body}}, 0, []call{
		{"read_file", map[string]any{"path": "f"}},
		{"read_file", map[string]any{"path": "f", "offset": 2}},
	})
	first := decode[readResult](t, res[0])
	if first.Content != "1|short" || !first.Truncated || first.TotalLines != 3 {
		t.Fatalf("page before the long line: %+v", abbrev(first))
	}
	second := decode[readResult](t, res[1])
	if !strings.HasPrefix(second.Content, "2|éé") || !strings.HasSuffix(second.Content, lineCutMarker) || len(second.Content) > maxPageBytes+100 || !second.Truncated {
		t.Fatalf("long line: %d bytes, %+v", len(second.Content), abbrev(second))
	}
}

func TestWriteAndPatchLargeFiles(t *testing.T) {
	big := strings.Repeat("0123456789abcdef\n", 300<<10/17)
	src := strings.Repeat("filler line that is not unique\n", 200<<10/31) + "MARKER-OLD\n"
	d := fake.New()
	rec, res := runFiles(t, d, 64<<10,
		[]call{{"write_file", map[string]any{"path": "out/big.txt", "content": big}}, {"write_file", map[string]any{"path": "src.txt", "content": src}}},
		[]call{{"patch", map[string]any{"path": "src.txt", "old_string": "MARKER-OLD", "new_string": "MARKER-NEW"}}},
		[]call{{"patch", map[string]any{"path": "src.txt", "old_string": "filler", "new_string": "x"}}},
		[]call{{"read_file", map[string]any{"path": "src.txt", "offset": 6607, "limit": 1}}},
	)
	if rec.Outcome != schemas.OutcomeCompleted {
		t.Fatalf("outcome %s (%s)", rec.Outcome, rec.Error)
	}
	want := []string{
		fmt.Sprintf(`{"bytes_written":%d}`, len(big)),
		fmt.Sprintf(`{"bytes_written":%d}`, len(src)),
		`{"success":true,"replacements":1}`,
		`{"success":false,"error":"old_string matches 6606 times in src.txt; add context or set replace_all"}`,
		`{"content":"6607|MARKER-NEW","total_lines":6607,"truncated":false}`,
	}
	for i := range want {
		if res[i] != want[i] {
			t.Errorf("result %d = %.300s\nwant %s", i, res[i], want[i])
		}
	}
	if st := rec.ToolStats["patch"]; st.Success != 1 || st.Failure != 1 {
		t.Errorf("patch stats %+v", st)
	}
}

// TestFileErrorsAreToolErrors: missing files, folders and bad paths are
// tool errors the model sees (failures in tool_stats); the rollout
// completes.
func TestFileErrorsAreToolErrors(t *testing.T) {
	d := seeded{fake.New(), map[string]string{"dir/f": "x"}}
	rec, res := runFiles(t, d, 0, []call{
		{"read_file", map[string]any{"path": "missing.txt"}},
		{"read_file", map[string]any{"path": "dir"}},
		{"write_file", map[string]any{"path": "dir", "content": "x"}},
		{"write_file", map[string]any{"path": "dir/f/g", "content": "x"}},
		{"patch", map[string]any{"path": "missing.txt", "old_string": "a", "new_string": "b"}},
	})
	if rec.Outcome != schemas.OutcomeCompleted {
		t.Fatalf("outcome %s (%s)", rec.Outcome, rec.Error)
	}
	want := []string{
		`{"error":"cannot read missing.txt: no such file"}`,
		`{"error":"cannot read dir: is a directory"}`,
		`{"error":"cannot write dir: is a directory"}`,
		`{"error":"cannot write dir/f/g: not a directory"}`,
		`{"success":false,"error":"cannot read missing.txt: no such file"}`,
	}
	for i := range want {
		if res[i] != want[i] {
			t.Errorf("result %d = %s, want %s", i, res[i], want[i])
		}
	}
	if rec.ToolStats["read_file"].Failure != 2 || rec.ToolStats["write_file"].Failure != 2 || rec.ToolStats["patch"].Failure != 1 {
		t.Errorf("tool_stats %+v", rec.ToolStats)
	}
}

// TestFileDriverFailureIsSandboxError: a driver that fails under a file
// operation ends the rollout as sandbox_error (retried by --resume).
func TestFileDriverFailureIsSandboxError(t *testing.T) {
	for _, tool := range []call{
		{"read_file", map[string]any{"path": "a"}},
		{"write_file", map[string]any{"path": "a", "content": "x"}},
		{"patch", map[string]any{"path": "a", "old_string": "x", "new_string": "y"}},
	} {
		d := fake.New().FailFiles(fmt.Errorf("daemon gone: %w", sandbox.ErrUnavailable))
		rec, _ := runFiles(t, d, 0, []call{tool})
		if rec.Outcome != schemas.OutcomeSandboxError || !strings.Contains(rec.Error, "daemon gone") {
			t.Errorf("%s: outcome %s (%s)", tool.name, rec.Outcome, rec.Error)
		}
	}
	// A session that did not open is a driver failure too, whatever the
	// driver's error wraps.
	d := fake.New().FailOpen(errors.New("no such image"))
	rec, _ := runFiles(t, d, 0, []call{{"read_file", map[string]any{"path": "a"}}})
	if rec.Outcome != schemas.OutcomeSandboxError || !strings.Contains(rec.Error, "no such image") {
		t.Errorf("open failure: outcome %s (%s)", rec.Outcome, rec.Error)
	}
}

func TestFileFailureSorting(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		err    error
		msg    string
		driver bool
	}{
		{&fs.PathError{Op: "open", Path: "x", Err: fs.ErrNotExist}, "no such file", false},
		{&fs.PathError{Op: "open", Path: "x", Err: fs.ErrPermission}, "permission denied", false},
		{fmt.Errorf("docker: %w", sandbox.ErrUnavailable), "", true},
		{fmt.Errorf("x: %w", sandbox.ErrClosed), "", true},
		{&openError{errors.New("sandbox open: bad cwd")}, "", true},
		{&fs.PathError{Op: "write", Path: "x", Err: errors.New("Read-only file system")}, "Read-only file system", false},
	} {
		msg, err := fileFailure(ctx, c.err)
		if msg != c.msg || (err != nil) != c.driver {
			t.Errorf("fileFailure(%v) = %q, %v", c.err, msg, err)
		}
	}
}

// TestReadFileOfAGrowingLog: when the file grew between the scan and the
// sandbox's count (a log being written), the count is taken as it is now
// instead of scanning the whole file.
func TestReadFileOfAGrowingLog(t *testing.T) {
	body := strings.Repeat(strings.Repeat("z", 99)+"\n", 30_000) // 3 MB
	d := fake.New().OnPrefix("LC_ALL=C; export LC_ALL; wc -c", fake.Response{Result: sandbox.Result{Stdout: "3500000\n35000\n1\n"}})
	cd := &countingDriver{Driver: seeded{d, map[string]string{"app.log": body}}}
	_, res := runFiles(t, cd, 0, []call{{"read_file", map[string]any{"path": "app.log", "limit": 10}}})
	if got := decode[readResult](t, res[0]); got.TotalLines != 35_000 || !got.Truncated || !strings.HasPrefix(got.Content, "1|zzz") {
		t.Fatalf("got %+v", abbrev(got))
	}
	if n := cd.read(); n > 128<<10 {
		t.Fatalf("read %d bytes of a growing 3 MB log for 10 lines", n)
	}
}
