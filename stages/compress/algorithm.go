package compress

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/tokenizer"
)

// Outcomes of one compressed row, beyond the runtime's own. All are final;
// OutcomeSummaryFailed makes the run exit 3 (schemas treats it as failed).
const (
	OutcomeUnderTarget    schemas.Outcome = "under_target"               // fits already; passed through byte-identical
	OutcomeCompressed     schemas.Outcome = "compressed"                 // summarised into the budget
	OutcomeStillOverLimit schemas.Outcome = "still_over_limit"           // over budget after every pass, or nothing could be summarised
	OutcomeSummaryFailed                  = schemas.OutcomeSummaryFailed // a summary call failed; the original row is kept
	// OutcomeBudgetExceeded: the row's summary calls reached
	// SummaryOptions.MaxCostPerRow or MaxTokensPerRow before it fitted; the
	// original row is kept, and --resume does not summarise it again (the
	// runtime's final outcome, so not listed in OutcomeSet).
	OutcomeBudgetExceeded = schemas.OutcomeBudgetExceeded
)

// Outcomes lists the outcomes a compress run adds to the runtime's, for
// pipeline.OutputOptions.Outcomes.
var Outcomes = OutcomeSet.All()

// OutcomeSet is what compress declares to its output folder: a row whose
// summary failed keeps its original conversation and is final for the exit
// code, but --resume compresses it again.
var OutcomeSet = outdir.OutcomeSet{
	Final:     []schemas.Outcome{OutcomeUnderTarget, OutcomeCompressed, OutcomeStillOverLimit},
	Retryable: []schemas.Outcome{OutcomeSummaryFailed},
}

// OutcomeField is the record member holding compress's own outcome: a
// hermes-pipe record keeps its input's outcome in "outcome".
const OutcomeField = MetricsMember + ".outcome"

// UsageField and CostField are the record members holding what a row's
// summary calls used and cost: statistics.json sums these, not the input
// record's usage and cost_usd (which compress leaves as they were).
const (
	UsageField = MetricsMember + ".summary_usage"
	CostField  = MetricsMember + ".summary_cost_usd"
)

// CallsField is the record member holding how many summary calls a row
// made: statistics.json's api_calls counts these, not the input record's
// api_calls (its rollout's calls, which compress leaves as they were).
const CallsField = MetricsMember + ".summarization_api_calls"

// SummaryPrefix starts every summary turn, as in Hermes' datasets.
const SummaryPrefix = "[CONTEXT SUMMARY]:"

// DefaultNotice is appended to the system turn of a compressed row; it is the
// text Hermes' compressor appends, so datasets stay alike.
const DefaultNotice = "\n\nSome of your previous tool responses may be summarized to preserve context."

// Defaults of Config.
const (
	DefaultTargetTokens  = 15250
	DefaultSummaryTokens = 750
	DefaultProtectLast   = 4
	DefaultMaxPasses     = 3
)

// Config is the token budget and the shape of a compression. The zero value of
// every field means its default.
type Config struct {
	// TargetTokens is the budget of one row, turn overhead included.
	TargetTokens int
	// SummaryTokens is the expected length of one summary; the summary
	// request may use twice as many (max_tokens).
	SummaryTokens int
	// ProtectLast is how many final turns are never summarised: 0 means
	// DefaultProtectLast, a negative value protects none.
	ProtectLast int
	// The first system, human, gpt and tool turns are never summarised
	// (Hermes' protect_first_* settings); each of these turns that
	// protection off for its role.
	NoProtectFirstSystem, NoProtectFirstHuman, NoProtectFirstGPT, NoProtectFirstTool bool
	// TurnOverhead is added to the token count of every turn: the chat
	// template's per-turn tokens, so "fits the budget" holds at training time.
	TurnOverhead int
	// SummaryRole is the "from" of the summary turn; default "human".
	SummaryRole string
	// Notice is appended to the first system turn when a row is compressed;
	// "" means DefaultNotice. NoNotice appends nothing.
	Notice   string
	NoNotice bool
	// MaxPasses bounds how many summaries one row may get when one pass
	// leaves it over budget (widening the region or taking the next one).
	MaxPasses int
}

