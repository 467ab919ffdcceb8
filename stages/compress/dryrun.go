package compress

import (
	"context"
	"errors"
	"fmt"
	"github.com/hermes-pipe/hermes-pipe/pipeline/cost"
	"io"
	"slices"
	"sync"

	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/tokenizer"
)

// DryRunOptions configure DryRun. Inputs and Tokenizer are required.
type DryRunOptions struct {
	Inputs       []Input
	Tokenizer    tokenizer.Tokenizer
	Config       Config
	Workers      int // tokenising goroutines; default 4
	MaxLineBytes int
	// Reject, when set, receives every bad row.
	Reject func(schemas.Reject)
	// Price, when set, turns the projected tokens into a projected spend;
	// Batch selects the batch rates.
	Price *cost.Price
	Batch bool
}

// DryRunReport is what compressing the inputs would take, from token counts
// alone. Projections run the compression passes with every summary of the
// expected length (SummaryTokens): a row that needs several passes counts
// each of them; summaries longer or shorter than expected can change that.
type DryRunReport struct {
	Tokenizer    string `json:"tokenizer"`
	TargetTokens int    `json:"target_tokens"`
	TurnOverhead int    `json:"turn_overhead"`

	Rows        int `json:"rows"`
	Rejected    int `json:"rejected"`
	UnderTarget int `json:"under_target"`
	OverTarget  int `json:"over_target"`
	// Unfixable rows are over budget with nothing that can be summarised
	// (all protected, or no region saves tokens): still_over_limit without
	// a call.
	Unfixable int `json:"unfixable"`
	// ProjectedOver rows would still be over budget after every pass with
	// summaries of the expected length.
	ProjectedOver int `json:"projected_still_over"`

	ProjectedCalls            int   `json:"projected_calls"`
	ProjectedPromptTokens     int64 `json:"projected_prompt_tokens"`
	ProjectedCompletionTokens int64 `json:"projected_completion_tokens"`
	// MaxCompletionTokens is the bound: every call at max_tokens.
	MaxCompletionTokens int64 `json:"max_completion_tokens"`
	// ProjectedCostUSD is the projected tokens at the price (batch rates
	// with BatchPrices), MaxCostUSD the bound with every call at
	// max_tokens; both null without a price.
	ProjectedCostUSD *float64 `json:"projected_cost_usd"`
	MaxCostUSD       *float64 `json:"max_cost_usd"`
	BatchPrices      bool     `json:"batch_prices"`

	TotalTokens  int64         `json:"total_tokens"`
	Distribution Distribution  `json:"length_distribution"`
	Buckets      []LengthCount `json:"length_buckets"`
}

// Distribution summarises the rows' token counts (overhead included).
type Distribution struct {
	Min  int `json:"min"`
	Mean int `json:"mean"`
	P50  int `json:"p50"`
	P90  int `json:"p90"`
	P99  int `json:"p99"`
	Max  int `json:"max"`
}

// LengthCount is the number of rows of at most UpTo tokens (and more than
// the previous bucket's); UpTo 0 is the open last bucket.
type LengthCount struct {
	UpTo int `json:"up_to"`
	Rows int `json:"rows"`
}

var bucketBounds = []int{1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000, 0}

