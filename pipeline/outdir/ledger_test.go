package outdir

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// TestLineRoundTrip: AppendLine writes the documented format and ParseLine
// reads it back field for field, escapes included.
func TestLineRoundTrip(t *testing.T) {
	in := Line{Shard: "data/shard-00001.jsonl", Bytes: 12, SHA256: "ab", Rows: []Row{
		{Key: "k\"1é", Outcome: schemas.OutcomeCompleted, PromptIndex: 3, Sample: 1, Len: 12},
		{Key: "k2", Outcome: Filtered, PromptIndex: 4, Len: -1},
	}}
	b := AppendLine(nil, &in)
	want := `{"shard":"data/shard-00001.jsonl","bytes":12,"sha256":"ab","rows":[["k\"1é","completed",3,1,12],["k2","filtered",4,0,-1]]}` + "\n"
	if string(b) != want {
		t.Fatalf("encoded %s\nwant    %s", b, want)
	}
	var out Line
	if err := ParseLine(strings.TrimSuffix(string(b), "\n"), &out); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(out) != fmt.Sprint(in) || !out.Rows[1].Marker() || out.Rows[0].Marker() {
		t.Errorf("parsed %+v, want %+v", out, in)
	}
}

// TestScanTornRule: a last line without a newline or that does not parse is
// torn (reported, left out); an unparsable line before the last is an error
// naming its number.
func TestScanTornRule(t *testing.T) {
	good := AppendLine(nil, &Line{Rows: []Row{{Key: "a", Outcome: Filtered, Len: -1}}})
	for _, c := range []struct {
		data     string
		lines    int
		torn     bool
		tornLine int
		err      string
	}{
		{"", 0, false, 0, ""},
		{string(good) + string(good), 2, false, 0, ""},
		{string(good) + `{"rows":[["b"`, 1, true, 2, ""},
		{string(good) + "{\"rows\":[[\"b\"]]}\n", 1, true, 2, ""},
		{"{\"rows\":[[\"b\"]]}\n" + string(good), 0, false, 0, "ledger line 1"},
	} {
		for _, scan := range scanners {
			var n int
			tail, err := scan.fn(c.data, func(int, *Line) error { n++; return nil })
			checkScan(t, scan.name, c.data, tail, err, n, c.lines, c.torn, c.tornLine, c.err, int64(len(good)*c.lines))
		}
	}
}

// scanners are the two ways to scan a ledger: data in memory and a stream.
var scanners = []struct {
	name string
	fn   func(string, func(int, *Line) error) (Tail, error)
}{
	{"Scan", Scan},
	{"ScanReader", func(data string, fn func(int, *Line) error) (Tail, error) {
		return ScanReader(strings.NewReader(data), ScanSize{}, fn)
	}},
}

func checkScan(t *testing.T, name, data string, tail Tail, err error, n, lines int, torn bool, tornLine int, wantErr string, good int64) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s %.40q: err %v, want %q", name, data, err, wantErr)
		}
		return
	}
	if err != nil || n != lines || tail.Lines != lines || tail.Torn != torn || tail.TornLine != tornLine {
		t.Errorf("%s %.40q: %d lines, tail %+v, err %v; want %d lines torn %v at %d", name, data, n, tail, err, lines, torn, tornLine)
	}
	if tail.Good != good || tail.Size != int64(len(data)) {
		t.Errorf("%s %.40q: good %d size %d, want %d %d", name, data, tail.Good, tail.Size, good, len(data))
	}
}

// TestScanReaderLongLines: lines longer than ScanReader's buffer (no size
// given) are read whole, keys and rows as Scan reads them, torn ends too.
func TestScanReaderLongLines(t *testing.T) {
	var data []byte
	for l := range 3 {
		line := Line{Shard: fmt.Sprintf("data/shard-%05d.jsonl", l+1), Bytes: 10, SHA256: strings.Repeat("ab", 32)}
		for r := range 2000 * (l + 1) {
			line.Rows = append(line.Rows, Row{Key: fmt.Sprintf("row:%d:%d#0", l, r), Outcome: schemas.OutcomeCompleted, PromptIndex: int64(r), Len: 5})
		}
		data = AppendLine(data, &line)
	}
	keys := func(fn func(string, func(int, *Line) error) (Tail, error), data string) ([]string, Tail, error) {
		var out []string
		tail, err := fn(data, func(_ int, l *Line) error {
			out = append(out, strings.Clone(l.Shard))
			for _, r := range l.Rows {
				out = append(out, strings.Clone(r.Key))
			}
			return nil
		})
		return out, tail, err
	}
	for _, d := range []string{string(data), string(data[:len(data)-1]), string(data[:len(data)-5000])} {
		want, wantTail, wantErr := keys(Scan, d)
		got, tail, err := keys(scanners[1].fn, d)
		if !slices.Equal(got, want) || tail != wantTail || (err == nil) != (wantErr == nil) {
			t.Errorf("%d bytes: ScanReader %d keys, tail %+v, err %v; Scan %d keys, tail %+v, err %v", len(d), len(got), tail, err, len(want), wantTail, wantErr)
		}
	}
}