func (c *Config) fill() error {
	if c.TargetTokens < 0 || c.SummaryTokens < 0 || c.TurnOverhead < 0 || c.MaxPasses < 0 {
		return errors.New("compress config: token counts and passes must not be negative")
	}
	if c.TargetTokens == 0 {
		c.TargetTokens = DefaultTargetTokens
	}
	if c.SummaryTokens == 0 {
		c.SummaryTokens = DefaultSummaryTokens
	}
	if c.SummaryTokens >= c.TargetTokens {
		return fmt.Errorf("compress config: summary tokens (%d) must be below the target (%d)", c.SummaryTokens, c.TargetTokens)
	}
	if c.ProtectLast == 0 {
		c.ProtectLast = DefaultProtectLast
	} else if c.ProtectLast < 0 {
		c.ProtectLast = 0
	}
	if c.SummaryRole == "" {
		c.SummaryRole = "human"
	}
	if c.Notice == "" {
		c.Notice = DefaultNotice
	}
	if c.NoNotice {
		c.Notice = ""
	}
	if c.MaxPasses == 0 {
		c.MaxPasses = DefaultMaxPasses
	}
	return nil
}

// turn is one conversation turn during compression.
type turn struct {
	from, value string
	raw         string // the element's original JSON; "" once the turn is new or edited
	orig        int    // index in the input conversation; -1 for a summary turn
	prot        bool   // never summarised
	tokens      int    // token count of value plus the turn overhead
}

// Summarizer turns the formatted content of a region into a summary text
// (SummaryPrefix included). It records its calls and failures in m. It is
// called from many goroutines at once.
type Summarizer func(ctx context.Context, content string, m *RowMetrics) (string, error)

// compressor applies Config with one tokenizer. It is safe for concurrent use.
type compressor struct {
	cfg         Config
	tok         tokenizer.Tokenizer
	prefixCost  int // tokens of the summary prefix and its space
	summaryCost int // expected tokens of one summary turn
}

func newCompressor(cfg Config, tok tokenizer.Tokenizer) (*compressor, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, errors.New("compress config: a tokenizer is required")
	}
	c := &compressor{cfg: cfg, tok: tok}
	c.prefixCost = tok.Count(SummaryPrefix + " ")
	c.summaryCost = cfg.SummaryTokens + c.prefixCost + cfg.TurnOverhead
	return c, nil
}

func (c *compressor) count(s string) int { return c.tok.Count(s) + c.cfg.TurnOverhead }

// result is what compressing one row gave.
type result struct {
	outcome schemas.Outcome
	turns   []turn // the row's turns after compression (the input's when unchanged)
	changed bool   // turns differ from the input
	err     error  // why the summary failed (summary_failed)
	metrics RowMetrics
}

// prepare counts the tokens of turns and marks the protected ones: the first
// system, human, gpt and tool turns (unless turned off) and the last
// ProtectLast turns.
func (c *compressor) prepare(turns []turn) int {
	total := 0
	seen := map[string]bool{
		"system": c.cfg.NoProtectFirstSystem, "human": c.cfg.NoProtectFirstHuman,
		"gpt": c.cfg.NoProtectFirstGPT, "tool": c.cfg.NoProtectFirstTool,
	}
	for i := range turns {
		t := &turns[i]
		t.orig = i
		t.tokens = c.count(t.value)
		total += t.tokens
		switch t.from {
		case "system", "human", "gpt", "tool":
			if !seen[t.from] {
				seen[t.from] = true
				t.prot = true
			}
		}
		if i >= len(turns)-c.cfg.ProtectLast {
			t.prot = true
		}
	}
	return total
}

