package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// chromiumPath finds a headless-capable Chromium; under CI a missing one
// fails the test (.ci/run installs Debian's chromium), elsewhere it skips.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed; CI requires the browser tests (apt-get install chromium)")
	}
	t.Skip("chromium not installed")
	return ""
}

// artifactDir is where the browser tests leave their screenshots: $ARTIFACTS
// when set (CI keeps it), else a folder under the test's temp dir.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	dir = filepath.Join(dir, "view")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// viewFolder generates a small folder: three records with reasoning (one
// about an okapi), two whose model calls all fail.
func viewFolder(t *testing.T) string {
	t.Helper()
	url := startFake(t, fakellm.Config{}, `{"scripts": [
	  {"match": "^think one", "steps": [{"reasoning": "The okapi is related to the giraffe.", "content": "Answer one."}]},
	  {"match": "^think two", "steps": [{"tool_calls": [{"name": "terminal", "arguments": {"command": "echo fine"}}, {"name": "no_such_tool", "arguments": {}}]},
	    {"reasoning": "Plain thoughts.", "content": "Another answer."}]},
	  {"match": "^think", "steps": [{"reasoning": "Plain thoughts.", "content": "Another answer."}]},
	  {"match": "^fail", "steps": [{"fault": {"kind": "500", "times": -1}}]}]}`)
	prompts := writePrompts(t, `{"prompt": "think one\nwith a second line"}`, `{"prompt": "think two"}`, `{"prompt": "think three"}`, `{"prompt": "fail one"}`, `{"prompt": "fail two"}`)
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m",
		"--progress", "none", "--max-retries", "0", "--price-in", "1", "--price-out", "2")
	if code != exitRowsFailed {
		t.Fatalf("generate exit %d, want %d (two rows fail): %s", code, exitRowsFailed, errs)
	}
	return out
}

// startView runs `hermes-pipe view` in-process until the test ends and
// returns its URL; extra are more flags.
func startView(t *testing.T, dir string, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrFile := filepath.Join(t.TempDir(), "addr")
	var out, errb bytes.Buffer
	done := make(chan error, 1)
	go func() {
		app := newApp(&out, &errb)
		args := append([]string{"hermes-pipe", "view", "--addr", "127.0.0.1:0", "--addr-file", addrFile, "--cache-dir", filepath.Join(t.TempDir(), "cache")}, extra...)
		done <- app.RunContext(ctx, append(args, dir))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("view: %v; stderr: %s", err, errb.String())
		}
		if !strings.Contains(errb.String(), "loopback only") {
			t.Errorf("view did not say it listens on loopback only: %s", errb.String())
		}
	})
	for {
		if b, err := os.ReadFile(addrFile); err == nil && len(b) > 0 {
			return "http://" + string(b) + "/"
		}
		select {
		case err := <-done:
			t.Fatalf("view ended before serving: %v; %s", err, errb.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// browser starts headless Chromium and records console errors, uncaught
// exceptions and every request's URL.
type browser struct {
	ctx      context.Context
	mu       sync.Mutex
	errors   []string
	requests []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{}
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg := ev.ExceptionDetails.Text
			if ex := ev.ExceptionDetails.Exception; ex != nil && ex.Description != "" {
				msg += " " + ex.Description
			}
			b.errors = append(b.errors, msg)
		case *runtime.EventConsoleAPICalled:
			if string(ev.Type) == "error" {
				b.errors = append(b.errors, "console.error")
			}
		case *network.EventRequestWillBeSent:
			b.requests = append(b.requests, ev.Request.URL)
		}
	}))
	t.Cleanup(func() { cancel(); acancel() })
	// The first run starts the browser and must not carry a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	// A guard against a wedged browser, not a performance assertion.
	tctx, tcancel := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(tcancel)
	b.ctx = tctx
	return b
}

func (b *browser) run(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		t.Fatalf("%s: %v (page errors so far: %v)", what, err, b.pageErrors())
	}
}

func (b *browser) pageErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.errors)
}

func (b *browser) urls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.requests)
}

func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("read %s: %v", sel, err)
	}
	return s
}

