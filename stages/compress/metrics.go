package compress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/atomicfile"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/schemas/pyjson"
)

// MetricsFile is the aggregate metrics file written into the output folder.
const MetricsFile = "compression_metrics.json"

// RowMetrics is the per-row `compression_metrics` object. The fields up to
// summarization_errors are Hermes' names in Hermes' order; the rest are
// additions (outcome, passes, budget, failure reason).
type RowMetrics struct {
	OriginalTokens     int
	CompressedTokens   int
	TokensSaved        int
	CompressionRatio   float64
	OriginalTurns      int
	CompressedTurns    int
	TurnsRemoved       int
	RegionStart        int // first original turn summarised; -1 if none
	RegionEnd          int // one past the last original turn summarised; -1 if none
	TurnsInRegion      int // original turns summarised
	WasCompressed      bool
	StillOverLimit     bool
	SkippedUnderTarget bool
	SummarizationCalls int // HTTP attempts of summary requests, retries included
	SummarizationErrs  int // attempts that failed or were cut short

	Outcome      string
	Passes       int
	TargetTokens int
	Error        string
	InputOutcome string // the record's own outcome when compress replaced it
	// Usage sums the usage of every summary reply of the row; CostUSD is
	// what it cost at the run's price (batch rates for batch replies), nil
	// when the model has no price or no summary was asked for.
	Usage   schemas.Usage
	CostUSD *float64
	// OriginalTurnTokens and TurnTokens are the token counts (turn
	// overhead included, the run's tokenizer) of each turn of the input
	// conversation and of the written one, so a reader can show them per
	// turn without a tokenizer. They go into the record only, not into the
	// row journal.
	OriginalTurnTokens []int `json:"-"`
	TurnTokens         []int `json:"-"`
}

// pyFloat encodes as Python's repr of a float rounded to 4 places.
type pyFloat float64

func (f pyFloat) MarshalJSON() ([]byte, error) {
	return pyjson.AppendFloat(nil, math.Round(float64(f)*1e4)/1e4), nil
}

type regionJSON struct {
	StartIdx   int `json:"start_idx"`
	EndIdx     int `json:"end_idx"`
	TurnsCount int `json:"turns_count"`
}

type rowMetricsJSON struct {
	OriginalTokens     int            `json:"original_tokens"`
	CompressedTokens   int            `json:"compressed_tokens"`
	TokensSaved        int            `json:"tokens_saved"`
	CompressionRatio   pyFloat        `json:"compression_ratio"`
	OriginalTurns      int            `json:"original_turns"`
	CompressedTurns    int            `json:"compressed_turns"`
	TurnsRemoved       int            `json:"turns_removed"`
	Region             regionJSON     `json:"compression_region"`
	WasCompressed      bool           `json:"was_compressed"`
	StillOverLimit     bool           `json:"still_over_limit"`
	SkippedUnderTarget bool           `json:"skipped_under_target"`
	SummarizationCalls int            `json:"summarization_api_calls"`
	SummarizationErrs  int            `json:"summarization_errors"`
	Outcome            string         `json:"outcome"`
	Passes             int            `json:"passes"`
	TargetTokens       int            `json:"target_tokens"`
	Error              string         `json:"error,omitempty"`
	InputOutcome       string         `json:"input_outcome,omitempty"`
	SummaryUsage       *schemas.Usage `json:"summary_usage,omitempty"`
	SummaryCostUSD     *float64       `json:"summary_cost_usd,omitempty"`
	OriginalTurnTokens []int          `json:"original_turn_tokens,omitempty"`
	TurnTokens         []int          `json:"compressed_turn_tokens,omitempty"`
}