// compress fits turns into the budget. It returns an error only when ctx
// itself ended (the row must then be redone); a failed summary is a result.
func (c *compressor) compress(ctx context.Context, turns []turn, summarize Summarizer) (result, error) {
	return c.passes(ctx, turns, summarize, c.count)
}

// passes is compress with the token count of each summary turn given by
// summaryTokens (overhead included): the real count when compressing, the
// expected summaryCost when DryRun projects the same passes without a call.
func (c *compressor) passes(ctx context.Context, turns []turn, summarize Summarizer, summaryTokens func(text string) int) (result, error) {
	var r result
	m := &r.metrics
	total := c.prepare(turns)
	m.OriginalTokens, m.CompressedTokens = total, total
	m.OriginalTurns, m.CompressedTurns = len(turns), len(turns)
	m.RegionStart, m.RegionEnd = -1, -1
	m.TargetTokens = c.cfg.TargetTokens
	m.OriginalTurnTokens = turnTokens(turns)
	m.TurnTokens = m.OriginalTurnTokens
	r.turns = turns
	if total <= c.cfg.TargetTokens {
		m.SkippedUnderTarget = true
		r.outcome = OutcomeUnderTarget
		m.Outcome = string(r.outcome)
		return r, nil
	}
	cur := append([]turn(nil), turns...)
	sys := -1
	for i, t := range turns {
		if t.from == "system" {
			sys = i
			break
		}
	}
	noticeCost := 0
	if sys >= 0 && c.cfg.Notice != "" {
		noticeCost = c.tok.Count(turns[sys].value+c.cfg.Notice) - c.tok.Count(turns[sys].value)
	}
	noticed := false
	summarised := 0
	for pass := 0; pass < c.cfg.MaxPasses && total > c.cfg.TargetTokens; pass++ {
		extra := c.summaryCost
		if !noticed {
			extra += noticeCost
		}
		need := total - c.cfg.TargetTokens + extra
		if pass == c.cfg.MaxPasses-1 {
			// The last pass takes every unprotected turn it can, so a row
			// whose protected turns plus one summary fit ends within budget
			// even when earlier summaries came out longer than expected.
			need = math.MaxInt
		}
		s, u, ok := c.region(cur, need, extra)
		if !ok {
			break
		}
		text, err := summarize(ctx, formatRegion(cur[s:u]), m)
		if err != nil {
			if ctx.Err() != nil {
				return r, ctx.Err()
			}
			if errors.Is(err, pipeline.ErrDeferred) {
				return r, err
			}
			r.outcome = OutcomeSummaryFailed
			if errors.Is(err, errRowBudget) {
				r.outcome = OutcomeBudgetExceeded
			}
			r.err = err
			r.turns, r.changed = turns, false
			m.Outcome, m.Error = string(r.outcome), err.Error()
			m.StillOverLimit = true
			m.CompressedTokens, m.CompressedTurns = m.OriginalTokens, m.OriginalTurns
			return r, nil
		}
		for _, t := range cur[s:u] {
			if t.orig >= 0 {
				summarised++
				if m.RegionStart < 0 || t.orig < m.RegionStart {
					m.RegionStart = t.orig
				}
				if t.orig+1 > m.RegionEnd {
					m.RegionEnd = t.orig + 1
				}
			}
		}
		sum := turn{from: c.cfg.SummaryRole, value: text, orig: -1, tokens: summaryTokens(text)}
		next := make([]turn, 0, len(cur)-(u-s)+1)
		next = append(next, cur[:s]...)
		next = append(next, sum)
		next = append(next, cur[u:]...)
		cur = next
		if !noticed && sys >= 0 && c.cfg.Notice != "" {
			for i := range cur {
				if cur[i].orig == sys {
					cur[i].value += c.cfg.Notice
					cur[i].raw = ""
					cur[i].tokens = c.count(cur[i].value)
				}
			}
		}
		noticed = true
		m.Passes++
		total = 0
		for _, t := range cur {
			total += t.tokens
		}
	}
	m.TurnsInRegion = summarised
	if m.Passes == 0 {
		r.outcome = OutcomeStillOverLimit
		m.StillOverLimit = true
		m.Outcome = string(r.outcome)
		return r, nil
	}
	r.turns, r.changed = cur, true
	m.TurnTokens = turnTokens(cur)
	m.WasCompressed = true
	m.CompressedTokens, m.CompressedTurns = total, len(cur)
	m.TokensSaved = m.OriginalTokens - total
	m.TurnsRemoved = m.OriginalTurns - len(cur)
	m.CompressionRatio = float64(total) / float64(max(m.OriginalTokens, 1))
	m.StillOverLimit = total > c.cfg.TargetTokens
	r.outcome = OutcomeCompressed
	if m.StillOverLimit {
		r.outcome = OutcomeStillOverLimit
	}
	m.Outcome = string(r.outcome)
	return r, nil
}

