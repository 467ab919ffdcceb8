package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// Statistics summarise the live records of an output folder. Run writes them
// to statistics.json at the end of every run, recomputed from all live
// records, so they cover every resume. Rates are fractions in [0, 1].
//
// The sums of a record member carry the member's name: schemas declares
// them (CallCount: api_calls; ToolTally: Tools and ToolErrors as tool_stats
// and tool_error_counts).
type Statistics struct {
	Records   int                     `json:"records"`
	Outcomes  map[schemas.Outcome]int `json:"outcomes"`
	Completed int                     `json:"completed"`
	Partial   int                     `json:"partial"`
	schemas.CallCount
	Usage schemas.Usage  `json:"usage"`
	Cost  CostStatistics `json:"cost"`
	schemas.ToolTally[ToolStatistics]
	Reasoning ReasoningStatistics `json:"reasoning"`
	Duration  DurationStatistics  `json:"duration"`
	// Timings: where the wall time of the records that carry timings
	// went (nil when none does).
	Timings *TimingStatistics `json:"timings,omitempty"`
	// Retries are the model requests tried again by cause over every run of
	// the folder, as run.json records them (absent when no run recorded
	// them: folders of older versions, modes that make no model call).
	Retries *outdir.Retries `json:"retries,omitempty"`
	// Reward, PassRate and PassAtK (by k: "1" and the most graded samples
	// of a prompt) summarise the graded records (stats_reward.go); all
	// three are absent when no record was graded.
	Reward   *RewardStatistics  `json:"reward,omitempty"`
	PassRate *float64           `json:"pass_rate,omitempty"`
	PassAtK  map[string]float64 `json:"pass_at_k,omitempty"`
}

// CostStatistics sum the records' cost_usd. Records whose cost is null (no
// price for their model) are counted, never priced at 0: TotalUSD covers
// PricedRecords only. With no priced record the spend is unknown, and
// statistics.json says so: total_usd and per_1k_rows_usd are null there
// (MarshalJSON), while a priced run whose real spend is $0 writes 0.
type CostStatistics struct {
	TotalUSD        float64                     `json:"total_usd"`
	PricedRecords   int                         `json:"priced_records"`
	UnpricedRecords int                         `json:"unpriced_records"`
	ByOutcomeUSD    map[schemas.Outcome]float64 `json:"by_outcome_usd"`
	Per1kRowsUSD    float64                     `json:"per_1k_rows_usd"` // TotalUSD per 1,000 priced records
}

// costJSON is CostStatistics as statistics.json writes it: the sums are
// null when no record was priced.
type costJSON struct {
	TotalUSD        *float64                    `json:"total_usd"`
	PricedRecords   int                         `json:"priced_records"`
	UnpricedRecords int                         `json:"unpriced_records"`
	ByOutcomeUSD    map[schemas.Outcome]float64 `json:"by_outcome_usd"`
	Per1kRowsUSD    *float64                    `json:"per_1k_rows_usd"`
}

// MarshalJSON writes total_usd and per_1k_rows_usd as null when no record
// has a price: an unpriced run's spend is unknown, never $0.
func (c CostStatistics) MarshalJSON() ([]byte, error) {
	j := costJSON{PricedRecords: c.PricedRecords, UnpricedRecords: c.UnpricedRecords, ByOutcomeUSD: c.ByOutcomeUSD}
	if c.PricedRecords > 0 {
		j.TotalUSD, j.Per1kRowsUSD = &c.TotalUSD, &c.Per1kRowsUSD
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads both forms: a null sum (unpriced) reads as 0 with
// PricedRecords 0, which MarshalJSON writes back as null.
func (c *CostStatistics) UnmarshalJSON(b []byte) error {
	var j costJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*c = CostStatistics{PricedRecords: j.PricedRecords, UnpricedRecords: j.UnpricedRecords, ByOutcomeUSD: j.ByOutcomeUSD}
	if j.TotalUSD != nil {
		c.TotalUSD = *j.TotalUSD
	}
	if j.Per1kRowsUSD != nil {
		c.Per1kRowsUSD = *j.Per1kRowsUSD
	}
	return nil
}

// writeRetries prints the retries line of WriteText: the total and each
// cause that happened, or nothing when no run recorded them.
func writeRetries(w io.Writer, r *outdir.Retries) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "retries\t%s\n", r.Text())
}