// DryRun tokenises every row of the inputs on Workers goroutines and reports
// how many are over budget and what summarising them would cost. It makes no
// API call and writes nothing. Memory is 4 bytes per row (for the
// percentiles) plus the rows in flight.
func DryRun(ctx context.Context, o DryRunOptions) (DryRunReport, error) {
	var rep DryRunReport
	comp, err := newCompressor(o.Config, o.Tokenizer)
	if err != nil {
		return rep, fmt.Errorf("dry run: %w", err)
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	rep.Tokenizer, rep.TargetTokens, rep.TurnOverhead = o.Tokenizer.Name(), comp.cfg.TargetTokens, comp.cfg.TurnOverhead
	src := OpenSource(SourceOptions{Inputs: o.Inputs, MaxLineBytes: o.MaxLineBytes, Reject: o.Reject})
	defer src.Close()

	type rowPlan struct {
		tokens        int
		over          bool
		calls         int   // summary passes the row would take
		prompt        int64 // prompt tokens of those calls
		projectedOver bool
	}
	var (
		mu      sync.Mutex
		lengths []int32
		wg      sync.WaitGroup
	)
	add := func(p rowPlan) {
		mu.Lock()
		defer mu.Unlock()
		rep.Rows++
		lengths = append(lengths, int32(min(p.tokens, 1<<31-1)))
		rep.TotalTokens += int64(p.tokens)
		switch {
		case !p.over:
			rep.UnderTarget++
		case p.calls == 0:
			rep.OverTarget++
			rep.Unfixable++
		default:
			rep.OverTarget++
			rep.ProjectedCalls += p.calls
			rep.ProjectedPromptTokens += p.prompt
			rep.ProjectedCompletionTokens += int64(p.calls * comp.cfg.SummaryTokens)
			rep.MaxCompletionTokens += int64(p.calls * 2 * comp.cfg.SummaryTokens)
			if p.projectedOver {
				rep.ProjectedOver++
			}
		}
	}
	// The projection runs the real pass loop; each "summary" costs the
	// request's prompt tokens and stands in the row as a turn of the
	// expected length (summaryCost), so the passes a row takes (up to
	// MaxPasses) are counted as the run would make them.
	expected := func(string) int { return comp.summaryCost }
	work := make(chan []byte, o.Workers)
	for range o.Workers {
		wg.Go(func() {
			for raw := range work {
				p, err := parseRow(raw)
				if err != nil {
					continue // the source rejected it already
				}
				var rp rowPlan
				summarize := func(_ context.Context, content string, _ *RowMetrics) (string, error) {
					rp.calls++
					rp.prompt += int64(o.Tokenizer.Count(summaryPrompt(content, comp.cfg.SummaryTokens)))
					return SummaryPrefix, nil
				}
				res, err := comp.passes(ctx, p.turns, summarize, expected)
				if err != nil {
					continue // ctx ended; the reader stops too
				}
				rp.tokens = res.metrics.OriginalTokens
				rp.over = rp.tokens > comp.cfg.TargetTokens
				rp.projectedOver = res.metrics.StillOverLimit
				add(rp)
			}
		})
	}
	var readErr error
	for {
		rec, err := src.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			readErr = err
			break
		}
		select {
		case work <- rec.Raw:
			continue
		case <-ctx.Done():
			readErr = ctx.Err()
		}
		break
	}
	close(work)
	wg.Wait()
	rep.Rejected = src.Rejected()
	if readErr != nil {
		return rep, fmt.Errorf("dry run: %w", readErr)
	}
	rep.Distribution, rep.Buckets = distribution(lengths)
	rep.BatchPrices = o.Batch
	if o.Price != nil {
		u := schemas.Usage{PromptTokens: rep.ProjectedPromptTokens, CompletionTokens: rep.ProjectedCompletionTokens}
		c := o.Price.Cost(u, o.Batch)
		u.CompletionTokens = rep.MaxCompletionTokens
		m := o.Price.Cost(u, o.Batch)
		rep.ProjectedCostUSD, rep.MaxCostUSD = &c, &m
	}
	return rep, nil
}

func distribution(l []int32) (Distribution, []LengthCount) {
	var d Distribution
	buckets := make([]LengthCount, len(bucketBounds))
	for i, b := range bucketBounds {
		buckets[i].UpTo = b
	}
	if len(l) == 0 {
		return d, buckets
	}
	slices.Sort(l)
	var sum int64
	for _, v := range l {
		sum += int64(v)
		for i, b := range bucketBounds {
			if b == 0 || int(v) <= b {
				buckets[i].Rows++
				break
			}
		}
	}
	at := func(p float64) int { return int(l[min(len(l)-1, int(p*float64(len(l))))]) }
	d = Distribution{Min: int(l[0]), Mean: int(sum / int64(len(l))), P50: at(0.5), P90: at(0.9), P99: at(0.99), Max: int(l[len(l)-1])}
	return d, buckets
}
