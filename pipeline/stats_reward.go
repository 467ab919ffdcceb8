package pipeline

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// RewardStatistics summarise the rewards of the graded records: those with
// a grade member or a number as reward. A record whose grader failed is
// graded, its reward null: it counts in Errored, and as not passed in the
// pass rates and pass@k (a failed grader is never a silent pass, nor left
// out to flatter the rate). Statistics.Reward is nil when no record was
// graded, so ungraded runs print and write nothing of it.
type RewardStatistics struct {
	Graded  int `json:"graded"`
	Passed  int `json:"passed"`  // grade.passed is true
	Failed  int `json:"failed"`  // graded, not passed, not errored
	Errored int `json:"errored"` // reward null: the grader failed (grade.error says why)
	// Rewarded records have a number as reward; Mean, Min and Max are over
	// them (0 when none).
	Rewarded int     `json:"rewarded"`
	Sum      float64 `json:"sum"`
	Mean     float64 `json:"mean"`
	Min      float64 `json:"min"`
	Max      float64 `json:"max"`
	// Histogram counts the rewards in fixed buckets (rewardBuckets): below
	// 0, ten of width 0.1 from 0 to 1 (the last holding 1), above 1, so the
	// histograms of disjoint folders add up.
	Histogram []RewardBucket `json:"histogram"`
	// ByOutcome is the pass rate of the graded records of each outcome.
	ByOutcome map[schemas.Outcome]PassCount `json:"by_outcome"`
	// Prompts is how many prompts (prompt_index) have graded samples, and
	// MaxSamples the most graded samples one of them has: the k of the
	// largest pass@k.
	Prompts    int `json:"prompts"`
	MaxSamples int `json:"max_samples"`

	// prompts are the graded samples and passes per prompt index, for
	// pass@k; nil in statistics read back from JSON (see Add).
	prompts map[int64]PassCount
	// est sums, per k, the pass@k of merged parts read back from JSON times
	// their prompts, and estN those prompts (see Add).
	est                map[string]float64
	estN               map[string]int
	estPrompts, estMax int
}

// PassCount is how many graded records (or samples of one prompt) passed.
type PassCount struct {
	Graded   int     `json:"graded"`
	Passed   int     `json:"passed"`
	PassRate float64 `json:"pass_rate"`
}

// RewardBucket is one bar of the reward histogram: the rewards in
// [Lo, Hi) (the last finite bucket includes 1); Lo or Hi is null for the
// unbounded buckets below 0 and above 1.
type RewardBucket struct {
	Lo    *float64 `json:"lo"`
	Hi    *float64 `json:"hi"`
	Count int      `json:"count"`
}

// rewardBuckets is the number of histogram buckets: below 0, ten from 0 to
// 1, above 1.
const rewardBuckets = 12

// newRewardStatistics returns empty reward statistics with their buckets.
func newRewardStatistics() *RewardStatistics {
	r := &RewardStatistics{ByOutcome: map[schemas.Outcome]PassCount{}, prompts: map[int64]PassCount{},
		Histogram: make([]RewardBucket, rewardBuckets)}
	for i := range r.Histogram {
		if i > 0 {
			lo := float64(i-1) / 10
			r.Histogram[i].Lo = &lo
		}
		if i < rewardBuckets-1 {
			hi := float64(i) / 10
			r.Histogram[i].Hi = &hi
		}
	}
	return r
}

// bucket is the histogram bucket of the reward v.
func rewardBucket(v float64) int {
	switch {
	case v < 0:
		return 0
	case v > 1:
		return rewardBuckets - 1
	case v == 1:
		return rewardBuckets - 2
	}
	return 1 + int(v*10)
}

// addReward counts one record of outcome oc and prompt index pi into st's
// reward statistics (made on the first graded record); an ungraded record
// (no grade, reward null or absent) counts nowhere. The reward's Sum is the
// caller's (statsAcc.addFloats: its order matters).
func (s *Statistics) addReward(oc schemas.Outcome, pi int64, reward *float64, grade *schemas.Grade) {
	if grade == nil && reward == nil {
		return
	}
	if s.Reward == nil {
		s.Reward = newRewardStatistics()
	}
	r := s.Reward
	r.Graded++
	passed := grade != nil && grade.Passed != nil && *grade.Passed
	switch {
	case passed:
		r.Passed++
	case reward == nil:
		r.Errored++
	default:
		r.Failed++
	}
	if reward != nil {
		v := *reward
		if r.Rewarded == 0 || v < r.Min {
			r.Min = v
		}
		if r.Rewarded == 0 || v > r.Max {
			r.Max = v
		}
		r.Rewarded++
		r.Histogram[rewardBucket(v)].Count++
	}
	add := func(c PassCount) PassCount {
		c.Graded++
		if passed {
			c.Passed++
		}
		return c
	}
	r.ByOutcome[oc] = add(r.ByOutcome[oc])
	r.prompts[pi] = add(r.prompts[pi])
}

