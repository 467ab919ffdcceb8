package swe

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/docker"
	"github.com/hermes-pipe/hermes-pipe/sandbox/docker/dockertest"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	code := m.Run()
	dockertest.Done()
	os.Exit(code)
}

// suiteDir is datasets/swe-mini, found from this file.
func suiteDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "datasets", "swe-mini")
}

// The instances the sample suite's fakellm scripts were written to solve,
// and how the others must end.
var (
	wantResolved   = []string{"swe-mini__hello", "swe-mini__py-calc", "swe-mini__py-slug", "swe-mini__sh-rev", "swe-mini__sh-upper", "swe-mini__sh-wc"}
	wantUnresolved = []string{"swe-mini__py-fizz", "swe-mini__sh-greet"}
	wantEmpty      = []string{"swe-mini__py-median"}
)

var imagesOnce sync.Once
var imagesErr error

// requireSuite starts or finds dockerd and builds the sample suite's images
// (cached: a few seconds when the base image exists, about 90 s the very
// first time on a fresh daemon). It returns a docker driver.
func requireSuite(t testing.TB) *docker.Driver {
	t.Helper()
	dockertest.Require(t)
	imagesOnce.Do(func() {
		cmd := exec.Command(filepath.Join(suiteDir(), "..", "..", "scripts", "swe-images.sh"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			imagesErr = err
			t.Logf("swe-images.sh:\n%s", out)
		}
	})
	if imagesErr != nil {
		t.Fatalf("build the sample suite images: %v", imagesErr)
	}
	d, err := docker.New(sandbox.Config{RunID: testRunID})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = d.GC(ctx, testRunID)
		_ = d.Release()
	})
	return d
}

// testRunID labels this test process's containers (unique per process, so
// two runs of the package on one daemon never collect each other's).
var testRunID = fmt.Sprintf("swe-test-%d", os.Getpid())

