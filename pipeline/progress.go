package pipeline

import (
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// ProgressMode chooses how progress is shown.
type ProgressMode int

const (
	// ProgressAuto (the zero value) draws a bar when the writer is a terminal
	// and prints plain log lines otherwise.
	ProgressAuto ProgressMode = iota
	// ProgressBar always draws a bar.
	ProgressBar
	// ProgressPlain always prints plain log lines, never a carriage return.
	ProgressPlain
)

// ProgressOptions configure NewProgress. The zero value of every field means
// its default.
type ProgressOptions struct {
	Writer   io.Writer     // default os.Stderr
	Mode     ProgressMode  // default ProgressAuto
	Interval time.Duration // plain mode: one line this often; default 5s
	Label    string        // prefix of every plain line and the bar; default "progress"
	Now      func() time.Time
}

// Progress reports how a run is going: done/total, ok/failed, in flight,
// skipped, rate and ETA. The total may stay unknown until the source is
// exhausted. Run drives it; its counters are atomics, and drawing happens on
// its own goroutine at most every 200 ms (bar) or Interval (plain), so the
// cost per record is a few atomic adds.
type Progress struct {
	opts  ProgressOptions
	plain bool

	total    atomic.Int64 // -1 unknown; records the source yields, skipped included
	skipped  atomic.Int64
	done     atomic.Int64
	ok       atomic.Int64
	failed   atomic.Int64
	inflight atomic.Int64
	tokens   atomic.Int64 // total tokens of the finished records
	nanoUSD  atomic.Int64 // their cost_usd, in 1e-9 USD
	priced   atomic.Int64 // finished records with a cost

	startOnce, stopOnce sync.Once
	started             time.Time
	quit                chan struct{}
	wg                  sync.WaitGroup
	barDrawn            bool // a bar line is on the terminal (stop ends it)
}

// NewProgress returns a reporter writing to opts.Writer. Nothing is drawn
// until Run starts it.
func NewProgress(opts ProgressOptions) *Progress {
	if opts.Writer == nil {
		opts.Writer = os.Stderr
	}
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Second
	}
	if opts.Label == "" {
		opts.Label = "progress"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	p := &Progress{opts: opts, quit: make(chan struct{})}
	p.total.Store(-1)
	switch opts.Mode {
	case ProgressPlain:
		p.plain = true
	case ProgressAuto:
		f, ok := opts.Writer.(*os.File)
		p.plain = !ok || !term.IsTerminal(int(f.Fd()))
	}
	return p
}

func (p *Progress) setTotal(n int64) {
	if p != nil {
		p.total.Store(n)
	}
}

func (p *Progress) skip() {
	if p != nil {
		p.skipped.Add(1)
	}
}

func (p *Progress) dispatch() {
	if p != nil {
		p.inflight.Add(1)
	}
}

func (p *Progress) finish(ok, failed int) {
	if p != nil {
		p.inflight.Add(-1)
		p.done.Add(1)
		p.ok.Add(int64(ok))
		p.failed.Add(int64(failed))
	}
}

// spend adds the usage and cost of finished records.
func (p *Progress) spend(recs []*schemas.Record) {
	if p == nil {
		return
	}
	for _, r := range recs {
		if r == nil {
			continue
		}
		p.tokens.Add(r.Usage.TotalTokens)
		if r.CostUSD != nil {
			p.nanoUSD.Add(int64(math.Round(*r.CostUSD * 1e9)))
			p.priced.Add(1)
		}
	}
}

func (p *Progress) start() {
	if p == nil {
		return
	}
	p.startOnce.Do(func() {
		p.started = p.opts.Now()
		every := p.opts.Interval
		if !p.plain {
			every = 200 * time.Millisecond
		}
		p.wg.Add(1)
		go p.loop(every)
	})
}

func (p *Progress) loop(every time.Duration) {
	defer p.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-t.C:
			p.draw()
		}
	}
}

// Snapshot is the state of a Progress at one moment.
type Snapshot struct {
	Total    int64 // records to process, skipped ones excluded; -1 unknown
	Done     int64
	OK       int64 // records written with an OK outcome
	Failed   int64 // records written with another outcome
	InFlight int64
	Skipped  int64
	Rate     float64       // done per second since the start
	ETA      time.Duration // -1 unknown
	Tokens   int64         // total tokens of the finished records
	CostUSD  float64       // their spend; 0 with Priced 0 means unknown
	Priced   int64         // finished records with a cost
	// ProjectedUSD is CostUSD plus the mean cost of a finished record times
	// the records left; -1 unknown.
	ProjectedUSD float64
}