// TestOutcomeSets: the runtime's retryable outcomes and a mode's own are
// retried; final ones are not; Known holds the runtime's and the extras.
func TestOutcomeSets(t *testing.T) {
	s := OutcomeSet{Final: []schemas.Outcome{"x"}, Retryable: []schemas.Outcome{schemas.OutcomeSummaryFailed}}
	for o, want := range map[schemas.Outcome]bool{"x": false, schemas.OutcomeCompleted: false, schemas.OutcomeSummaryFailed: true, schemas.OutcomeTimeout: true} {
		if s.Retry(o) != want {
			t.Errorf("Retry(%s) = %v", o, !want)
		}
	}
	k := Known(s.All())
	if !k["x"] || !k[schemas.OutcomeError] || !k[schemas.OutcomeAPIError] || k["y"] {
		t.Errorf("Known %v", k)
	}
}

// TestLineCost: a line's cost_usd round-trips exactly, is left out when zero
// (the line is then byte-identical to one written without prices), is read
// from lines of other writers wherever it stands, and a bad value is an error
// naming the field.
func TestLineCost(t *testing.T) {
	a, b := 0.1, 0.2 // summed at run time: 0.30000000000000004
	in := Line{Shard: "data/shard-00002.jsonl", Bytes: 5, SHA256: "cd", CostUSD: a + b,
		Rows: []Row{{Key: "a", Outcome: schemas.OutcomeCompleted, Len: 5}}}
	enc := AppendLine(nil, &in)
	if !strings.Contains(string(enc), `"cost_usd":0.30000000000000004,"rows"`) {
		t.Fatalf("encoded %s", enc)
	}
	var out Line
	if err := ParseLine(strings.TrimSuffix(string(enc), "\n"), &out); err != nil {
		t.Fatal(err)
	}
	if out.CostUSD != in.CostUSD {
		t.Errorf("cost %v, want %v", out.CostUSD, in.CostUSD)
	}
	in.CostUSD = 0
	if b := AppendLine(nil, &in); strings.Contains(string(b), "cost_usd") {
		t.Errorf("zero cost written: %s", b)
	}
	if err := ParseLine(`{"rows":[],"cost_usd":1.5e-3,"shard":""}`, &out); err != nil || out.CostUSD != 0.0015 {
		t.Errorf("cost after rows: %v, %v", out.CostUSD, err)
	}
	for _, bad := range []string{`-1`, `"1"`, `1e999`, `x`} {
		err := ParseLine(`{"cost_usd":`+bad+`,"rows":[]}`, &out)
		if err == nil || !strings.Contains(err.Error(), `"cost_usd"`) {
			t.Errorf("cost_usd %s: err %v, want one naming the field", bad, err)
		}
	}
}

// TestRecordRule: a row is a record only with a length and a shard; a
// marker, a row of length 0 and any row of a line without a shard are not.
func TestRecordRule(t *testing.T) {
	for _, c := range []struct {
		shard string
		n     int64
		want  bool
	}{
		{"data/shard-00001.jsonl", 12, true},
		{"failed/shard-00002.parquet", 1, true},
		{"data/shard-00001.jsonl", 0, false},
		{"data/shard-00001.jsonl", -1, false},
		{"", 12, false},
		{"", -1, false},
	} {
		l := Line{Shard: c.shard, Rows: []Row{{Key: "k", Len: c.n}}}
		if got := l.Record(&l.Rows[0]); got != c.want {
			t.Errorf("shard %q len %d: Record %v, want %v", c.shard, c.n, got, c.want)
		}
	}
}

// TestTornEndRule: only the last line may be a torn end, and never for a
// shard path outside the folder.
func TestTornEndRule(t *testing.T) {
	var l Line
	bad := ParseLine(`{"shard":"data/shard-1.jsonl"`, &l)
	outside := ParseLine(`{"shard":"../x.jsonl","rows":[]}`, &l)
	if bad == nil || !errors.Is(outside, ErrShardPath) {
		t.Fatalf("parse errors %v, %v", bad, outside)
	}
	for _, c := range []struct {
		last bool
		err  error
		want bool
	}{
		{true, bad, true},
		{false, bad, false},
		{true, outside, false},
		{true, nil, false},
	} {
		if got := TornEnd(c.last, c.err); got != c.want {
			t.Errorf("TornEnd(%v, %v) = %v, want %v", c.last, c.err, got, c.want)
		}
	}
}