// addRewards adds the reward statistics of o (a disjoint folder's) to s's.
// The samples of one prompt may lie in several folders (a sharded run
// assigns records by key), so pass@k is exact when every part has its
// per-prompt counts (statistics computed by Stats); a part read back from
// statistics.json has none, and the pass@k of the parts then enter the
// result as a mean weighted by their prompts (an estimate, like merged
// percentiles).
func (s *Statistics) addRewards(o Statistics) {
	or := o.Reward
	if or == nil || or.Graded == 0 {
		return
	}
	if s.Reward == nil {
		s.Reward = newRewardStatistics()
	}
	r := s.Reward
	if r.Rewarded == 0 || or.Rewarded > 0 && or.Min < r.Min {
		r.Min = or.Min
	}
	if r.Rewarded == 0 || or.Rewarded > 0 && or.Max > r.Max {
		r.Max = or.Max
	}
	r.Graded += or.Graded
	r.Passed += or.Passed
	r.Failed += or.Failed
	r.Errored += or.Errored
	r.Rewarded += or.Rewarded
	r.Sum += or.Sum
	for i := range min(len(r.Histogram), len(or.Histogram)) {
		r.Histogram[i].Count += or.Histogram[i].Count
	}
	for oc, c := range or.ByOutcome {
		m := r.ByOutcome[oc]
		m.Graded += c.Graded
		m.Passed += c.Passed
		r.ByOutcome[oc] = m
	}
	if or.prompts == nil {
		r.estimate(o.PassAtK, or.Prompts, or.MaxSamples)
		return
	}
	for pi, c := range or.prompts {
		m := r.prompts[pi]
		m.Graded += c.Graded
		m.Passed += c.Passed
		r.prompts[pi] = m
	}
}

// estimate adds the pass@k of a part without per-prompt counts, over
// prompts prompts of at most most samples, to the weighted sums.
func (r *RewardStatistics) estimate(passAtK map[string]float64, prompts, most int) {
	if r.est == nil {
		r.est, r.estN = map[string]float64{}, map[string]int{}
	}
	for k, v := range passAtK {
		r.est[k] += v * float64(prompts)
		r.estN[k] += prompts
	}
	r.estPrompts += prompts
	r.estMax = max(r.estMax, most)
}

// finishRewards computes the derived reward figures from the counts: the
// mean, the pass rates (overall: Statistics.PassRate) and pass@k over the
// prompts (Statistics.PassAtK) for k = 1 and k = the most graded samples
// of a prompt.
func (s *Statistics) finishRewards() {
	r := s.Reward
	if r == nil || r.Graded == 0 {
		s.Reward, s.PassRate, s.PassAtK = nil, nil, nil
		return
	}
	if r.Rewarded > 0 {
		r.Mean = r.Sum / float64(r.Rewarded)
	}
	rate := r.PassRate()
	s.PassRate = &rate
	for oc, c := range r.ByOutcome {
		c.PassRate = float64(c.Passed) / float64(c.Graded)
		r.ByOutcome[oc] = c
	}
	r.Prompts, r.MaxSamples = len(r.prompts), 0
	for _, c := range r.prompts {
		r.MaxSamples = max(r.MaxSamples, c.Graded)
	}
	s.PassAtK = map[string]float64{}
	sums, ns := map[string]float64{}, map[string]int{}
	ks := []int{1}
	if r.MaxSamples > 1 {
		ks = append(ks, r.MaxSamples)
	}
	for _, k := range ks {
		key := strconv.Itoa(k)
		for _, c := range r.prompts {
			if c.Graded >= k {
				sums[key] += PassAtK(c.Graded, c.Passed, k)
				ns[key]++
			}
		}
	}
	for k, v := range r.est { // parts read back from JSON
		sums[k] += v
		ns[k] += r.estN[k]
	}
	r.Prompts += r.estPrompts
	r.MaxSamples = max(r.MaxSamples, r.estMax)
	for k, n := range ns {
		if n > 0 {
			s.PassAtK[k] = sums[k] / float64(n)
		}
	}
}