// writeText prints the spend lines of WriteText.
func (c CostStatistics) writeText(w io.Writer) {
	switch {
	case c.PricedRecords == 0 && c.UnpricedRecords == 0:
		return
	case c.PricedRecords == 0:
		fmt.Fprintf(w, "spend\tunknown: no record has a price (give --prices or --price-in/--price-out)\n")
		return
	}
	fmt.Fprintf(w, "spend\t$%.4f over %d priced records, $%.4f per 1k rows", c.TotalUSD, c.PricedRecords, c.Per1kRowsUSD)
	if c.UnpricedRecords > 0 {
		fmt.Fprintf(w, "; %d records without a price not counted", c.UnpricedRecords)
	}
	fmt.Fprintln(w)
	for _, oc := range sortedKeys(c.ByOutcomeUSD) {
		fmt.Fprintf(w, "  %s\t$%.4f\n", oc, c.ByOutcomeUSD[oc])
	}
}

// ToolStatistics counts the calls of one tool over all live records.
type ToolStatistics struct {
	Count       int     `json:"count"`
	Success     int     `json:"success"`
	Failure     int     `json:"failure"`
	SuccessRate float64 `json:"success_rate"`
}

// addTool adds one tool's call, success and failure counts to its sum in
// tools.
func addTool(tools map[string]ToolStatistics, name string, count, success, failure int) {
	t := tools[name]
	t.Count += count
	t.Success += success
	t.Failure += failure
	tools[name] = t
}

// ReasoningStatistics says how much of the assistant output carried reasoning.
type ReasoningStatistics struct {
	AssistantTurns        int     `json:"assistant_turns"`
	TurnsWithReasoning    int     `json:"turns_with_reasoning"`
	TurnsWithoutReasoning int     `json:"turns_without_reasoning"`
	TurnCoverage          float64 `json:"turn_coverage"`
	RowsWithReasoning     int     `json:"rows_with_reasoning"`
	RowsWithoutReasoning  int     `json:"rows_without_reasoning"`
}

// DurationStatistics summarise the records' duration_ms.
type DurationStatistics struct {
	TotalMS int64 `json:"total_ms"`
	MeanMS  int64 `json:"mean_ms"`
	P50MS   int64 `json:"p50_ms"`
	P95MS   int64 `json:"p95_ms"`
	MaxMS   int64 `json:"max_ms"`
}

// statMembers are the record members statistics read; leaving out the
// conversation keeps decoding cheap (schemas.DecodeMembers).
var statMembers = [...]string{schemas.MemberOutcome, schemas.MemberCompleted, schemas.MemberPartial, schemas.MemberAPICalls,
	schemas.MemberUsage, schemas.MemberCostUSD, schemas.MemberToolStats, schemas.MemberToolErrorCounts,
	schemas.MemberReasoningStats, schemas.MemberDurationMS,
	schemas.MemberPromptIndex, schemas.MemberReward, schemas.MemberGrade} // the last three: addReward

// Stats recomputes the statistics of the output folder dir from its live
// records (final and retryable). It streams the records in Cat's order,
// decoding each once without its conversation; memory is Cat's plus 8 bytes
// per record for the duration percentiles.
func Stats(dir string) (Statistics, error) {
	ix, man, err := openReadOnly(dir)
	if err != nil {
		return Statistics{}, fmt.Errorf("stats %s: %w", dir, err)
	}
	st, err := statsFromIndex(dir, ix, &man, true)
	if err != nil {
		return st, fmt.Errorf("stats %s: %w", dir, err)
	}
	return st, nil
}

// statsFromIndex computes the statistics of the live records of ix; check
// compares each shard with its ledger line first (see eachLive). The
// outcomes counted, and the calls, usage and cost summed, are the mode's own
// (Manifest.ModeOutcome, Manifest.ModeCalls, Manifest.ModeSpend).
func statsFromIndex(dir string, ix *ledgerIndex, man *Manifest, check bool) (Statistics, error) {
	acc := newStatsAcc(false)
	err := eachLive(dir, ix, CatOptions{}, check, func(ref ledgerEntry, line []byte) error {
		if err := acc.add(man, line, ix.outcomes[ref.outcome], ref.pi, int64(ref.sample), ref.key); err != nil {
			return fmt.Errorf("%s: record %s is not valid JSON (%w): the shard is damaged; %s", ix.shards[ref.shard], ref.key, err, HealHint)
		}
		return nil
	})
	if err != nil {
		return acc.st, err
	}
	return acc.finish(man), nil
}

// statsAcc sums the statistics of record lines one at a time: statsFromIndex
// over a folder's live records in Cat's order, and an Output over the
// records its run commits (runStats), in commit order. The sums of floats
// (cost, reward) depend on their order, so an accumulator made with
// deferFloats keeps those values, and finish adds them up in Cat's order
// (prompt_index, sample, key), as statsFromIndex does: both give the same
// statistics, to the bit, for the same records.
type statsAcc struct {
	st        Statistics
	durations []int64
	// floats are the costs and rewards not yet summed (deferFloats).
	floats      []statFloats
	deferFloats bool
}

