package pipeline

import (
	"fmt"
	"io"
	"math/bits"
	"slices"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// The parts of a record's wall time, in the order stats, report and view
// list them. A record's wall time is queue_ms + duration_ms: queue_ms is
// the wait for a worker before the stages began, duration_ms the stages'
// own time, which model, tool, sandbox_start, sandbox_close and grader add
// up to but for "other" (the rollout's own bookkeeping: building requests,
// converting the trajectory).
const (
	PartModel        = "model"
	PartTool         = "tool"
	PartSandboxStart = "sandbox_start"
	PartSandboxClose = "sandbox_close"
	PartGrader       = "grader"
	PartQueue        = "queue"
	PartOther        = "other"
)

// statDecode are the members Stats decodes: statMembers and the timings.
var statDecode = append(statMembers[:len(statMembers):len(statMembers)], schemas.MemberTimings)

// TimingParts lists the parts in their order.
var TimingParts = [...]string{PartModel, PartTool, PartSandboxStart, PartSandboxClose, PartGrader, PartQueue, PartOther}

const nParts = len(TimingParts)

// partsOf returns the milliseconds of each part of one record, in
// TimingParts' order, and its wall time.
func partsOf(t *schemas.Timings, durationMS int64) (p [nParts]int64, wall int64) {
	p = [nParts]int64{t.ModelMS, t.ToolMS, t.SandboxStartMS, t.SandboxCloseMS, t.GraderMS, t.QueueMS, 0}
	p[6] = max(0, durationMS-(t.ModelMS+t.ToolMS+t.SandboxStartMS+t.SandboxCloseMS+t.GraderMS))
	return p, max(0, durationMS) + t.QueueMS
}

// TimingStatistics summarise the timings of the records that carry them
// (records of folders written before timings, and of modes that keep none,
// are left out): per part its total, percentiles and share of the wall
// time. Percentiles come from a histogram exact below 2,048 ms and within
// 0.1 % above, so statistics of several folders merge exactly (Add).
type TimingStatistics struct {
	Records int          `json:"records"`
	WallMS  int64        `json:"wall_ms"` // sum of queue_ms + duration_ms
	Parts   []TimingPart `json:"parts"`   // in TimingParts' order

	hist [nParts]msHist
}

// TimingPart is one part of the wall time over the records.
type TimingPart struct {
	Name    string  `json:"name"`
	TotalMS int64   `json:"total_ms"`
	P50MS   int64   `json:"p50_ms"`
	P90MS   int64   `json:"p90_ms"`
	P99MS   int64   `json:"p99_ms"`
	MaxMS   int64   `json:"max_ms"`
	Share   float64 `json:"share"` // TotalMS / WallMS
}

// addTimings counts one record into *ts (allocated at the first record
// with timings); a record without timings changes nothing.
func addTimings(ts **TimingStatistics, t *schemas.Timings, durationMS int64) {
	if t == nil {
		return
	}
	if *ts == nil {
		*ts = &TimingStatistics{}
	}
	s := *ts
	p, wall := partsOf(t, durationMS)
	s.Records++
	s.WallMS += wall
	for i, v := range p {
		s.hist[i].add(v)
	}
}

// mergeTimings returns a with b's counts added (either may be nil); call
// finish afterwards. Statistics read back from statistics.json have no
// histograms: their percentiles are then the larger of the two.
func mergeTimings(a, b *TimingStatistics) *TimingStatistics {
	if b == nil {
		return a
	}
	if a == nil {
		a = &TimingStatistics{}
	}
	a.Records += b.Records
	a.WallMS += b.WallMS
	for i := range a.hist {
		a.hist[i].merge(&b.hist[i])
	}
	if a.hist[0].n == 0 && len(b.Parts) == nParts {
		// No histogram (decoded from JSON): keep the largest figures.
		if len(a.Parts) != nParts {
			a.Parts = slices.Clone(b.Parts)
			return a
		}
		for i, p := range b.Parts {
			q := &a.Parts[i]
			q.TotalMS += p.TotalMS
			q.P50MS, q.P90MS, q.P99MS, q.MaxMS = max(q.P50MS, p.P50MS), max(q.P90MS, p.P90MS), max(q.P99MS, p.P99MS), max(q.MaxMS, p.MaxMS)
		}
	}
	return a
}

// finish computes the parts' figures from the histograms (when it has
// them) and each part's share of the wall time.
func (s *TimingStatistics) finish() {
	if s == nil {
		return
	}
	if s.hist[0].n > 0 {
		s.Parts = make([]TimingPart, nParts)
		for i := range s.hist {
			h := &s.hist[i]
			s.Parts[i] = TimingPart{Name: TimingParts[i], TotalMS: h.sum, P50MS: h.quantile(50), P90MS: h.quantile(90),
				P99MS: h.quantile(99), MaxMS: h.max}
		}
	}
	for i := range s.Parts {
		s.Parts[i].Share = 0
		if s.WallMS > 0 {
			s.Parts[i].Share = float64(s.Parts[i].TotalMS) / float64(s.WallMS)
		}
	}
}

// Biggest returns the part with the largest share of the wall time ("" when
// there is none).
func (s *TimingStatistics) Biggest() TimingPart {
	var b TimingPart
	if s == nil {
		return b
	}
	for _, p := range s.Parts {
		if p.TotalMS > b.TotalMS {
			b = p
		}
	}
	return b
}

// writeText prints the timings block of Statistics.WriteText: one line per
// part that took any time, with its share and percentiles.
func (s *TimingStatistics) writeText(w io.Writer) {
	if s == nil || s.Records == 0 {
		return
	}
	fmt.Fprintf(w, "timings\tover %d records, wall time %s (queue + duration)", s.Records, FormatMS(s.WallMS))
	if b := s.Biggest(); b.Name != "" {
		fmt.Fprintf(w, "; most in %s", b.Name)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  part\tshare\ttotal\tp50\tp90\tp99\tmax\n")
	for _, p := range s.Parts {
		if p.TotalMS == 0 && p.MaxMS == 0 {
			continue
		}
		fmt.Fprintf(w, "  %s\t%.1f%%\t%s\t%s\t%s\t%s\t%s\n", p.Name, 100*p.Share, FormatMS(p.TotalMS),
			FormatMS(p.P50MS), FormatMS(p.P90MS), FormatMS(p.P99MS), FormatMS(p.MaxMS))
	}
}

// FormatMS writes a number of milliseconds for people: "850ms", "12.4s",
// "3m05s", "2h14m".
func FormatMS(ms int64) string {
	switch {
	case ms < 1000:
		return fmt.Sprintf("%dms", ms)
	case ms < 60_000:
		return fmt.Sprintf("%.1fs", float64(ms)/1000)
	case ms < 3_600_000:
		return fmt.Sprintf("%dm%02ds", ms/60_000, ms/1000%60)
	}
	return fmt.Sprintf("%dh%02dm", ms/3_600_000, ms/60_000%60)
}

// msHist counts milliseconds in buckets: exact below 2,048, above that
// the value's top 11 bits (a bucket is under 0.1 % wide). Its memory is
// a few thousand buckets whatever the number of records.
type msHist struct {
	buckets map[int64]int64
	n, sum  int64
	max     int64
}

// histBits is how many leading bits of a value its bucket keeps.
const histBits = 11

func bucketOf(v int64) int64 {
	if v < 1<<histBits {
		return v
	}
	shift := bits.Len64(uint64(v)) - histBits
	return v >> shift << shift
}

func (h *msHist) add(v int64) {
	v = max(v, 0)
	if h.buckets == nil {
		h.buckets = map[int64]int64{}
	}
	h.buckets[bucketOf(v)]++
	h.n++
	h.sum += v
	h.max = max(h.max, v)
}

func (h *msHist) merge(o *msHist) {
	if o.n == 0 {
		return
	}
	if h.buckets == nil {
		h.buckets = map[int64]int64{}
	}
	for b, c := range o.buckets {
		h.buckets[b] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// quantile returns the p-th percentile (the value of rank (n-1)*p/100, as
// the duration percentiles are taken): the bucket's lower bound, or the
// maximum when that is smaller.
func (h *msHist) quantile(p int64) int64 {
	if h.n == 0 {
		return 0
	}
	keys := make([]int64, 0, len(h.buckets))
	for b := range h.buckets {
		keys = append(keys, b)
	}
	slices.Sort(keys)
	rank := (h.n - 1) * p / 100
	var seen int64
	for _, b := range keys {
		seen += h.buckets[b]
		if seen > rank {
			return min(b, h.max)
		}
	}
	return h.max
}