// PassAtK is the unbiased estimate of pass@k from n samples of which c
// passed (Chen et al. 2021, "Evaluating Large Language Models Trained on
// Code"): 1 - C(n-c, k) / C(n, k), computed as a product so large n do not
// overflow. It needs 0 < k <= n.
func PassAtK(n, c, k int) float64 {
	if n-c < k {
		return 1
	}
	p := 1.0
	for i := n - c + 1; i <= n; i++ {
		p *= 1 - float64(k)/float64(i)
	}
	return 1 - p
}

// writeRewardText prints the reward lines of WriteText: nothing when no
// record was graded.
func (s Statistics) writeRewardText(w io.Writer) {
	r := s.Reward
	if r == nil || r.Graded == 0 {
		return
	}
	fmt.Fprintf(w, "graded\t%d: %d passed, %d failed, %d grader errors (reward null)\n", r.Graded, r.Passed, r.Failed, r.Errored)
	if s.PassRate != nil {
		fmt.Fprintf(w, "pass rate\t%.1f%%", 100**s.PassRate)
		if ks := s.passAtKText(); ks != "" {
			fmt.Fprintf(w, "; %s", ks)
		}
		fmt.Fprintln(w)
	}
	for _, oc := range sortedKeys(r.ByOutcome) {
		c := r.ByOutcome[oc]
		fmt.Fprintf(w, "  %s\t%d of %d passed (%.1f%%)\n", oc, c.Passed, c.Graded, 100*c.PassRate)
	}
	if r.Rewarded > 0 {
		fmt.Fprintf(w, "reward\tmean %s, min %s, max %s over %d rewards\n", rewardNum(r.Mean), rewardNum(r.Min), rewardNum(r.Max), r.Rewarded)
		fmt.Fprintf(w, "  histogram\t%s\n", r.histogramText())
	}
}

// PassAtKValue is one pass@k of Statistics.PassAtK.
type PassAtKValue struct {
	K     int
	Value float64
}

// PassAtKList is Statistics.PassAtK in increasing k (report's order).
func (s Statistics) PassAtKList() []PassAtKValue {
	l := make([]PassAtKValue, 0, len(s.PassAtK))
	for k, v := range s.PassAtK {
		n, _ := strconv.Atoi(k)
		l = append(l, PassAtKValue{K: n, Value: v})
	}
	slices.SortFunc(l, func(a, b PassAtKValue) int { return a.K - b.K })
	return l
}

// passAtKText is "pass@1 40.0%, pass@4 75.0%" in increasing k.
func (s Statistics) passAtKText() string {
	var parts []string
	for _, p := range s.PassAtKList() {
		parts = append(parts, fmt.Sprintf("pass@%d %.1f%%", p.K, 100*p.Value))
	}
	return strings.Join(parts, ", ")
}

// PassRate is the share of the graded records that passed.
func (r *RewardStatistics) PassRate() float64 {
	if r == nil || r.Graded == 0 {
		return 0
	}
	return float64(r.Passed) / float64(r.Graded)
}

// histogramText lists the non-empty buckets: "[0.9, 1] 12, (1, ∞) 1".
func (r *RewardStatistics) histogramText() string {
	var parts []string
	for _, b := range r.Histogram {
		if b.Count > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", b.Range(), b.Count))
		}
	}
	return strings.Join(parts, ", ")
}

// Range is the bucket's interval as text: "<0", "0–0.1", "0.9–1", ">1".
func (b RewardBucket) Range() string {
	switch {
	case b.Lo == nil && b.Hi != nil:
		return "<" + rewardNum(*b.Hi)
	case b.Hi == nil && b.Lo != nil:
		return ">" + rewardNum(*b.Lo)
	case b.Lo != nil && b.Hi != nil:
		return rewardNum(*b.Lo) + "–" + rewardNum(*b.Hi)
	}
	return "?"
}

// rewardNum prints a reward with up to four significant digits.
func rewardNum(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}
