package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// TestHistogramQuantiles: exact below 2,048 ms, within 0.1 % above, and two
// merged histograms answer as one built from both.
func TestHistogramQuantiles(t *testing.T) {
	var h, a, b msHist
	for v := int64(1); v <= 1000; v++ {
		h.add(v)
		if v%2 == 0 {
			a.add(v)
		} else {
			b.add(v)
		}
	}
	a.merge(&b)
	for _, p := range []int64{50, 90, 99} {
		want := (1000-1)*p/100 + 1
		if got := h.quantile(p); got != want {
			t.Errorf("p%d = %d, want %d", p, got, want)
		}
		if got := a.quantile(p); got != want {
			t.Errorf("merged p%d = %d, want %d", p, got, want)
		}
	}
	if h.max != 1000 || h.sum != 500500 || a.sum != h.sum || a.max != h.max {
		t.Fatalf("max %d sum %d; merged max %d sum %d", h.max, h.sum, a.max, a.sum)
	}
	var big msHist
	for _, v := range []int64{1_234_567, 7_654_321, 99_999} {
		big.add(v)
	}
	if got := big.quantile(50); got > 1_234_567 || got < 1_234_567*999/1000 {
		t.Fatalf("p50 of large values %d, want within 0.1%% below 1234567", got)
	}
	if big.max != 7_654_321 {
		t.Fatalf("max %d", big.max)
	}
}

// TestStatsTimings: stats read each record's timings into parts whose
// totals, percentiles and shares of the wall time (queue + duration) are
// those of the records; records without timings are left out; the text
// and the JSON both carry them.
func TestStatsTimings(t *testing.T) {
	dir := t.TempDir()
	stage := &funcStage{name: "timed", fn: func(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
		complete(rec)
		i := int64(rec.PromptIndex)
		if i == 0 {
			return []*schemas.Record{rec}, nil // no timings: not counted
		}
		// Record i: model 100·i, tool 10·i, sandbox start 5, queue 20,
		// duration = the parts + 1 ms of its own.
		rec.Timings = &schemas.Timings{ModelMS: 100 * i, ToolMS: 10 * i, SandboxStartMS: 5, QueueMS: 20}
		rec.DurationMS = 100*i + 10*i + 5 + 1
		return []*schemas.Record{rec}, nil
	}}
	runAll(t, dir, ModeFresh, 11, stage)
	st, err := Stats(dir)
	if err != nil {
		t.Fatal(err)
	}
	tm := st.Timings
	if tm == nil || tm.Records != 10 || len(tm.Parts) != len(TimingParts) {
		t.Fatalf("timings %+v", tm)
	}
	// Σ over i=1..10: model 5500, tool 550, start 50, other 10, queue 200.
	wall := int64(5500 + 550 + 50 + 10 + 200)
	if tm.WallMS != wall {
		t.Fatalf("wall %d, want %d", tm.WallMS, wall)
	}
	want := map[string]TimingPart{
		PartModel:        {TotalMS: 5500, P50MS: 500, P90MS: 900, P99MS: 900, MaxMS: 1000},
		PartTool:         {TotalMS: 550, P50MS: 50, P90MS: 90, P99MS: 90, MaxMS: 100},
		PartSandboxStart: {TotalMS: 50, P50MS: 5, P90MS: 5, P99MS: 5, MaxMS: 5},
		PartQueue:        {TotalMS: 200, P50MS: 20, P90MS: 20, P99MS: 20, MaxMS: 20},
		PartOther:        {TotalMS: 10, P50MS: 1, P90MS: 1, P99MS: 1, MaxMS: 1},
		PartSandboxClose: {}, PartGrader: {},
	}
	var shares float64
	for _, p := range tm.Parts {
		w := want[p.Name]
		w.Name = p.Name
		w.Share = p.Share
		if p != w {
			t.Errorf("part %+v, want %+v", p, w)
		}
		if got, exp := p.Share, float64(w.TotalMS)/float64(wall); got != exp {
			t.Errorf("%s share %f, want %f", p.Name, got, exp)
		}
		shares += p.Share
	}
	if shares < 0.999999 || shares > 1.000001 {
		t.Fatalf("shares add up to %f, want 1", shares)
	}
	if b := tm.Biggest(); b.Name != PartModel {
		t.Fatalf("biggest %q", b.Name)
	}
	var text bytes.Buffer
	if err := st.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"timings", "most in model", "model", "sandbox_start", "5.5s", "p99"} {
		if !strings.Contains(text.String(), line) {
			t.Fatalf("text lacks %q:\n%s", line, text.String())
		}
	}
	if strings.Contains(text.String(), "grader") {
		t.Fatalf("a part that took no time is listed:\n%s", text.String())
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back Statistics
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Timings == nil || back.Timings.WallMS != wall || back.Timings.Parts[0].P90MS != 900 {
		t.Fatalf("statistics JSON timings %+v", back.Timings)
	}

	// Two folders' statistics merge exactly: the same as one folder with
	// both folders' records.
	merged := NewStatistics()
	merged.Add(st)
	merged.Add(st)
	merged.Finish()
	if m := merged.Timings; m.Records != 20 || m.WallMS != 2*wall || m.Parts[0].P90MS != 900 || m.Parts[0].Share != tm.Parts[0].Share {
		t.Fatalf("merged timings %+v", m)
	}
}