func (b *browser) rows(t *testing.T) []string {
	t.Helper()
	rows, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#records tbody tr")].map(r => r.innerText)`))
	if err != nil {
		t.Fatalf("read rows: %v", err)
	}
	return rows
}

func screenshot(t *testing.T, b *browser, path string) {
	t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// rowOf is the position in the list shown of the row whose prompt is
// prompt.
func rowOf(t *testing.T, b *browser, prompt string) int {
	t.Helper()
	prompts, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#records tbody td.prompt")].map(td => td.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.Index(prompts, prompt)
	if i < 0 {
		t.Fatalf("no row with prompt %q in %q", prompt, prompts)
	}
	return i
}

// ready waits until the page has rendered the route hash.
func ready(hash string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitReady(chromedp.CSS(`body[data-ready="` + hash + `"]`))
}

// eval runs JavaScript for its effect.
func eval(js string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[any](js)(ctx, t)
		if errors.Is(err, chromedp.ErrJSUndefined) || errors.Is(err, chromedp.ErrJSNull) {
			return nil
		}
		return err
	})
}

func TestViewInBrowser(t *testing.T) {
	b := newBrowser(t)
	dir := viewFolder(t)
	url := startView(t, dir)
	arts := artifactDir(t)

	// The list: every record.
	b.run(t, "load list", chromedp.Navigate(url), ready("#/"))
	if got := b.text(t, "#status"); !strings.Contains(got, "5 matching of 5 records") {
		t.Fatalf("status %q", got)
	}
	screenshot(t, b, filepath.Join(arts, "list.png"))
	// A prompt column: each row's prompt, its first line only.
	prompts, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#records tbody td.prompt")].map(td => td.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(prompts)
	if want := []string{"fail one", "fail two", "think one", "think three", "think two"}; !slices.Equal(prompts, want) {
		t.Errorf("prompt column %q, want %q", prompts, want)
	}
	if got := b.text(t, "#records thead"); !strings.Contains(got, "prompt") {
		t.Errorf("list header %q has no prompt column", got)
	}

	// A tool error is shown apart from a tool result: its own class and
	// another colour.
	// The row is found and clicked in one evaluation: the list is drawn
	// again when the record index is ready, which may fall between a
	// lookup of its node and a click on it.
	rowOf(t, b, "think two")
	b.run(t, "open the record with tool calls", eval(`location.hash = "#/"`), ready("#/"),
		eval(`[...document.querySelectorAll("#records tbody tr")].find(tr => tr.querySelector("td.prompt").textContent === "think two").click()`),
		chromedp.WaitVisible(chromedp.CSS("#conversation")))
	calls, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#conversation .call.tool-error, #conversation .call.tool-result")].map(
	  el => el.className + "|" + el.querySelector("b").textContent + "|" + getComputedStyle(el).borderTopColor)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 {
		t.Fatalf("tool responses %q, want a result and an error", calls)
	}
	okCall, errCall := strings.Split(calls[0], "|"), strings.Split(calls[1], "|")
	if okCall[0] != "call tool-result" || okCall[1] != "terminal" || errCall[0] != "call tool-error" || errCall[1] != "no_such_tool" {
		t.Errorf("tool responses %q", calls)
	}
	if okCall[2] == errCall[2] {
		t.Errorf("a tool error has the colour of a result: %q", calls)
	}
	screenshot(t, b, filepath.Join(arts, "tool-error.png"))
	b.run(t, "back to the list", eval(`location.hash = "#/"`), ready("#/"))

	// Filter by outcome through the select.
	b.run(t, "filter by outcome", chromedp.SetValue(chromedp.CSS("#f-outcome"), "api_error"),
		eval(`document.querySelector("#f-outcome").dispatchEvent(new Event("change", {bubbles: true}))`),
		ready("#/?outcome=api_error"))
	rows := b.rows(t)
	if len(rows) != 2 {
		t.Fatalf("outcome filter: %d rows, want 2: %q", len(rows), rows)
	}
	for _, r := range rows {
		if !strings.Contains(r, "api_error") {
			t.Errorf("outcome filter shows %q", r)
		}
	}

	// Search a string that only one record's reasoning holds.
	b.run(t, "search", eval(`location.hash = "#/"`), ready("#/"),
		chromedp.SendKeys(chromedp.CSS("#q"), "okapi\r"), ready("#/?q=okapi"))
	rows = b.rows(t)
	if len(rows) != 1 || !strings.Contains(rows[0], "completed") {
		t.Fatalf("search okapi: %q", rows)
	}

	// Open it: the conversation, the think block closed until expanded.
	b.run(t, "open record", eval(`document.querySelector("#records tbody tr").click()`), chromedp.WaitVisible(chromedp.CSS("#conversation")))
	if got := b.text(t, "#outcome"); got != "completed" {
		t.Errorf("record outcome %q", got)
	}
	conv := b.text(t, "#conversation")
	for _, want := range []string{"HUMAN", "think one", "GPT", "Answer one."} {
		if !strings.Contains(conv, want) {
			t.Errorf("conversation lacks %q:\n%s", want, conv)
		}
	}
	if strings.Contains(conv, "okapi") {
		t.Errorf("the think block is open before it is clicked:\n%s", conv)
	}
	b.run(t, "expand think", chromedp.Click(chromedp.CSS("details.think summary")),
		chromedp.WaitVisible(chromedp.CSS("details.think[open] pre")))
	if got := b.text(t, "details.think pre"); got != "The okapi is related to the giraffe." {
		t.Errorf("think block %q", got)
	}
	screenshot(t, b, filepath.Join(arts, "record.png"))

	// Esc goes back to the list it came from.
	b.run(t, "escape", chromedp.KeyEvent("\x1b"), ready("#/?q=okapi"))

	for _, u := range b.urls() {
		if !strings.HasPrefix(u, url) {
			t.Errorf("the page requested %s, outside the viewer", u)
		}
	}
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}
	for _, f := range []string{"list.png", "record.png"} {
		if st, err := os.Stat(filepath.Join(arts, f)); err != nil || st.Size() < 10000 {
			t.Errorf("screenshot %s missing or blank: %v", f, err)
		}
	}
}

