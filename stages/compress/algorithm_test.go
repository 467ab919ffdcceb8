package compress

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// wordsSummarizer returns a summary of n words and counts its calls.
func wordsSummarizer(n int, calls *atomic.Int64) Summarizer {
	return func(_ context.Context, content string, m *RowMetrics) (string, error) {
		calls.Add(1)
		m.SummarizationCalls++
		return SummaryPrefix + " " + strings.Repeat("word ", n), nil
	}
}

func toTurns(in []schemas.Turn) []turn {
	out := make([]turn, len(in))
	for i, t := range in {
		out[i] = turn{from: t.From, value: t.Value, raw: fmt.Sprintf("RAW%d", i)}
	}
	return out
}

// checkInvariants asserts the properties every compressed row must have.
func checkInvariants(t *testing.T, c *compressor, in []schemas.Turn, r result) {
	t.Helper()
	if !r.changed {
		return
	}
	out := r.turns
	prot := map[int]bool{}
	first := map[string]bool{}
	for i, tt := range in {
		if !first[tt.From] {
			first[tt.From] = true
			prot[i] = true
		}
		if i >= len(in)-c.cfg.ProtectLast {
			prot[i] = true
		}
	}
	seen := map[int]bool{}
	for i, tt := range out {
		if tt.orig >= 0 {
			seen[tt.orig] = true
			want := in[tt.orig].Value
			if tt.from == "system" && c.cfg.Notice != "" {
				want += c.cfg.Notice
			}
			if tt.value != want {
				t.Errorf("turn %d (input %d) changed: %q", i, tt.orig, tt.value)
			}
		} else {
			if tt.from != c.cfg.SummaryRole || !strings.HasPrefix(tt.value, SummaryPrefix) {
				t.Errorf("summary turn %d is %s %q", i, tt.from, tt.value)
			}
			if i+1 < len(out) && out[i+1].from == "tool" {
				t.Errorf("a tool turn follows the summary at %d without its gpt call", i)
			}
			if i > 0 && out[i-1].from == "gpt" && strings.Contains(out[i-1].value, "<tool_call>") && out[i-1].orig >= 0 &&
				out[i-1].orig+1 < len(in) && in[out[i-1].orig+1].From == "tool" {
				t.Errorf("gpt call %d lost its tool turn to the summary", out[i-1].orig)
			}
		}
	}
	for i := range prot {
		if !seen[i] {
			t.Errorf("protected turn %d (%s) was summarised", i, in[i].From)
		}
	}
	total := 0
	for _, tt := range out {
		total += c.count(tt.value)
	}
	if total != r.metrics.CompressedTokens {
		t.Errorf("metrics say %d tokens, the turns count %d", r.metrics.CompressedTokens, total)
	}
	if (total > c.cfg.TargetTokens) != (r.outcome == OutcomeStillOverLimit) {
		t.Errorf("%d tokens for target %d with outcome %s", total, c.cfg.TargetTokens, r.outcome)
	}
}

func TestCompressShapes(t *testing.T) {
	tok := cl100k(t)
	toolLate := trajectory(5, 0, 0)
	toolLate = toolLate[:len(toolLate)-1]
	for i := range 12 {
		toolLate = append(toolLate, schemas.Turn{From: "gpt", Value: text(newRand(uint64(i)), 120)},
			schemas.Turn{From: "human", Value: text(newRand(uint64(i+100)), 80)})
	}
	toolLate = append(toolLate, trajectory(6, 2, 100)[2:]...)

	cases := []struct {
		name      string
		turns     []schemas.Turn
		target    int
		summary   int
		wantOC    schemas.Outcome
		wantCalls int64
	}{
		{"under target", trajectory(1, 3, 50), 5000, 100, OutcomeUnderTarget, 0},
		{"typical", trajectory(2, 20, 120), 2000, 100, OutcomeCompressed, 1},
		{"tool late", toolLate, 1500, 100, OutcomeCompressed, 1},
		{"all protected", trajectory(3, 1, 800), 500, 100, OutcomeStillOverLimit, 0},
		{"summary too long needs a wider pass", trajectory(4, 30, 100), 2500, 100, OutcomeCompressed, 0},
		{"short", trajectory(7, 4, 300), 2600, 100, OutcomeCompressed, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := newCompressor(Config{TargetTokens: tc.target, SummaryTokens: tc.summary, TurnOverhead: 3}, tok)
			if err != nil {
				t.Fatal(err)
			}
			var calls atomic.Int64
			sum := wordsSummarizer(60, &calls)
			words := 60
			if strings.HasPrefix(tc.name, "summary too long") {
				// The first summary overshoots: a second pass must widen.
				words = 900
				long := wordsSummarizer(words, &calls)
				sum = func(ctx context.Context, content string, m *RowMetrics) (string, error) {
					if calls.Load() == 0 {
						return long(ctx, content, m)
					}
					return wordsSummarizer(60, &calls)(ctx, content, m)
				}
			}
			r, err := c.compress(bg, toTurns(tc.turns), sum)
			if err != nil {
				t.Fatal(err)
			}
			if r.outcome != tc.wantOC {
				t.Fatalf("outcome %s, want %s (metrics %+v)", r.outcome, tc.wantOC, r.metrics)
			}
			if tc.wantCalls > 0 && calls.Load() != tc.wantCalls {
				t.Errorf("%d summary calls, want %d", calls.Load(), tc.wantCalls)
			}
			if words == 900 && r.metrics.Passes < 2 {
				t.Errorf("passes %d: an over-long summary should be widened", r.metrics.Passes)
			}
			checkInvariants(t, c, tc.turns, r)
		})
	}
}

