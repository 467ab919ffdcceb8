package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// TestTimingsInSummaryAndStats: rows against a model with a latency that
// run a command in the sandbox: the closing summary names the part that
// took the most wall time, the one `stats --json` finds over the same
// records, and `stats` prints each part's share and percentiles.
func TestTimingsInSummaryAndStats(t *testing.T) {
	url := startFake(t, fakellm.Config{Latency: 100 * time.Millisecond}, echoScript)
	var rows []string
	for i := range 4 {
		rows = append(rows, fmt.Sprintf(`{"prompt": "echo t%d"}`, i))
	}
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hp(t, "generate", "--prompts", writePrompts(t, rows...), "--out", out, "--base-url", url, "--model", "m",
		"--progress", "none", "--toolsets", "terminal", "--workers", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := summaryBlock(t, errs, out)
	m := regexp.MustCompile(`^  time: most in (\w+) \((\d+)% of [^ ]+ wall time, p50 [^ ]+, p99 [^ ]+ per record\); (.*)$`)
	var biggest string
	for _, l := range lines {
		if s := m.FindStringSubmatch(l); s != nil {
			biggest = s[1]
			if !strings.Contains(s[3], "model ") {
				t.Errorf("the time line lacks the model's share: %q", l)
			}
		}
	}
	if biggest == "" {
		t.Fatalf("summary has no time line:\n%s", strings.Join(lines, "\n"))
	}

	code, js, errs := hp(t, "stats", "--json", out)
	if code != 0 {
		t.Fatalf("stats --json: exit %d: %s", code, errs)
	}
	var st pipeline.Statistics
	if err := json.Unmarshal([]byte(js), &st); err != nil {
		t.Fatal(err)
	}
	if st.Timings == nil || st.Timings.Records != 4 || st.Timings.Biggest().Name != biggest {
		t.Fatalf("stats --json timings %+v; the summary's biggest part %q", st.Timings, biggest)
	}
	if p := st.Timings.Parts[0]; p.Name != pipeline.PartModel || p.TotalMS == 0 || p.P50MS > p.P90MS || p.P90MS > p.P99MS || p.P99MS > p.MaxMS {
		t.Fatalf("model part %+v", p)
	}
	code, text, errs := hp(t, "stats", out)
	if code != 0 {
		t.Fatalf("stats: exit %d: %s", code, errs)
	}
	if !regexp.MustCompile(`(?m)^timings +over 4 records, wall time .*; most in `+biggest+`$`).MatchString(text) ||
		!regexp.MustCompile(`(?m)^  model +\d+\.\d% +\S+ +\S+ +\S+ +\S+ +\S+$`).MatchString(text) {
		t.Fatalf("stats text:\n%s", text)
	}
}