// TestReportOpensOffline opens `report`'s file in Chromium: it must render
// with no error and request nothing but itself.
func TestReportOpensOffline(t *testing.T) {
	b := newBrowser(t)
	dir := viewFolder(t)
	file := filepath.Join(t.TempDir(), "r.html")
	if code, _, errs := hp(t, "report", "-o", file, dir); code != 0 {
		t.Fatalf("report exit %d: %s", code, errs)
	}
	b.run(t, "open report", chromedp.Navigate("file://"+file), chromedp.WaitVisible(chromedp.CSS("#outcomes")))
	if got := b.text(t, "#outcomes"); !strings.Contains(got, "api_error") || !strings.Contains(got, "completed") {
		t.Errorf("outcomes table %q", got)
	}
	screenshot(t, b, filepath.Join(artifactDir(t), "report.png"))
	// The header: the model, the date, the settings given and the spend,
	// all in the first screen (the window is 900 pixels high).
	if got := b.text(t, "#run-model"); got != "m" {
		t.Errorf("model %q", got)
	}
	if got := b.text(t, "#run-date"); !regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d UTC`).MatchString(got) {
		t.Errorf("date %q", got)
	}
	if got := b.text(t, "#run-settings"); !strings.Contains(got, "--price-in 1") || !strings.Contains(got, "--max-retries 0") || strings.Contains(got, "--out") {
		t.Errorf("settings %q", got)
	}
	if got := b.text(t, "#spend-top"); !strings.HasPrefix(got, "$") {
		t.Errorf("spend card %q", got)
	}
	bottom, err := chromedp.Run(b.ctx, chromedp.Evaluate[float64](`Math.max(...["#run", "#spend-top"].map(s => document.querySelector(s).getBoundingClientRect().bottom))`))
	if err != nil || bottom <= 0 || bottom > 900 {
		t.Errorf("the header ends at %v px (%v), below the first screen", bottom, err)
	}
	for _, u := range b.urls() {
		if u != "file://"+file {
			t.Errorf("the report requested %s", u)
		}
	}
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}
}