// statFloats is one record's cost and reward, summed by finish in the
// order of pi, sample and key.
type statFloats struct {
	pi, sample         int64
	key                string
	outcome            schemas.Outcome
	cost, reward       float64
	hasCost, hasReward bool
}

func newStatsAcc(deferFloats bool) *statsAcc {
	return &statsAcc{st: NewStatistics(), deferFloats: deferFloats}
}

// statLine is what statistics read of one record line: the members
// statDecode names, with the mode's outcome, usage, cost and calls in place
// of the record's own (Manifest.ModeOutcome, ModeSpend, ModeCalls).
type statLine struct {
	r     schemas.Record
	calls int
}

// readStatLine reads the record line of a ledger row whose outcome is
// outcome under the folder's run.json man; encoded says the line is one
// EncodeRecord made (valid JSON: not checked again). Its error is the
// line's when it is not JSON; a known member of another type only leaves
// that member out.
func readStatLine(man *Manifest, line []byte, outcome schemas.Outcome, encoded bool) (*statLine, error) {
	l := &statLine{}
	r := &l.r
	decode := schemas.DecodeMembers
	if encoded {
		decode = schemas.DecodeValidMembers
	}
	if err := decode(line, r, statDecode...); err != nil {
		// A verbatim record may carry a known field with another type
		// ("completed": "yes"): it counts, without that field.
		var typeErr *json.UnmarshalTypeError
		if !errors.As(err, &typeErr) {
			return nil, err
		}
	}
	r.Outcome = man.ModeOutcome(line, r.Outcome)
	if r.Outcome == "" {
		r.Outcome = outcome
	}
	man.ModeSpend(line, &r.Usage, &r.CostUSD)
	l.calls = man.ModeCalls(line, r.APICalls)
	return l, nil
}

// statFromRecord is readStatLine's statLine of the line EncodeRecord makes
// of rec, taken from rec's fields, or nil when that line may read back as
// something else: a record written verbatim (Raw), a mode whose outcome,
// spend or calls are members of its own (Manifest.OutcomeField, CostField,
// CallsField, read from the line), or a string stats count by that is not
// valid UTF-8 (the encoder writes U+FFFD in its place, and two tool names
// may then become one).
func statFromRecord(man *Manifest, rec *schemas.Record) *statLine {
	if len(rec.Raw) > 0 || man.OutcomeField != "" || man.CostField != "" || man.CallsField != "" ||
		!utf8.ValidString(string(rec.Outcome)) {
		return nil
	}
	for name := range rec.ToolStats {
		if !utf8.ValidString(name) {
			return nil
		}
	}
	for name := range rec.ToolErrorCounts {
		if !utf8.ValidString(name) {
			return nil
		}
	}
	l := &statLine{calls: rec.APICalls}
	r := &l.r
	r.Outcome, r.Completed, r.Partial, r.APICalls = rec.Outcome, rec.Completed, rec.Partial, rec.APICalls
	r.Usage, r.ReasoningStats, r.DurationMS, r.PromptIndex = rec.Usage, rec.ReasoningStats, rec.DurationMS, rec.PromptIndex
	// Shared with the record, which nothing changes once it is encoded;
	// statistics only read them.
	r.ToolStats, r.ToolErrorCounts, r.Grade = rec.ToolStats, rec.ToolErrorCounts, rec.Grade
	r.CostUSD, r.Reward, r.Timings = rec.CostUSD, rec.Reward, rec.Timings
	return l
}

// add counts the record line of the ledger row (outcome, pi, sample, key)
// (see readStatLine).
func (a *statsAcc) add(man *Manifest, line []byte, outcome schemas.Outcome, pi, sample int64, key string) error {
	l, err := readStatLine(man, line, outcome, false)
	if err != nil {
		return err
	}
	a.count(l, pi, sample, key)
	return nil
}

