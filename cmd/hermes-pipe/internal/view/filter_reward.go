package view

import (
	"fmt"
	"math"

	"github.com/hermes-pipe/hermes-pipe/pipeline/report"
)

// gradeFilters are the values of the grade filter: a record's grade
// (report.Grade's names), any grade, or none.
var gradeFilters = []string{"passed", "failed", "errored", "graded", "ungraded"}

// checkGrade refuses a grade filter that is none of gradeFilters.
func checkGrade(g string) error {
	for _, v := range append(gradeFilters, "") {
		if g == v {
			return nil
		}
	}
	return fmt.Errorf("%w: grade=%q (passed, failed, errored, graded, ungraded)", errBadQuery, g)
}

// rewarded reports whether q filters by grade or reward.
func (q Query) rewarded() bool {
	return q.Grade != "" || !math.IsNaN(q.RewardMin) || !math.IsNaN(q.RewardMax)
}

// reward reports whether record i has the grade q asks for and a reward
// within q's bounds (NaN = none); a record without a reward is outside any
// bound.
func (f *indexFilter) reward(i int) bool {
	q := f.q
	g := report.Grade(f.ix.Grade[i])
	switch q.Grade {
	case "":
	case "graded":
		if g == report.Ungraded {
			return false
		}
	case "ungraded":
		if g != report.Ungraded {
			return false
		}
	default:
		if g.String() != q.Grade {
			return false
		}
	}
	if math.IsNaN(q.RewardMin) && math.IsNaN(q.RewardMax) {
		return true
	}
	r := float64(f.ix.Reward[i])
	return !(math.IsNaN(r) || !math.IsNaN(q.RewardMin) && r < q.RewardMin || !math.IsNaN(q.RewardMax) && r > q.RewardMax)
}

// graded is the number of graded records (one pass over the grade column).
func (ix *Index) graded() int {
	n := 0
	for _, g := range ix.Grade {
		if g != 0 {
			n++
		}
	}
	return n
}
