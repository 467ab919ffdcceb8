package pipeline

import (
	"regexp"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// TestStatsTextNamesEachFigureOnce: the text lists "completed" once when the
// records' completed field is the completed outcome, shows the fields when
// they say more (a compress folder's), gives a tool never called no rate
// (not 0.0%) and lists only tools that failed under "tool errors".
func TestStatsTextNamesEachFigureOnce(t *testing.T) {
	st := NewStatistics()
	st.Records = 4
	st.Outcomes[schemas.OutcomeCompleted] = 3
	st.Outcomes[schemas.OutcomeAPIError] = 1
	st.Completed = 3
	st.Tools["terminal"] = ToolStatistics{Count: 4, Success: 3, Failure: 1, SuccessRate: 0.75}
	st.Tools["patch"] = ToolStatistics{}
	st.ToolErrors["terminal"] = 1
	st.ToolErrors["patch"] = 0
	var b strings.Builder
	if err := st.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	if n := strings.Count(text, "completed"); n != 1 {
		t.Errorf("completed named %d times:\n%s", n, text)
	}
	for _, re := range []string{`(?m)^  patch +0 +0 +0 +-$`, `(?m)^  terminal +4 +3 +1 +75\.0%$`, `(?m)^tool errors\n  terminal +1\n`} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("text lacks %q:\n%s", re, text)
		}
	}
	if strings.Contains(text, "0.0%") || regexp.MustCompile(`(?m)^  patch +0$`).MatchString(text) {
		t.Errorf("a rate or an error line for a tool never called:\n%s", text)
	}

	// A compress folder: its outcomes are compress's, the fields the inputs'.
	st = NewStatistics()
	st.Records = 2
	st.Outcomes["compressed"] = 2
	st.Completed, st.Partial = 1, 1
	b.Reset()
	if err := st.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^record flags +completed 1, partial 1$`).MatchString(b.String()) || strings.Contains(b.String(), "tool errors") {
		t.Errorf("compress-like text:\n%s", b.String())
	}
}
