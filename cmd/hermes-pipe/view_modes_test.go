package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// demoFolder runs generate on datasets/demo with its fake model scripts, as
// `make demo` does (unconfined where this machine cannot confine), with
// extra flags of generate appended.
func demoFolder(t *testing.T, extra ...string) string {
	t.Helper()
	scripts, err := fakellm.LoadScripts(filepath.Join("..", "..", "datasets", "demo", "fakellm-scripts.json"))
	if err != nil {
		t.Fatal(err)
	}
	url := startFake(t, fakellm.Config{Scripts: scripts}, "")
	out := filepath.Join(t.TempDir(), "demo")
	args := []string{"generate", "--prompts", filepath.Join("..", "..", "datasets", "demo", "prompts.jsonl"), "--out", out,
		"--base-url", url, "--model", "demo-model", "--workers", "4", "--progress", "none"}
	if code, _, _ := hp(t, "sandbox", "check"); code != 0 {
		args = append(args, "--local-isolation", "none")
	}
	args = append(args, extra...)
	if code, _, errs := hp(t, args...); code != exitOK && code != exitRowsFailed {
		t.Fatalf("demo generate exit %d: %s", code, errs)
	}
	return out
}

// compressFolder compresses nine trajectories, three of them over the
// budget, with the fake model's summaries; it returns the output folder and
// the input file.
func compressFolder(t *testing.T) (string, string) {
	t.Helper()
	_, url := startFakeServer(t, fakellm.Config{SummaryWords: 40})
	dir := t.TempDir()
	in := nineTrajectories(t, dir)
	out := filepath.Join(dir, "compressed")
	if code, _, errs := hpc(t, "compress", "--in", in, "--out", out, "--target-tokens", "1500", "--summary-tokens", "100",
		"--base-url", url, "--model", "m", "--progress", "none"); code != 0 {
		t.Fatalf("compress exit %d: %s", code, errs)
	}
	return out, in
}

// reportOffline writes `report` of dir and opens it in Chromium: it must
// render with no error and request nothing but itself. sel must be on the
// page; its text is returned.
func reportOffline(t *testing.T, b *browser, dir, name, sel string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), name+".html")
	if code, _, errs := hp(t, "report", "-o", file, dir); code != 0 {
		t.Fatalf("report %s exit %d: %s", name, code, errs)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("report %s: mode %v (%v), want 0644", name, st.Mode().Perm(), err)
	}
	return openOffline(t, b, file, name, sel)
}

// openOffline opens an HTML file and checks it loads nothing else and logs
// no error; it leaves a screenshot NAME.png.
func openOffline(t *testing.T, b *browser, file, name, sel string) string {
	t.Helper()
	before := len(b.urls())
	nerr := len(b.pageErrors())
	b.run(t, "open "+name, chromedp.Navigate("file://"+file), chromedp.WaitVisible(chromedp.CSS(sel)))
	got := b.text(t, sel)
	screenshot(t, b, filepath.Join(artifactDir(t), name+".png"))
	for _, u := range b.urls()[before:] {
		if u != "file://"+file {
			t.Errorf("report %s requested %s", name, u)
		}
	}
	if errs := b.pageErrors()[nerr:]; len(errs) > 0 {
		t.Errorf("report %s: page errors %v", name, errs)
	}
	return got
}

