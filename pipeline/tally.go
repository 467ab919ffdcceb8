package pipeline

import (
	"sort"
	"strings"
	"sync"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// Tally is what the records one run wrote add up to: outcomes, tokens,
// spend and the error messages of the records that did not end OK. Unlike
// statistics.json it covers this run only, for the closing summary.
type Tally struct {
	Outcomes map[schemas.Outcome]int
	Tokens   int64
	CostUSD  float64 // over the Priced records
	Priced   int     // records with a cost
	Records  int
	Errors   map[string]int // error message (first line, at most errTextMax bytes) -> records
	// Timings: where the wall time of this run's records went (nil when
	// none carries timings); the closing summary names the biggest part.
	Timings *TimingStatistics
}

// errTextMax bounds an error message kept by a Tally.
const errTextMax = 160

// tallyOf collects a Tally under a lock; workers add to it concurrently.
type tallyOf struct {
	mu sync.Mutex
	t  Tally
	// timed: the run's stages time its records (RecordTimer); otherwise
	// timings a record brought from its input (compress over generate's
	// records) are not this run's and stay out of Tally.Timings.
	timed bool
}

func (c *tallyOf) add(rows []pending) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range rows {
		if p.line == nil || p.rec == nil {
			continue
		}
		t, rec := &c.t, p.rec
		if t.Outcomes == nil {
			t.Outcomes, t.Errors = map[schemas.Outcome]int{}, map[string]int{}
		}
		t.Records++
		t.Outcomes[p.outcome]++
		t.Tokens += rec.Usage.TotalTokens
		if rec.CostUSD != nil {
			t.CostUSD += *rec.CostUSD
			t.Priced++
		}
		if !p.outcome.OK() && rec.Error != "" {
			t.Errors[errText(rec.Error)]++
		}
		if c.timed {
			addTimings(&t.Timings, rec.Timings, rec.DurationMS)
		}
	}
}

func (c *tallyOf) get() Tally {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t.Timings.finish()
	return c.t
}

// errText is the first line of msg, cut to errTextMax bytes on a rune
// boundary.
func errText(msg string) string {
	msg, _, _ = strings.Cut(strings.TrimSpace(msg), "\n")
	if len(msg) > errTextMax {
		i := errTextMax
		for i > 0 && msg[i]&0xc0 == 0x80 {
			i--
		}
		msg = msg[:i] + "…"
	}
	return msg
}

// Counted is one entry of a count table.
type Counted struct {
	Name  string
	Count int
}

// Top returns the n largest entries of m, most frequent first, ties by name.
func Top[K ~string](m map[K]int, n int) []Counted {
	out := make([]Counted, 0, len(m))
	for k, v := range m {
		out = append(out, Counted{string(k), v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Name < out[j].Name
	})
	if n >= 0 && len(out) > n {
		out = out[:n]
	}
	return out
}
