package swe

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// TestGradeSuite checks the sample suite and the grader together: every
// task's reference patch resolves it, a patch that touches no code leaves
// it unresolved (its FAIL_TO_PASS tests fail at the base commit), a patch
// that does not apply is unresolved, and a test command past its timeout is
// a harness error.
func TestGradeSuite(t *testing.T) {
	d := requireSuite(t)
	tasks, err := ReadTasks(filepath.Join(suiteDir(), "tasks.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	o := GradeOptions{Driver: d, RunID: testRunID, TestTimeout: time.Minute}
	ctx := context.Background()
	const noop = "diff --git a/NOOP.md b/NOOP.md\nnew file mode 100644\n--- /dev/null\n+++ b/NOOP.md\n@@ -0,0 +1 @@\n+nothing\n"
	type result struct {
		id         string
		gold, base Grade
	}
	results := make(chan result, len(tasks))
	for _, tk := range tasks {
		go func() {
			r := result{id: tk.InstanceID, base: GradePatch(ctx, o, tk, noop)}
			if tk.GoldPatch != "" {
				r.gold = GradePatch(ctx, o, tk, tk.GoldPatch)
			}
			results <- r
		}()
	}
	for range tasks {
		r := <-results
		if r.gold.GradedBy != "" && r.gold.Outcome != OutcomeResolved {
			t.Errorf("%s: the reference patch is %s: %s\n%s", r.id, r.gold.Outcome, r.gold.Reason, r.gold.LogTail)
		}
		if r.base.Outcome != OutcomeUnresolved {
			t.Errorf("%s: a no-op patch is %s (%s), want unresolved", r.id, r.base.Outcome, r.base.Reason)
		}
	}

	tk := tasks[0]
	g := GradePatch(ctx, o, tk, "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,1 +1,1 @@\n-no such line\n+x\n")
	if g.Outcome != OutcomeUnresolved || !strings.Contains(g.Reason, "does not apply") {
		t.Errorf("bad patch: %s %s", g.Outcome, g.Reason)
	}
	slow := tk
	slow.TestCmd = "sleep 30"
	g = GradePatch(ctx, GradeOptions{Driver: d, RunID: testRunID, TestTimeout: time.Second}, slow, tk.GoldPatch)
	if g.Outcome != schemas.OutcomeSandboxError || !strings.Contains(g.Reason, "timed out") {
		t.Errorf("slow tests: %s %s", g.Outcome, g.Reason)
	}
	if g := GradePatch(ctx, o, tk, " \n"); g.Outcome != OutcomeEmptyPatch || g.StartMS != 0 {
		t.Errorf("empty patch: %+v", g)
	}
	missing := tk
	missing.Image = "hermes-pipe-swe/never-built:latest"
	if g := GradePatch(ctx, o, missing, tk.GoldPatch); g.Outcome != schemas.OutcomeSandboxError {
		t.Errorf("missing image: %s %s", g.Outcome, g.Reason)
	}
}

// BenchmarkSuite measures the sample suite's 8 SWE-bench-form tasks end to
// end with real containers and a model answering in 300 ms or 1 s: the
// harness overhead per task (taking the patch, container start, applying
// patches, the tests, teardown; model time excluded) and the wall time with
// 1 and 4 workers.
//
//	go test -run '^$' -bench Suite -benchtime 1x ./stages/swe
func BenchmarkSuite(b *testing.B) {
	for _, lat := range []time.Duration{300 * time.Millisecond, time.Second} {
		b.Run("latency="+lat.String(), func(b *testing.B) { benchSuite(b, lat) })
	}
}

func benchSuite(b *testing.B, latency time.Duration) {
	d := requireSuite(b)
	scripts, err := fakellm.LoadScripts(filepath.Join(suiteDir(), "fakellm-scripts.json"))
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(fakellm.New(fakellm.Config{Scripts: scripts, Latency: latency}))
	defer hs.Close()
	data, err := os.ReadFile(filepath.Join(suiteDir(), "tasks.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if strings.Contains(l, `"problem_statement"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 8 {
		b.Fatalf("%d SWE-bench-form tasks, want 8", len(lines))
	}
	tasks := filepath.Join(b.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(tasks, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		wall := map[int]time.Duration{}
		var harness Durations
		for _, workers := range []int{1, 4} {
			o := runOptions(b, d, hs.URL+"/v1", tasks, filepath.Join(b.TempDir(), fmt.Sprint("out", workers)))
			o.Workers = workers
			t0 := time.Now()
			res, err := Run(context.Background(), o)
			if err != nil {
				b.Fatal(err)
			}
			wall[workers] = time.Since(t0)
			if res.Report.Resolved != len(wantResolved)-1 {
				b.Fatalf("%d resolved", res.Report.Resolved)
			}
			if workers == 1 {
				harness = res.Report.HarnessMS
			}
		}
		b.ReportMetric(float64(harness.Median), "harness-median-ms")
		b.ReportMetric(float64(harness.P95), "harness-p95-ms")
		b.ReportMetric(wall[1].Seconds(), "sequential-s")
		b.ReportMetric(wall[4].Seconds(), "workers4-s")
		b.ReportMetric(wall[4].Seconds()/wall[1].Seconds(), "ratio")
	}
}
