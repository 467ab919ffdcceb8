package swe

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
)

// Gate verdicts.
const (
	GatePass    = "pass"    // rate ≥ minimum and no regression: exit 0
	GateFail    = "fail"    // the rate is below the minimum or a baseline instance regressed, whatever the errors would have given: exit 4
	GateUnknown = "unknown" // infrastructure errors or pending tasks could change the verdict: exit 1
)

// GateResult is the CI verdict on a report, kept in report.json.
type GateResult struct {
	Verdict      string   `json:"verdict"`
	Reasons      []string `json:"reasons,omitempty"`
	MinResolved  float64  `json:"min_resolved"`
	ResolvedRate float64  `json:"resolved_rate"`
	// BestRate is the rate if every error and pending task were resolved.
	BestRate        float64  `json:"best_possible_rate"`
	Baseline        string   `json:"baseline,omitempty"`
	Regressions     []string `json:"regressions"`                // resolved in the baseline, now unresolved or empty_patch
	Unjudged        []string `json:"unjudged,omitempty"`         // resolved in the baseline, now error or pending
	BaselineMissing []string `json:"baseline_missing,omitempty"` // resolved in the baseline, not in this task set
}

// ReadBaseline returns the resolved instance ids of a previous report: this
// mode's report.json or the SWE-bench harness's summary report (both carry
// "resolved_ids"). A missing or unreadable file is an error: a gate against
// a baseline that silently reads as empty would pass every regression.
func ReadBaseline(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read baseline: %w", err)
	}
	return parseBaseline(path, data)
}

// parseBaseline reads the resolved ids of the baseline file path, whose
// content is data (see ReadBaseline).
func parseBaseline(path string, data []byte) ([]string, error) {
	var b struct {
		ResolvedIDs *[]string `json:"resolved_ids"`
		Resolved    *[]string `json:"resolved"`
	}
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("read baseline %s: %w", path, err)
	}
	switch {
	case b.ResolvedIDs != nil:
		return *b.ResolvedIDs, nil
	case b.Resolved != nil:
		return *b.Resolved, nil
	}
	return nil, errors.New("read baseline " + path + `: no "resolved_ids" list (expected a report.json of hermes-pipe swe or of the SWE-bench harness)`)
}

// Judge decides the gate for r: pass when the resolved rate is at least
// min and no instance resolved in the baseline is now unresolved or
// empty_patch. Infrastructure errors and pending tasks are never counted as
// the model's failures: when they could flip the verdict the result is
// unknown, and only a failure no error could undo is a fail.
func (r *Report) Judge(min float64, baselinePath string, baseline []string) *GateResult {
	g := &GateResult{MinResolved: min, ResolvedRate: r.ResolvedRate, Baseline: baselinePath, Regressions: []string{}}
	unknown := r.Errors + r.Pending
	if r.Total > 0 {
		g.BestRate = float64(r.Resolved+unknown) / float64(r.Total)
	}
	const eps = 1e-9
	rateFail := r.Total > 0 && g.BestRate+eps < min
	rateUnknown := !rateFail && r.ResolvedRate+eps < min
	for _, id := range baseline {
		in, ok := r.Instances[id]
		switch {
		case !ok:
			g.BaselineMissing = append(g.BaselineMissing, id)
		case in.Outcome == string(OutcomeUnresolved) || in.Outcome == string(OutcomeEmptyPatch):
			g.Regressions = append(g.Regressions, id)
		case in.Outcome != string(OutcomeResolved):
			g.Unjudged = append(g.Unjudged, id)
		}
	}
	sort.Strings(g.Regressions)
	sort.Strings(g.Unjudged)
	sort.Strings(g.BaselineMissing)
	if rateFail {
		g.Reasons = append(g.Reasons, fmt.Sprintf("resolved rate %.1f%% is below the minimum %.1f%% even if all %d errored or pending tasks were resolved", 100*r.ResolvedRate, 100*min, unknown))
	}
	if n := len(g.Regressions); n > 0 {
		g.Reasons = append(g.Reasons, fmt.Sprintf("%d instance(s) resolved in the baseline regressed: %s", n, short(g.Regressions)))
	}
	if rateFail || len(g.Regressions) > 0 {
		g.Verdict = GateFail
		return g
	}
	if rateUnknown {
		g.Reasons = append(g.Reasons, fmt.Sprintf("resolved rate %.1f%% is below the minimum %.1f%%, but %d errored or pending task(s) could lift it to %.1f%%: rerun with --resume", 100*r.ResolvedRate, 100*min, unknown, 100*g.BestRate))
	}
	if n := len(g.Unjudged); n > 0 {
		g.Reasons = append(g.Reasons, fmt.Sprintf("%d baseline instance(s) could not be judged (error or pending): %s", n, short(g.Unjudged)))
	}
	if rateUnknown || len(g.Unjudged) > 0 {
		g.Verdict = GateUnknown
		return g
	}
	g.Verdict = GatePass
	return g
}