// MarshalJSON writes the metrics with Hermes' field names and order.
func (m RowMetrics) MarshalJSON() ([]byte, error) {
	ratio := m.CompressionRatio
	if !m.WasCompressed {
		ratio = 1
	}
	v := rowMetricsJSON{m.OriginalTokens, m.CompressedTokens, m.TokensSaved, pyFloat(ratio), m.OriginalTurns,
		m.CompressedTurns, m.TurnsRemoved, regionJSON{m.RegionStart, m.RegionEnd, m.TurnsInRegion}, m.WasCompressed,
		m.StillOverLimit, m.SkippedUnderTarget, m.SummarizationCalls, m.SummarizationErrs, m.Outcome, m.Passes,
		m.TargetTokens, m.Error, m.InputOutcome, nil, m.CostUSD, m.OriginalTurnTokens, m.TurnTokens}
	if m.SummarizationCalls > 0 {
		u := m.Usage
		v.SummaryUsage = &u
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

// Report is the content of compression_metrics.json: Hermes' sections
// (summary, tokens, turns, averages, summarization, processing) with its
// field names, plus the per-outcome counts, the settings and the exact sums
// a resumed run adds to.
type Report struct {
	Summary struct {
		TotalTrajectories      int     `json:"total_trajectories"`
		TrajectoriesCompressed int     `json:"trajectories_compressed"`
		SkippedUnderTarget     int     `json:"trajectories_skipped_under_target"`
		StillOverLimit         int     `json:"trajectories_still_over_limit"`
		Failed                 int     `json:"trajectories_failed"`
		CompressionRate        pyFloat `json:"compression_rate"`
	} `json:"summary"`
	Tokens struct {
		TotalBefore             int64   `json:"total_before"`
		TotalAfter              int64   `json:"total_after"`
		TotalSaved              int64   `json:"total_saved"`
		OverallCompressionRatio pyFloat `json:"overall_compression_ratio"`
	} `json:"tokens"`
	Turns struct {
		TotalBefore  int64 `json:"total_before"`
		TotalAfter   int64 `json:"total_after"`
		TotalRemoved int64 `json:"total_removed"`
	} `json:"turns"`
	Averages struct {
		AvgCompressionRatio          pyFloat `json:"avg_compression_ratio"`
		AvgTokensSavedPerCompressed  pyFloat `json:"avg_tokens_saved_per_compressed"`
		AvgTurnsRemovedPerCompressed pyFloat `json:"avg_turns_removed_per_compressed"`
	} `json:"averages"`
	Summarization struct {
		TotalAPICalls int64   `json:"total_api_calls"`
		TotalErrors   int64   `json:"total_errors"`
		SuccessRate   pyFloat `json:"success_rate"`
		// Usage sums every summary reply's usage; CostUSD what the priced
		// rows' summaries cost (null when no row was priced).
		Usage      schemas.Usage `json:"usage"`
		CostUSD    *float64      `json:"cost_usd"`
		PricedRows int           `json:"priced_rows"`
	} `json:"summarization"`
	Processing struct {
		StartTime       string  `json:"start_time"`
		EndTime         string  `json:"end_time"`
		DurationSeconds pyFloat `json:"duration_seconds"`
	} `json:"processing"`
	// Outcomes counts rows by compress outcome, with the over-budget rows
	// dropped or quarantined by --over-limit counted apart.
	Outcomes map[string]int `json:"outcomes"`
	Settings Settings       `json:"settings"`
	// Sums are exact totals kept so a resumed run can add to this report.
	Sums struct {
		CompressionRatioSum float64 `json:"compression_ratio_sum"`
		TokensSaved         int64   `json:"tokens_saved_compressed"`
		TurnsRemoved        int64   `json:"turns_removed_compressed"`
		Runs                int     `json:"runs"`
	} `json:"sums"`
}

// Settings record the budget the metrics were measured against.
type Settings struct {
	Tokenizer     string `json:"tokenizer"`
	TargetTokens  int    `json:"target_tokens"`
	SummaryTokens int    `json:"summary_tokens"`
	TurnOverhead  int    `json:"turn_overhead"`
	ProtectLast   int    `json:"protect_last"`
	OverLimit     string `json:"over_limit"`
}

// Aggregate sums row metrics over a run. Run fills it from the row journal
// once the run has ended; it is not safe for concurrent use and keeps no
// per-row state.
type Aggregate struct {
	r     Report
	start time.Time
}

// newAggregate starts an aggregate, continuing prev when it is not nil.
func newAggregate(prev *Report, s Settings, now time.Time) *Aggregate {
	a := &Aggregate{start: now}
	if prev != nil {
		a.r = *prev
	}
	if a.r.Outcomes == nil {
		a.r.Outcomes = map[string]int{}
	}
	if a.r.Processing.StartTime == "" {
		a.r.Processing.StartTime = now.Format(time.RFC3339Nano)
	}
	a.r.Settings = s
	a.r.Sums.Runs++
	return a
}

// Add counts one row. disposal is "dropped" or "quarantined" for an
// over-budget row that --over-limit kept out of the output, else "".
func (a *Aggregate) Add(m *RowMetrics, disposal string) {
	r := &a.r
	r.Summary.TotalTrajectories++
	r.Tokens.TotalBefore += int64(m.OriginalTokens)
	r.Tokens.TotalAfter += int64(m.CompressedTokens)
	r.Tokens.TotalSaved += int64(m.TokensSaved)
	r.Turns.TotalBefore += int64(m.OriginalTurns)
	r.Turns.TotalAfter += int64(m.CompressedTurns)
	r.Turns.TotalRemoved += int64(m.TurnsRemoved)
	r.Summarization.TotalAPICalls += int64(m.SummarizationCalls)
	r.Summarization.TotalErrors += int64(m.SummarizationErrs)
	r.Summarization.Usage.Add(m.Usage)
	if m.CostUSD != nil {
		c := *m.CostUSD
		if r.Summarization.CostUSD != nil {
			c += *r.Summarization.CostUSD
		}
		r.Summarization.CostUSD = &c
		r.Summarization.PricedRows++
	}
	if m.WasCompressed {
		r.Summary.TrajectoriesCompressed++
		r.Sums.CompressionRatioSum += m.CompressionRatio
		r.Sums.TokensSaved += int64(m.TokensSaved)
		r.Sums.TurnsRemoved += int64(m.TurnsRemoved)
	}
	if m.SkippedUnderTarget {
		r.Summary.SkippedUnderTarget++
	}
	if m.StillOverLimit && m.Outcome != string(OutcomeSummaryFailed) {
		r.Summary.StillOverLimit++
	}
	if m.Outcome == string(OutcomeSummaryFailed) {
		r.Summary.Failed++
	}
	r.Outcomes[m.Outcome]++
	if disposal != "" {
		r.Outcomes[disposal]++
	}
}

// Report returns the aggregate with its derived figures, as of now.
func (a *Aggregate) Report(now time.Time) Report {
	r := a.r
	r.Outcomes = maps.Clone(a.r.Outcomes)
	r.Summary.CompressionRate = pyFloat(float64(r.Summary.TrajectoriesCompressed) / float64(max(r.Summary.TotalTrajectories, 1)))
	r.Tokens.OverallCompressionRatio = pyFloat(float64(r.Tokens.TotalAfter) / float64(max(r.Tokens.TotalBefore, 1)))
	if n := r.Summary.TrajectoriesCompressed; n > 0 {
		r.Averages.AvgCompressionRatio = pyFloat(r.Sums.CompressionRatioSum / float64(n))
		r.Averages.AvgTokensSavedPerCompressed = pyFloat(math.Round(float64(r.Sums.TokensSaved)/float64(n)*10) / 10)
		r.Averages.AvgTurnsRemovedPerCompressed = pyFloat(math.Round(float64(r.Sums.TurnsRemoved)/float64(n)*100) / 100)
	} else {
		r.Averages.AvgCompressionRatio = 1
	}
	r.Summarization.SuccessRate = pyFloat(1 - float64(r.Summarization.TotalErrors)/float64(max(r.Summarization.TotalAPICalls, 1)))
	r.Processing.EndTime = now.Format(time.RFC3339Nano)
	r.Processing.DurationSeconds += pyFloat(now.Sub(a.start).Seconds())
	return r
}

// readReport loads the compression_metrics.json of a previous run in dir; it
// returns nil when there is none.
func readReport(dir string) (*Report, error) {
	data, err := os.ReadFile(filepath.Join(dir, MetricsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", MetricsFile, err)
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("read %s: %w", MetricsFile, err)
	}
	return &r, nil
}

// UnmarshalJSON reads a pyFloat back.
func (f *pyFloat) UnmarshalJSON(b []byte) error {
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = pyFloat(v)
	return nil
}

// writeReport replaces dir/compression_metrics.json atomically.
func writeReport(dir string, r Report) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", MetricsFile, err)
	}
	return atomicfile.Write(dir, MetricsFile, append(data, '\n'))
}