// Snapshot returns the current counters. It is safe to call at any time,
// also on a nil Progress.
func (p *Progress) Snapshot() Snapshot {
	if p == nil {
		return Snapshot{Total: -1, ETA: -1}
	}
	s := Snapshot{Total: -1, ETA: -1, Done: p.done.Load(), OK: p.ok.Load(), Failed: p.failed.Load(),
		InFlight: p.inflight.Load(), Skipped: p.skipped.Load(), ProjectedUSD: -1,
		Tokens: p.tokens.Load(), CostUSD: float64(p.nanoUSD.Load()) / 1e9, Priced: p.priced.Load()}
	if t := p.total.Load(); t >= 0 {
		s.Total = max(t-s.Skipped, s.Done+s.InFlight)
	}
	if !p.started.IsZero() {
		if el := p.opts.Now().Sub(p.started).Seconds(); el > 0 {
			s.Rate = float64(s.Done) / el
		}
	}
	if s.Total >= 0 && s.Rate > 0 {
		s.ETA = time.Duration(float64(s.Total-s.Done) / s.Rate * float64(time.Second)).Round(time.Second)
	}
	if s.Total >= 0 && s.Priced > 0 {
		s.ProjectedUSD = s.CostUSD + s.CostUSD/float64(s.Priced)*float64(max(s.Total-s.Done, 0))
	}
	return s
}

// spendText is the tokens and spend part of a progress line.
func (s Snapshot) spendText() string {
	t := fmt.Sprintf("%s tokens", shortCount(s.Tokens))
	if s.Priced == 0 {
		return t
	}
	t += fmt.Sprintf(", $%.4f", s.CostUSD)
	if s.ProjectedUSD >= 0 {
		t += fmt.Sprintf(" (projected $%.4f)", s.ProjectedUSD)
	}
	return t
}

// shortCount prints n as 950, 12.3k or 4.56M.
func shortCount(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// Line formats a snapshot as one plain progress line without a newline.
func (s Snapshot) Line(label string) string {
	total, eta := "?", "?"
	if s.Total >= 0 {
		total = fmt.Sprint(s.Total)
	}
	if s.ETA >= 0 {
		eta = s.ETA.String()
	}
	return fmt.Sprintf("%s: %d/%s done, %d ok, %d failed, %d in flight, %d skipped, %.2f/s, eta %s, %s",
		label, s.Done, total, s.OK, s.Failed, s.InFlight, s.Skipped, s.Rate, eta, s.spendText())
}

func (p *Progress) draw() {
	s := p.Snapshot()
	if p.plain {
		fmt.Fprintf(p.opts.Writer, "%s %s\n", p.opts.Now().Format(time.RFC3339), s.Line(p.opts.Label))
		return
	}
	var elapsed time.Duration
	if !p.started.IsZero() {
		elapsed = p.opts.Now().Sub(p.started)
	}
	// Carriage return, the bar, then erase what a longer earlier line left.
	fmt.Fprintf(p.opts.Writer, "\r%s\x1b[K", s.BarLine(p.opts.Label, elapsed))
	p.barDrawn = true
}

// barWidth is the number of cells of the drawn bar.
const barWidth = 30

// BarLine formats a snapshot as the terminal bar: percentage and count from
// the same Done and Total (the percentage is rounded down, so 100% means
// all done), rate, elapsed time and ETA from the Snapshot's clock, then the
// outcomes and spend. With the total unknown it shows the count and rate.
func (s Snapshot) BarLine(label string, elapsed time.Duration) string {
	eta := "?"
	if s.ETA >= 0 {
		eta = s.ETA.String()
	}
	head := fmt.Sprintf("%s %d/?", label, s.Done)
	if s.Total > 0 {
		frac := min(float64(s.Done)/float64(s.Total), 1)
		fill := int(frac * barWidth)
		bar := make([]byte, barWidth)
		for i := range bar {
			switch {
			case i < fill:
				bar[i] = '='
			case i == fill:
				bar[i] = '>'
			default:
				bar[i] = ' '
			}
		}
		head = fmt.Sprintf("%s %3d%% |%s| %d/%d", label, int(frac*100), bar, s.Done, s.Total)
	} else if s.Total == 0 {
		head = fmt.Sprintf("%s 100%% 0/0", label)
	}
	return fmt.Sprintf("%s (%.2f rec/s, %s elapsed, eta %s) %d ok, %d failed, %d in flight, %d skipped, %s",
		head, s.Rate, elapsed.Round(time.Second), eta, s.OK, s.Failed, s.InFlight, s.Skipped, s.spendText())
}

func (p *Progress) stop() {
	if p == nil {
		return
	}
	p.stopOnce.Do(func() {
		if p.started.IsZero() {
			return
		}
		close(p.quit)
		p.wg.Wait()
		p.draw()
		if p.barDrawn {
			fmt.Fprintln(p.opts.Writer)
		}
	})
}