// startFake serves the suite's fakellm scripts on loopback.
func startFake(t testing.TB) (*fakellm.Server, string) {
	t.Helper()
	scripts, err := fakellm.LoadScripts(filepath.Join(suiteDir(), "fakellm-scripts.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := fakellm.New(fakellm.Config{Scripts: scripts})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return srv, hs.URL + "/v1"
}

func client(t testing.TB, base string) llm.Client {
	t.Helper()
	c, err := llm.New(llm.Options{BaseURL: base, Model: "fake", MaxRetries: 1, BackoffBase: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tasksWithMissing writes the suite's tasks plus one whose image was never
// built.
func tasksWithMissing(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(suiteDir(), "tasks.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	missing := `{"instance_id": "swe-mini__missing-image", "image": "hermes-pipe-swe/never-built:latest", "base_commit": "0000000000000000000000000000000000000000", "problem_statement": "This task's image was never built.", "test_cmd": "true", "FAIL_TO_PASS": ["x"]}` + "\n"
	p := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(p, append(data, missing...), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func runOptions(t testing.TB, d *docker.Driver, base, tasks, out string) Options {
	return Options{
		RunConfig: pipeline.RunConfig{Out: out, Workers: 4, CommitInterval: 50 * time.Millisecond},
		Tasks:     TaskSource{File: tasks},
		Rollout: rollout.Options{
			Client:         client(t, base),
			Model:          "fake",
			Driver:         d,
			RunID:          testRunID,
			CommandTimeout: 30 * time.Second,
		},
		Grade:       GradeOptions{TestTimeout: time.Minute},
		CheckImages: d.CheckImages,
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// TestSampleSuite runs the whole loop with real containers: the report's
// resolved set is the set the fakellm scripts were written to solve, the
// missing-image task ends as an error without a model request, junit.xml
// and preds.json are well formed, and the gate cannot be judged while the
// error stands.
func TestSampleSuite(t *testing.T) {
	d := requireSuite(t)
	fake, base := startFake(t)
	out := filepath.Join(t.TempDir(), "out")
	o := runOptions(t, d, base, tasksWithMissing(t), out)
	o.MinResolved = 0.6
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	r := res.Report
	if !slices.Equal(r.ResolvedIDs, sorted(wantResolved)) {
		t.Errorf("resolved = %v, want %v", r.ResolvedIDs, wantResolved)
	}
	if !slices.Equal(r.UnresolvedIDs, sorted(wantUnresolved)) {
		t.Errorf("unresolved = %v, want %v", r.UnresolvedIDs, wantUnresolved)
	}
	if !slices.Equal(r.EmptyPatchIDs, wantEmpty) {
		t.Errorf("empty_patch = %v, want %v", r.EmptyPatchIDs, wantEmpty)
	}
	if !slices.Equal(r.ErrorIDs, []string{"swe-mini__missing-image"}) {
		t.Errorf("error = %v, want the missing-image task", r.ErrorIDs)
	}
	for id, in := range r.Instances {
		if in.Outcome == CatError && id != "swe-mini__missing-image" {
			t.Errorf("%s: %s: %s", id, in.Record, in.Reason)
		}
	}
	if got := fake.Stats().ByScript["missing-image"]; got != 0 {
		t.Errorf("the missing-image task sent %d model requests, want 0", got)
	}
	if in := r.Instances["swe-mini__missing-image"]; in.Record != "sandbox_error" || !strings.Contains(in.Reason, "image unavailable") || in.Usage.TotalTokens != 0 {
		t.Errorf("missing-image: %+v", in)
	}
	// Exit statuses: the sentinel, a reply without a tool call.
	if es := r.Instances["swe-mini__sh-rev"].ExitStatus; es != "completed" {
		t.Errorf("sh-rev exit status %q, want completed", es)
	}
	if es := r.Instances["swe-mini__sh-upper"].ExitStatus; es != ExitSubmitted {
		t.Errorf("sh-upper exit status %q, want submitted (after three false sentinels)", es)
	}
	if in := r.Instances["swe-mini__sh-upper"]; in.APICalls != 5 {
		t.Errorf("sh-upper made %d model calls, want 5: a sentinel shown by cat, grep or a failing command ended it early", in.APICalls)
	}
	if tr := r.Instances["swe-mini__sh-greet"].Tests; tr == nil || len(tr.PassToPass.Failure) != 1 || len(tr.FailToPass.Failure) != 0 {
		t.Errorf("sh-greet tests %+v, want the PASS_TO_PASS test failing", tr)
	}
	// The rate 6/10 reaches 0.6 without the error: pass.
	if r.Gate.Verdict != GatePass {
		t.Errorf("gate %+v, want pass", r.Gate)
	}

	checkFiles(t, out, r)
	mustVerify(t, out)
}

// checkFiles parses junit.xml and preds.json as their readers would.
func checkFiles(t *testing.T, out string, r *Report) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(out, JUnitFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Suites   []struct {
			Cases []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
				Error   *struct{} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("junit.xml does not parse: %v", err)
	}
	if doc.Tests != r.Total || doc.Failures != r.Unresolved+r.EmptyPatch || doc.Errors != r.Errors+r.Pending {
		t.Errorf("junit counts tests=%d failures=%d errors=%d, report %d/%d/%d", doc.Tests, doc.Failures, doc.Errors, r.Total, r.Unresolved+r.EmptyPatch, r.Errors)
	}
	for _, c := range doc.Suites[0].Cases {
		want := r.Instances[c.Name].Outcome
		got := "resolved"
		if c.Failure != nil {
			got = "failure"
		}
		if c.Error != nil {
			got = "error"
		}
		switch {
		case want == "resolved" && got != "resolved",
			(want == "unresolved" || want == "empty_patch") && got != "failure",
			want == "error" && got != "error":
			t.Errorf("junit case %s is %s, report says %s", c.Name, got, want)
		}
	}

	data, err = os.ReadFile(filepath.Join(out, PredsFile))
	if err != nil {
		t.Fatal(err)
	}
	var preds []map[string]any
	if err := json.Unmarshal(data, &preds); err != nil {
		t.Fatalf("preds.json: %v", err)
	}
	if len(preds) != r.Total-r.Errors-r.Pending {
		t.Errorf("preds.json holds %d predictions, want %d", len(preds), r.Total-r.Errors)
	}
	for _, p := range preds {
		if len(p) != 3 {
			t.Errorf("pred %v: want exactly instance_id, model_name_or_path, model_patch", p)
		}
		for _, k := range []string{"instance_id", "model_name_or_path", "model_patch"} {
			if _, ok := p[k].(string); !ok {
				t.Errorf("pred %v: %s is not a string", p, k)
			}
		}
		id := p["instance_id"].(string)
		if patch := p["model_patch"].(string); (id == "swe-mini__py-median") != (patch == "") {
			t.Errorf("pred %s: patch %q", id, patch)
		}
		if strings.Contains(p["model_patch"].(string), "__pycache__") {
			t.Errorf("pred %s: the patch holds ignored build files", id)
		}
		if p["model_name_or_path"] != "fake" {
			t.Errorf("pred %s: model %v", id, p["model_name_or_path"])
		}
	}
}

// mustVerify runs pipeline.Verify on an output folder: the report files are
// declared artifacts in run.json, so every problem fails the test.
func mustVerify(t *testing.T, out string) {
	t.Helper()
	vr, err := pipeline.Verify(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range vr.Problems {
		t.Errorf("verify: %s", p.String())
	}
}
