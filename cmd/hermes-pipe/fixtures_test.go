package main

import (
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/stages/cron"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// The behaviour fixtures: a finished output folder per mode, checked in under
// datasets/fixtures, and what each reading command answers about it, checked
// in under testdata/fixtures. A change that moves code around must leave
// every answer byte-identical; a change that means to alter an answer
// rewrites the golden files with -update-fixtures and shows the difference
// in review. -write-fixtures builds the folders again with the current code
// (generate: the demo prompts, in JSONL and in Parquet shards; compress: nine trajectories, three over the
// budget; swe: the sample suite against a baseline; cron: one execution of
// an agent job), which changes them
// (keys, times, costs), so the golden files must then be rewritten too.
var (
	writeFixtures  = flag.Bool("write-fixtures", false, "build datasets/fixtures/<mode> again with the current code (then use -update-fixtures)")
	updateFixtures = flag.Bool("update-fixtures", false, "rewrite testdata/fixtures from the commands' current answers")
)

func fixturesDir() string { return filepath.Join("..", "..", "datasets", "fixtures") }

// TestWriteBehaviourFixtures builds the fixture folders; it runs only with
// -write-fixtures.
func TestWriteBehaviourFixtures(t *testing.T) {
	if !*writeFixtures {
		t.Skip("run with -write-fixtures to build datasets/fixtures again")
	}
	put := func(mode, dir string) {
		dst := filepath.Join(fixturesDir(), mode)
		if err := os.RemoveAll(dst); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(dst, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
	}
	put("generate", demoFolder(t))
	put("generate-parquet", demoFolder(t, "--format", "parquet"))

	out, in := compressFolder(t)
	put("compress", out)
	b, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	// The row keys name the input file (in.jsonl), so it keeps its name.
	if err := os.MkdirAll(filepath.Join(fixturesDir(), "compress-input"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fixturesDir(), "compress-input", filepath.Base(in)), b, 0o644); err != nil {
		t.Fatal(err)
	}

	// report.json names the baseline by the path given, relative to this
	// package, as view reads it.
	put("swe", sweFolder(t, filepath.Join(fixturesDir(), "swe-baseline.json")))
	put("cron", cronFixture(t))
}

// cronFixture runs one agent job once (a terminal call, then an answer) and
// returns the folder of its execution.
func cronFixture(t *testing.T) string {
	home, work := t.TempDir(), t.TempDir()
	_, url := startFakeServer(t, fakellm.Config{Scripts: mustScripts(t, `{"scripts": [{"match": "count the files", "steps": [
  {"tool_calls": [{"name": "terminal", "arguments": {"command": "ls | wc -l"}}]},
  {"content": "There are no files."}]}]}`)})
	now := time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)
	deps := cronDeps{
		Agent: &cron.RolloutRunner{Driver: lazyDriver{scheme: "local"}, DefaultBaseURL: url, DefaultModel: "m"},
		Now:   func() time.Time { return now },
	}
	out, err := cronApp(t, deps, "--home", home, "add", "--tz", "UTC", "--name", "count", "--workdir", work,
		"--toolsets", "terminal", "every 1h", "count the files")
	if err != nil {
		t.Fatalf("add: %v\n%s", err, out)
	}
	id := strings.Fields(out)[1] // "added ID ..."
	now = now.Add(time.Hour + 10*time.Second)
	if out, err := cronApp(t, deps, "--home", home, "tick"); err != nil {
		t.Fatalf("tick: %v\n%s", err, out)
	}
	runs, err := os.ReadDir(filepath.Join(home, "cron", "runs", id))
	if err != nil || len(runs) != 1 {
		t.Fatalf("the job's executions: %v %v", runs, err)
	}
	return cron.RunDir(home, id, runs[0].Name())
}

// TestBehaviourFixtures runs cat, stats (text and --json), report, verify and
// view's JSON answers over each fixture folder and compares every answer
// byte for byte with its golden file.
func TestBehaviourFixtures(t *testing.T) {
	for _, mode := range []string{"generate", "generate-parquet", "compress", "swe", "cron"} {
		t.Run(mode, func(t *testing.T) {
			dir := filepath.Join(fixturesDir(), mode)
			if _, err := os.Stat(filepath.Join(dir, "run.json")); err != nil {
				t.Fatalf("fixture folder %s: %v (build it with -write-fixtures)", dir, err)
			}
			got := fixtureAnswers(t, mode, dir)
			compareFixtures(t, filepath.Join("testdata", "fixtures", mode), got)
		})
	}
}

// fixtureAnswers is every answer the reading commands give about dir, by a
// file name; absolute paths of the checkout are replaced by FIXTURES.
func fixtureAnswers(t *testing.T, mode, dir string) map[string]string {
	got := map[string]string{}
	abs, err := filepath.Abs(fixturesDir())
	if err != nil {
		t.Fatal(err)
	}
	norm := func(s string) string {
		return strings.ReplaceAll(strings.ReplaceAll(s, abs, "FIXTURES"), fixturesDir(), "FIXTURES")
	}
	cli := func(name string, args ...string) {
		code, out, errs := hpSWE(t, args...)
		got[name] = norm(fmt.Sprintf("exit %d\n-- stdout\n%s-- stderr\n%s", code, out, errs))
	}
	cli("cat.txt", "cat", dir)
	cli("stats.txt", "stats", dir)
	cli("stats-json.txt", "stats", "--json", dir)
	cli("verify.txt", "verify", dir)
	html := filepath.Join(t.TempDir(), "report.html")
	cli("report.txt", "report", "-o", html, dir)
	got["report.txt"] = strings.ReplaceAll(got["report.txt"], html, "REPORT")
	b, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	got["report.html"] = norm(string(b))

	var extra []string
	if mode == "compress" {
		extra = []string{"--original", filepath.Join(fixturesDir(), "compress-input")}
	}
	url := startView(t, dir, extra...)
	get := func(name, path string) string {
		res, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		s := fmt.Sprintf("%d %s\n%s\n", res.StatusCode, res.Header.Get("Content-Type"), norm(string(body)))
		got[name] = s
		return s
	}
	// The index is ready when a sort answers (it answers 503 while building).
	deadline := time.Now().Add(2 * time.Minute)
	for {
		res, err := http.Get(url + "api/records?sort=turns")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("view of %s: the index was not ready after 2 minutes (last status %d)", dir, res.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
	get("view-meta.json", "api/meta")
	for _, q := range []string{"", "sort=-tokens", "sort=cost", "sort=-turns&size=2&page=1", "failures=yes", "failures=no",
		"outcome=completed", "outcome=failed", "q=the", "turns_min=3", "tokens_max=2000", "compress=compressed", "toolset=terminal", "tool=terminal"} {
		name := "view-records-" + strings.NewReplacer("=", "_", "&", "+").Replace(q) + ".json"
		if q == "" {
			name = "view-records.json"
		}
		get(name, "api/records?"+q)
	}
	rows := viewRows(t, url, "")
	for _, r := range rows {
		get(fmt.Sprintf("view-record-%d.json", r.I), fmt.Sprintf("api/record/%d", r.I))
		get(fmt.Sprintf("view-near-%d.json", r.I), fmt.Sprintf("api/record/%d/near?outcome=completed", r.I))
		get(fmt.Sprintf("view-raw-%d.json", r.I), fmt.Sprintf("raw/%d", r.I))
		if mode == "compress" {
			get(fmt.Sprintf("view-original-%d.json", r.I), fmt.Sprintf("api/record/%d/original", r.I))
		}
	}
	return got
}

// compareFixtures compares got with the golden files of dir (or rewrites
// them under -update-fixtures); a golden file no answer has fails too.
func compareFixtures(t *testing.T, dir string, got map[string]string) {
	if *updateFixtures {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, s := range got {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	seen := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := filepath.Base(p)
		seen[name] = true
		want, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: no answer any more", p)
		case g != string(want):
			t.Errorf("%s differs from the golden file:\n%s", p, firstDiff(string(want), g))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range got {
		if !seen[name] {
			t.Errorf("%s: a new answer without a golden file (run with -update-fixtures)", filepath.Join(dir, name))
		}
	}
}

// firstDiff shows where two texts first differ, with some context.
func firstDiff(want, got string) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	from := max(0, i-200)
	clip := func(s string) string { return s[min(from, len(s)):min(i+200, len(s))] }
	return fmt.Sprintf("at byte %d (want %d bytes, got %d)\nwant: …%s…\ngot:  …%s…", i, len(want), len(got), clip(want), clip(got))
}