// count counts one record read by readStatLine.
func (a *statsAcc) count(l *statLine, pi, sample int64, key string) {
	r := &l.r
	st := &a.st
	st.Records++
	oc := r.Outcome
	st.Outcomes[oc]++
	if r.Completed {
		st.Completed++
	}
	if r.Partial {
		st.Partial++
	}
	st.APICalls += int64(l.calls)
	st.Usage.Add(r.Usage)
	if r.CostUSD != nil {
		st.Cost.PricedRecords++
	} else {
		st.Cost.UnpricedRecords++
	}
	for name, ts := range r.ToolStats {
		addTool(st.Tools, name, ts.Count, ts.Success, ts.Failure)
	}
	for name, n := range r.ToolErrorCounts {
		st.ToolErrors[name] += n
	}
	rs := r.ReasoningStats
	st.Reasoning.AssistantTurns += rs.TotalAssistantTurns
	st.Reasoning.TurnsWithReasoning += rs.TurnsWithReasoning
	st.Reasoning.TurnsWithoutReasoning += rs.TurnsWithoutReason
	if rs.HasAnyReasoning {
		st.Reasoning.RowsWithReasoning++
	} else {
		st.Reasoning.RowsWithoutReasoning++
	}
	a.durations = append(a.durations, r.DurationMS)
	st.addReward(oc, int64(r.PromptIndex), r.Reward, r.Grade)
	addTimings(&st.Timings, r.Timings, r.DurationMS)
	f := statFloats{pi: pi, sample: sample, key: key, outcome: oc}
	if r.CostUSD != nil {
		f.cost, f.hasCost = *r.CostUSD, true
	}
	if r.Reward != nil {
		f.reward, f.hasReward = *r.Reward, true
	}
	switch {
	case !f.hasCost && !f.hasReward:
	case a.deferFloats:
		a.floats = append(a.floats, f)
	default:
		a.addFloats(&f)
	}
}

// addFloats sums one record's cost and reward.
func (a *statsAcc) addFloats(f *statFloats) {
	st := &a.st
	if f.hasCost {
		st.Cost.TotalUSD += f.cost
		st.Cost.ByOutcomeUSD[f.outcome] += f.cost
	}
	if f.hasReward {
		st.Reward.Sum += f.reward
	}
}

// finish sums the deferred floats in Cat's order and returns the statistics
// with their percentiles and derived figures, and the retries man records.
func (a *statsAcc) finish(man *Manifest) Statistics {
	slices.SortFunc(a.floats, func(x, y statFloats) int {
		return catOrder(x.pi, x.sample, x.key, y.pi, y.sample, y.key)
	})
	for i := range a.floats {
		a.addFloats(&a.floats[i])
	}
	a.floats = nil
	st := a.st
	if man != nil && man.Retries != nil {
		r := *man.Retries
		st.Retries = &r
	}
	if n := len(a.durations); n > 0 {
		durations := a.durations
		slices.Sort(durations)
		for _, d := range durations {
			st.Duration.TotalMS += d
		}
		st.Duration.P50MS = durations[(n-1)*50/100]
		st.Duration.P95MS = durations[(n-1)*95/100]
		st.Duration.MaxMS = durations[n-1]
	}
	st.Finish()
	return st
}

// NewStatistics returns empty statistics ready for Add.
func NewStatistics() Statistics {
	return Statistics{Outcomes: map[schemas.Outcome]int{},
		ToolTally: schemas.ToolTally[ToolStatistics]{Tools: map[string]ToolStatistics{}, ToolErrors: map[string]int{}},
		Cost:      CostStatistics{ByOutcomeUSD: map[schemas.Outcome]float64{}}}
}

// Add sums the counts of o into s: records, outcomes, calls, tokens, tool
// and reasoning counts, total and maximum duration, and the graded records'
// counts (addRewards). Percentiles cannot be
// summed; derived figures (rates, coverage, mean) need Finish afterwards.
// The cluster merge uses it to combine the statistics of shards.
func (s *Statistics) Add(o Statistics) {
	s.Records += o.Records
	for k, v := range o.Outcomes {
		s.Outcomes[k] += v
	}
	s.Completed += o.Completed
	s.Partial += o.Partial
	s.APICalls += o.APICalls
	if o.Retries != nil {
		if s.Retries == nil {
			s.Retries = &outdir.Retries{}
		}
		s.Retries.Add(*o.Retries)
	}
	s.Usage.Add(o.Usage)
	s.Cost.TotalUSD += o.Cost.TotalUSD
	s.Cost.PricedRecords += o.Cost.PricedRecords
	s.Cost.UnpricedRecords += o.Cost.UnpricedRecords
	if s.Cost.ByOutcomeUSD == nil {
		s.Cost.ByOutcomeUSD = map[schemas.Outcome]float64{}
	}
	for k, v := range o.Cost.ByOutcomeUSD {
		s.Cost.ByOutcomeUSD[k] += v
	}
	for name, t := range o.Tools {
		addTool(s.Tools, name, t.Count, t.Success, t.Failure)
	}
	for name, n := range o.ToolErrors {
		s.ToolErrors[name] += n
	}
	r := &s.Reasoning
	r.AssistantTurns += o.Reasoning.AssistantTurns
	r.TurnsWithReasoning += o.Reasoning.TurnsWithReasoning
	r.TurnsWithoutReasoning += o.Reasoning.TurnsWithoutReasoning
	r.RowsWithReasoning += o.Reasoning.RowsWithReasoning
	r.RowsWithoutReasoning += o.Reasoning.RowsWithoutReasoning
	s.Duration.TotalMS += o.Duration.TotalMS
	s.Duration.MaxMS = max(s.Duration.MaxMS, o.Duration.MaxMS)
	s.addRewards(o)
	s.Timings = mergeTimings(s.Timings, o.Timings)
}

