package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
)

// summaryErrors is how many distinct error messages the closing summary
// lists.
const summaryErrors = 3

// printRunSummary writes the closing summary of a run to w (stderr), after
// the one-line count: this run's outcomes, tokens and spend, the endpoint's
// retries by cause, the most frequent error messages and where the failed
// rows are. It stays under a dozen lines whatever the run.
func printRunSummary(w io.Writer, out string, s pipeline.Summary, retries *llm.RetryCounts) {
	t := s.Tally
	var parts []string
	for _, o := range pipeline.Top(t.Outcomes, -1) {
		parts = append(parts, fmt.Sprintf("%d %s", o.Count, o.Name))
	}
	if len(parts) == 0 {
		parts = []string{"none written"}
	}
	fmt.Fprintf(w, "  outcomes: %s\n", strings.Join(parts, ", "))
	spend := "unpriced"
	if t.Priced > 0 {
		spend = fmt.Sprintf("$%.4f", t.CostUSD)
		if t.Priced < t.Records {
			spend += fmt.Sprintf(" (%d of %d records unpriced)", t.Records-t.Priced, t.Records)
		}
	}
	fmt.Fprintf(w, "  tokens: %d, spend: %s\n", t.Tokens, spend)
	fmt.Fprintf(w, "  retries: %s\n", retriesOf(retries).Text())
	printTimings(w, t.Timings)
	if top := pipeline.Top(t.Errors, summaryErrors); len(top) > 0 {
		fmt.Fprintf(w, "  top errors:\n")
		for _, e := range top {
			fmt.Fprintf(w, "    %d× %s\n", e.Count, e.Name)
		}
		if more := len(t.Errors) - len(top); more > 0 {
			fmt.Fprintf(w, "    (%d more distinct messages: `hermes-pipe stats %s`)\n", more, out)
		}
	}
	if s.Failed > 0 {
		fmt.Fprintf(w, "  failed rows: %d in %s/failed/ (`hermes-pipe cat %s`, `hermes-pipe view %s`; --resume retries them)\n", s.Failed, out, out, out)
	}
}

// printTimings writes the summary's line on where the run's wall time went:
// the parts that took any, largest first, the biggest named. Nothing when
// no record carries timings.
func printTimings(w io.Writer, t *pipeline.TimingStatistics) {
	if t == nil || t.WallMS == 0 {
		return
	}
	parts := slices.Clone(t.Parts)
	slices.SortStableFunc(parts, func(a, b pipeline.TimingPart) int { return cmp.Compare(b.TotalMS, a.TotalMS) })
	var shown []string
	for _, p := range parts {
		if p.TotalMS > 0 {
			shown = append(shown, fmt.Sprintf("%s %.0f%%", p.Name, 100*p.Share))
		}
	}
	if len(shown) == 0 {
		return
	}
	b := parts[0]
	fmt.Fprintf(w, "  time: most in %s (%.0f%% of %s wall time, p50 %s, p99 %s per record); %s\n", b.Name, 100*b.Share,
		pipeline.FormatMS(t.WallMS), pipeline.FormatMS(b.P50MS), pipeline.FormatMS(b.P99MS), strings.Join(shown, ", "))
}