func TestCompressSummaryFailureKeepsOriginal(t *testing.T) {
	c, err := newCompressor(Config{TargetTokens: 1500, SummaryTokens: 100}, cl100k(t))
	if err != nil {
		t.Fatal(err)
	}
	in := toTurns(trajectory(9, 20, 100))
	r, err := c.compress(bg, in, func(context.Context, string, *RowMetrics) (string, error) {
		return "", errors.New("boom")
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.outcome != OutcomeSummaryFailed || r.changed || len(r.turns) != len(in) || r.metrics.Error == "" {
		t.Fatalf("got %s changed=%v turns=%d err=%q", r.outcome, r.changed, len(r.turns), r.metrics.Error)
	}
}

func TestRegionNeverSplitsToolPairs(t *testing.T) {
	c, err := newCompressor(Config{TargetTokens: 1000, SummaryTokens: 50, ProtectLast: 3}, cl100k(t))
	if err != nil {
		t.Fatal(err)
	}
	// Every need from tiny to everything: the region's ends must never cut
	// a gpt/tool pair, whatever the accumulation stops on.
	turns := toTurns(trajectory(11, 12, 60))
	c.prepare(turns)
	for need := 1; need < 5000; need += 37 {
		s, u, ok := c.region(turns, need, 10)
		if !ok {
			continue
		}
		if turns[s].from == "tool" || (u < len(turns) && turns[u].from == "tool") {
			t.Fatalf("need %d: region [%d,%d) starts or ends on a tool pair", need, s, u)
		}
		for i := s; i < u; i++ {
			if turns[i].prot {
				t.Fatalf("need %d: region [%d,%d) holds protected turn %d", need, s, u, i)
			}
		}
	}
}

// words returns n tokens of text (" word" is one cl100k token).
func words(n int) string { return strings.Repeat(" word", n) }

// A row whose protected turns plus one summary fit must end within budget,
// even when every summary is longer than expected: the numbers of a row that
// ended still_over_limit (target 2,000, summary 200, protected turns 893
// tokens) with unprotected middle turns left unsummarised.
func TestCompressNeverGivesUpOnARowThatFits(t *testing.T) {
	c, err := newCompressor(Config{TargetTokens: 2000, SummaryTokens: 200, NoNotice: true}, cl100k(t))
	if err != nil {
		t.Fatal(err)
	}
	in := []schemas.Turn{
		{From: "system", Value: words(200)}, {From: "human", Value: words(100)},
		{From: "gpt", Value: words(100)}, {From: "tool", Value: words(100)},
	}
	for range 10 {
		in = append(in, schemas.Turn{From: "gpt", Value: words(100)}, schemas.Turn{From: "tool", Value: words(100)})
	}
	in = append(in, schemas.Turn{From: "gpt", Value: words(100)}, schemas.Turn{From: "tool", Value: words(100)},
		schemas.Turn{From: "human", Value: words(100)}, schemas.Turn{From: "gpt", Value: words(93)})
	turns := toTurns(in)
	c.prepare(turns)
	protected := 0
	for _, tt := range turns {
		if tt.prot {
			protected += tt.tokens
		}
	}
	if protected != 893 {
		t.Fatalf("setup: protected turns hold %d tokens, want 893", protected)
	}
	// Every summary is 390 tokens: within max_tokens (2 x 200) but far over
	// the 200 expected, so each just-enough pass falls short.
	var calls atomic.Int64
	r, err := c.compress(bg, toTurns(in), wordsSummarizer(390, &calls))
	if err != nil {
		t.Fatal(err)
	}
	if r.outcome != OutcomeCompressed || r.metrics.CompressedTokens > 2000 {
		t.Fatalf("outcome %s with %d tokens after %d passes, want compressed within 2000 (protected 893 + one summary fit)",
			r.outcome, r.metrics.CompressedTokens, r.metrics.Passes)
	}
	checkInvariants(t, c, in, r)
}

// Each head protection can be turned off on its own.
func TestHeadProtectionsTurnOff(t *testing.T) {
	in := []schemas.Turn{{From: "system", Value: "s"}, {From: "human", Value: "h"}, {From: "gpt", Value: "g"}, {From: "tool", Value: "t"},
		{From: "gpt", Value: "g2"}, {From: "tool", Value: "t2"}, {From: "human", Value: "h2"}, {From: "gpt", Value: "g3"}}
	for _, tc := range []struct {
		cfg  Config
		free int // the head turn left unprotected, -1 none
	}{
		{Config{}, -1},
		{Config{NoProtectFirstSystem: true}, 0},
		{Config{NoProtectFirstHuman: true}, 1},
		{Config{NoProtectFirstGPT: true}, 2},
		{Config{NoProtectFirstTool: true}, 3},
	} {
		tc.cfg.ProtectLast = -1
		c, err := newCompressor(tc.cfg, cl100k(t))
		if err != nil {
			t.Fatal(err)
		}
		turns := toTurns(in)
		c.prepare(turns)
		for i, tt := range turns {
			want := i < 4 && i != tc.free
			if tt.prot != want {
				t.Errorf("%+v: turn %d (%s) protected %v, want %v", tc.cfg, i, tt.from, tt.prot, want)
			}
		}
	}
}