// Finish computes the derived figures from the counts: each tool's success
// rate, the reasoning turn coverage, the mean duration, and the reward
// figures (finishRewards).
func (s *Statistics) Finish() {
	for name, t := range s.Tools {
		if t.Count > 0 {
			t.SuccessRate = float64(t.Success) / float64(t.Count)
		}
		s.Tools[name] = t
	}
	if s.Reasoning.AssistantTurns > 0 {
		s.Reasoning.TurnCoverage = float64(s.Reasoning.TurnsWithReasoning) / float64(s.Reasoning.AssistantTurns)
	}
	if s.Records > 0 {
		s.Duration.MeanMS = s.Duration.TotalMS / int64(s.Records)
	}
	if s.Cost.PricedRecords > 0 {
		s.Cost.Per1kRowsUSD = s.Cost.TotalUSD * 1000 / float64(s.Cost.PricedRecords)
	}
	s.finishRewards()
	s.Timings.finish()
}

// WriteText prints the statistics as aligned human-readable text.
func (s Statistics) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "records\t%d\n", s.Records)
	for _, oc := range sortedKeys(s.Outcomes) {
		fmt.Fprintf(tw, "  %s\t%d\n", oc, s.Outcomes[oc])
	}
	// The records' completed and partial fields (Hermes'), only when they
	// say more than the outcomes: a generate folder's completed field is
	// its completed outcome, and "completed" is then not listed twice.
	if s.Completed != s.Outcomes[schemas.OutcomeCompleted] || s.Partial != 0 {
		fmt.Fprintf(tw, "record flags\tcompleted %d, partial %d\n", s.Completed, s.Partial)
	}
	fmt.Fprintf(tw, "api calls\t%d\n", s.APICalls)
	writeRetries(tw, s.Retries)
	fmt.Fprintf(tw, "tokens\t%d prompt, %d completion, %d total\n", s.Usage.PromptTokens, s.Usage.CompletionTokens, s.Usage.TotalTokens)
	if u := s.Usage; u.CachedPromptTokens > 0 || u.ReasoningTokens > 0 {
		fmt.Fprintf(tw, "  of which\t%d cached prompt, %d reasoning\n", u.CachedPromptTokens, u.ReasoningTokens)
	}
	s.Cost.writeText(tw)
	r := s.Reasoning
	coverage := "-" // no assistant turn: no share, rather than 0.0%
	if r.AssistantTurns > 0 {
		coverage = fmt.Sprintf("%.1f%%", 100*r.TurnCoverage)
	}
	fmt.Fprintf(tw, "reasoning\t%d of %d assistant turns (%s); %d rows with, %d without\n",
		r.TurnsWithReasoning, r.AssistantTurns, coverage, r.RowsWithReasoning, r.RowsWithoutReasoning)
	s.writeRewardText(tw)
	d := s.Duration
	fmt.Fprintf(tw, "duration\ttotal %dms, mean %dms, p50 %dms, p95 %dms, max %dms\n", d.TotalMS, d.MeanMS, d.P50MS, d.P95MS, d.MaxMS)
	s.Timings.writeText(tw)
	if len(s.Tools) > 0 {
		fmt.Fprintf(tw, "tool\tcalls\tsuccess\tfailure\tsuccess rate\n")
		for _, name := range sortedKeys(s.Tools) {
			t := s.Tools[name]
			rate := "-" // never called: no rate, rather than 0.0%
			if t.Count > 0 {
				rate = fmt.Sprintf("%.1f%%", 100*t.SuccessRate)
			}
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%s\n", name, t.Count, t.Success, t.Failure, rate)
		}
	}
	header := false
	for _, name := range sortedKeys(s.ToolErrors) {
		if s.ToolErrors[name] == 0 { // a tool that never failed: no line
			continue
		}
		if !header {
			fmt.Fprintf(tw, "tool errors\n")
			header = true
		}
		fmt.Fprintf(tw, "  %s\t%d\n", name, s.ToolErrors[name])
	}
	return tw.Flush()
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