// turnTokens lists the token count of each turn.
func turnTokens(turns []turn) []int {
	out := make([]int, len(turns))
	for i, t := range turns {
		out[i] = t.tokens
	}
	return out
}

// region picks the turns [s, u) of cur to summarise: inside the first run of
// unprotected turns (after the protected head) that can save more than extra
// tokens, from its start until the turns cover need tokens. A region never
// starts on a tool turn (its gpt call lies before it) and never ends just
// before one (the tool result would follow the summary without its call).
// With need math.MaxInt it takes the whole of the run that saves the most.
func (c *compressor) region(cur []turn, need, extra int) (s, u int, ok bool) {
	n := len(cur)
	isTool := func(i int) bool { return i < n && cur[i].from == "tool" }
	best, bs, bu := 0, 0, 0
	for a := 0; a < n; {
		if cur[a].prot {
			a++
			continue
		}
		b := a
		for b < n && !cur[b].prot {
			b++
		}
		s = a
		for s < b && isTool(s) {
			s++
		}
		acc := 0
		u = s
		for i := s; i < b; i++ {
			acc += cur[i].tokens
			u = i + 1
			if acc >= need {
				break
			}
		}
		for u < b && isTool(u) {
			u++
		}
		for u > s && isTool(u) {
			u--
		}
		if u > s {
			saving := 0
			for _, t := range cur[s:u] {
				saving += t.tokens
			}
			if saving > extra && need < math.MaxInt {
				return s, u, true
			}
			if saving > extra && saving > best {
				best, bs, bu = saving, s, u
			}
		}
		a = b
	}
	return bs, bu, best > 0
}

// Long turn values are cut to their head and tail in the summary request.
const (
	elideOver = 3000
	elideHead = 1500
	elideTail = 500
)

// formatRegion renders turns for the summary request, one block per turn
// headed by its original index and role.
func formatRegion(turns []turn) string {
	var b strings.Builder
	for i, t := range turns {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("[Turn ")
		if t.orig >= 0 {
			b.WriteString(strconv.Itoa(t.orig))
		} else {
			b.WriteString("summary")
		}
		b.WriteString(" - ")
		b.WriteString(strings.ToUpper(t.from))
		b.WriteString("]:\n")
		b.WriteString(elide(t.value))
	}
	return b.String()
}

// elide keeps the first elideHead and last elideTail characters of a value
// longer than elideOver characters, with a marker saying how many were cut.
// It walks the value's bytes (no rune copy of a long value).
func elide(v string) string {
	if len(v) <= elideOver {
		return v
	}
	n := utf8.RuneCountInString(v)
	if n <= elideOver {
		return v
	}
	head := 0
	for range elideHead {
		_, w := utf8.DecodeRuneInString(v[head:])
		head += w
	}
	tail := len(v)
	for range elideTail {
		_, w := utf8.DecodeLastRuneInString(v[:tail])
		tail -= w
	}
	cut := n - elideHead - elideTail
	return v[:head] + "\n...[" + strconv.Itoa(cut) + " characters omitted]...\n" + v[tail:]
}