// viewRows lists the rows view serves.
func viewRows(t *testing.T, url, query string) []struct {
	I   int    `json:"i"`
	Key string `json:"key"`
	ID  string `json:"id"`
} {
	t.Helper()
	res, err := http.Get(url + "api/records?size=500&" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var page struct {
		Rows []struct {
			I   int    `json:"i"`
			Key string `json:"key"`
			ID  string `json:"id"`
		} `json:"rows"`
	}
	if err := json.NewDecoder(res.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	return page.Rows
}

// sweFolder runs the sample suite (its images built first) with its fake
// model against a baseline written to baseline, in which py-calc and
// py-fizz were resolved: py-fizz regresses, so the gate fails. It returns the
// output folder.
func sweFolder(t *testing.T, baseline string) string {
	t.Helper()
	base := sweSuiteModel(t)
	out := filepath.Join(t.TempDir(), "swe")
	if err := os.WriteFile(baseline, []byte(`{"resolved_ids": ["swe-mini__py-calc", "swe-mini__py-fizz"]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, errs := hpSWE(t, "swe", "--out", out, "--base-url", base, "--model", "fake", "--progress", "none",
		"--tasks", filepath.Join(sweSuite(), "tasks.jsonl"), "--baseline", baseline)
	if code != exitGate {
		t.Fatalf("swe exit %d, want %d (py-fizz regressed against the baseline)\n%s\n%s", code, exitGate, stdout, errs)
	}
	return out
}

// count evaluates the number of elements sel matches.
func count(t *testing.T, b *browser, sel string) int {
	t.Helper()
	n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
	if err != nil {
		t.Fatalf("count %s: %v", sel, err)
	}
	return n
}

// noPageErrors checks the requests made since the first mark of them, and
// every page error.
func noPageErrors(t *testing.T, b *browser, url string, mark int) {
	t.Helper()
	for _, u := range b.urls()[mark:] {
		if !strings.HasPrefix(u, url) {
			t.Errorf("the page requested %s, outside the viewer", u)
		}
	}
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}
}

// The demo folder's and a compress folder's reports open offline; a
// compressed record's page shows it beside its original, with compress's
// own token counts per turn and the summarised turns highlighted.
func TestViewCompressRecordInBrowser(t *testing.T) {
	b := newBrowser(t)
	if got := reportOffline(t, b, demoFolder(t), "report-demo", "#outcomes"); !strings.Contains(got, "completed") {
		t.Errorf("demo report outcomes %q", got)
	}
	dir, in := compressFolder(t)
	if got := reportOffline(t, b, dir, "report-compress", "#compression"); !strings.Contains(got, "trajectories_compressed") {
		t.Errorf("compress report: %q", got)
	}

	url := startView(t, dir)
	mark := len(b.urls())
	rows := viewRows(t, url, "compress=compressed")
	if len(rows) != 3 {
		t.Fatalf("%d compressed records, want 3: %+v", len(rows), rows)
	}
	var want struct {
		Conversations []any `json:"conversations"`
		Metrics       struct {
			Original   int `json:"original_tokens"`
			Compressed int `json:"compressed_tokens"`
			Turns      int `json:"original_turns"`
			Region     struct {
				Count int `json:"turns_count"`
			} `json:"compression_region"`
		} `json:"compression_metrics"`
	}
	for _, r := range catRecords(t, dir) {
		if r["id"] == rows[1].ID {
			raw, _ := json.Marshal(r)
			json.Unmarshal(raw, &want)
		}
	}
	if want.Metrics.Region.Count == 0 {
		t.Fatalf("fixture premise: record %s has no summarised region", rows[1].ID)
	}
	hash := fmt.Sprintf("#/r/%d?compress=compressed", rows[1].I)
	b.run(t, "open compressed record", chromedp.Navigate(url+hash), ready(hash), chromedp.WaitVisible(chromedp.CSS("#compare")))
	orig, comp := b.text(t, "#original h4"), b.text(t, "#conversation h4")
	if w := fmt.Sprintf("original: %d turns, %d tokens", want.Metrics.Turns, want.Metrics.Original); orig != w {
		t.Errorf("original heading %q, want %q", orig, w)
	}
	if w := fmt.Sprintf("compressed: %d turns, %d tokens", len(want.Conversations), want.Metrics.Compressed); comp != w {
		t.Errorf("compressed heading %q, want %q", comp, w)
	}
	if n := count(t, b, "#original .turn.region"); n != want.Metrics.Region.Count {
		t.Errorf("%d original turns highlighted as summarised, want %d", n, want.Metrics.Region.Count)
	}
	if n := count(t, b, "#conversation .turn.summary"); n != 1 {
		t.Errorf("%d summary turns highlighted, want 1", n)
	}
	if n := count(t, b, "#original .turn .tok"); n != want.Metrics.Turns {
		t.Errorf("%d original turns carry a token count, want %d", n, want.Metrics.Turns)
	}
	if src := b.text(t, "#original .src"); !strings.Contains(src, in+":") {
		t.Errorf("original read from %q, want the input %s", src, in)
	}
	screenshot(t, b, filepath.Join(artifactDir(t), "compress-record.png"))

	// j walks the filtered list: the next compressed record, not the next
	// record of the folder.
	next := fmt.Sprintf("#/r/%d?compress=compressed", rows[2].I)
	b.run(t, "j", chromedp.KeyEvent("j"), ready(next))
	b.run(t, "k", chromedp.KeyEvent("k"), ready(hash))
	noPageErrors(t, b, url, mark)

	// The input moved: the page says where to point view; --original does.
	moved := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.MkdirAll(moved, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(in, filepath.Join(moved, filepath.Base(in))); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		found bool
	}{{nil, false}, {[]string{"--original", moved}, true}} {
		u := startView(t, dir, tc.args...)
		res, err := http.Get(fmt.Sprintf("%sapi/record/%d/original", u, rows[1].I))
		if err != nil {
			t.Fatal(err)
		}
		var o struct {
			Found  bool   `json:"found"`
			Source string `json:"source"`
			Why    string `json:"why"`
		}
		json.NewDecoder(res.Body).Decode(&o)
		res.Body.Close()
		if o.Found != tc.found || !tc.found && !strings.Contains(o.Why, "--original") || tc.found && !strings.HasPrefix(o.Source, moved) {
			t.Errorf("view %v: original %+v", tc.args, o)
		}
	}
}

// The swe sample suite's report opens offline, and a task's page shows its
// patch, its test results, the gate and its change against the baseline.
func TestViewSWERecordInBrowser(t *testing.T) {
	baseline := filepath.Join(t.TempDir(), "baseline.json")
	out := sweFolder(t, baseline)
	b := newBrowser(t)
	// The report swe writes itself, and `report` of the folder.
	if st, err := os.Stat(filepath.Join(out, "report.html")); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("swe's report.html: %v %v, want mode 0644", st, err)
	}
	openOffline(t, b, filepath.Join(out, "report.html"), "report-swe-own", "#swe")
	got := reportOffline(t, b, out, "report-swe", "#swe")
	for _, w := range []string{"swe-mini__py-fizz", "regressed", "fixed"} {
		if !strings.Contains(got, w) {
			t.Errorf("swe report table lacks %q:\n%s", w, got)
		}
	}

	url := startView(t, out)
	mark := len(b.urls())
	at := map[string]int{}
	for _, r := range viewRows(t, url, "") {
		at[r.ID] = r.I
	}
	for _, tc := range []struct{ id, change, shot string }{
		{"swe-mini__py-fizz", "regressed", "swe-record.png"},
		{"swe-mini__py-calc", "still resolved", ""},
		{"swe-mini__py-slug", "fixed", ""},
	} {
		i, ok := at[tc.id]
		if !ok {
			t.Fatalf("no record for %s in %v", tc.id, at)
		}
		hash := fmt.Sprintf("#/r/%d", i)
		b.run(t, "open "+tc.id, chromedp.Navigate(url+hash), ready(hash), chromedp.WaitVisible(chromedp.CSS("#swe")))
		if got := b.text(t, "#swe-change"); got != tc.change {
			t.Errorf("%s: change %q, want %q", tc.id, got, tc.change)
		}
		swe := b.text(t, "#swe")
		for _, w := range []string{"gate fail", "FAIL_TO_PASS", "PASS_TO_PASS", "patch"} {
			if !strings.Contains(swe, w) {
				t.Errorf("%s: SWE panel lacks %q:\n%s", tc.id, w, swe)
			}
		}
		if tc.change == "still resolved" && (count(t, b, "#swe-tests li.bad") != 0 || count(t, b, "#swe-tests li.ok") == 0) {
			t.Errorf("%s: resolved, yet its tests are not all passing on the page:\n%s", tc.id, swe)
		}
		if count(t, b, "#patch .diff .add")+count(t, b, "#patch .diff .del") == 0 {
			t.Errorf("%s: the patch is not shown as a coloured diff:\n%s", tc.id, swe)
		}
		if tc.shot != "" {
			screenshot(t, b, filepath.Join(artifactDir(t), tc.shot))
		}
	}
	noPageErrors(t, b, url, mark)
}
