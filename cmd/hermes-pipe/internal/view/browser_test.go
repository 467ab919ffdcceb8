package view

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromium starts headless Chromium for a test and returns its context and
// a reader of the page's uncaught exceptions and console errors. Under CI a
// missing browser fails the test (.ci/run installs Debian's chromium),
// elsewhere it skips.
func chromium(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed; CI requires the browser tests (apt-get install chromium)")
		}
		t.Skip("chromium not installed")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	var mu sync.Mutex
	var errs []string
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			errs = append(errs, ev.ExceptionDetails.Text)
		case *runtime.EventConsoleAPICalled:
			if string(ev.Type) == "error" {
				errs = append(errs, "console.error")
			}
		}
	}))
	t.Cleanup(func() { cancel(); acancel() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser: no timeout on it
		t.Fatalf("start chromium: %v", err)
	}
	// A guard against a wedged browser, not a performance assertion.
	tctx, tcancel := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(tcancel)
	return tctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), errs...)
	}
}

// The page while the index is built: the list and its filters with the
// build's progress, a sort that says it waits for the index, a record;
// once the build is released, the page shows the list from the index by
// itself.
func TestPageWhileTheIndexIsBuilt(t *testing.T) {
	ctx, pageErrors := chromium(t)
	dir := retriedFolder(t)
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s, err := open([]string{dir}, filepath.Join(t.TempDir(), "cache"), dir, "", func(done int) {
		if done > 0 {
			once.Do(func() { close(held); <-release })
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	<-held

	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v (page errors: %v)", what, err, pageErrors())
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return s
	}
	rows := func() []string {
		t.Helper()
		r, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#records tbody tr")].map(r => r.innerText)`))
		if err != nil {
			t.Fatalf("read rows: %v", err)
		}
		return r
	}
	show := func(hash string) {
		t.Helper()
		run("show "+hash, chromedp.Evaluate[chromedp.Void](fmt.Sprintf("location.hash = %q", hash)),
			chromedp.WaitReady(chromedp.CSS(`body[data-ready="`+hash+`"]`)))
	}

	run("load", chromedp.Navigate(srv.URL+"/#/?outcome=api_error"), chromedp.WaitReady(chromedp.CSS(`body[data-ready="#/?outcome=api_error"]`)))
	if st := text("#status"); !strings.HasPrefix(st, "5 matching of 30 records · indexing ") {
		t.Errorf("status while building: %q", st)
	}
	if m := text("#meta"); !strings.Contains(m, "30 records") || !strings.Contains(m, "indexing") {
		t.Errorf("header while building: %q", m)
	}
	if r := rows(); len(r) != 5 {
		t.Errorf("rows while building: %q", r)
	}
	show("#/?sort=tokens")
	if st := text("#status"); !strings.Contains(st, "available once the index is built") {
		t.Errorf("a sort while building: %q", st)
	}
	i := -1
	for k := range 30 {
		if _, key, err := s.keyOf(context.Background(), k); err == nil && key == "kH" {
			i = k
		}
	}
	if i < 0 {
		t.Fatal("no record kH in the folder")
	}
	run("open a record", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = "#/r/%d"`, i)),
		chromedp.WaitVisible(chromedp.CSS("#conversation")))
	if c := text("#conversation"); !strings.Contains(c, "Capybara") {
		t.Errorf("record %d while building: %q", i, c)
	}

	show("#/?sort=tokens")
	close(release)
	run("the list from the index", chromedp.Poll[chromedp.Void](
		`document.querySelector("#status")?.textContent.startsWith("30 matching of 30 records") && !document.querySelector("#meta").textContent.includes("indexing")`,
		chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(0)))
	r := rows()
	if len(r) != 30 || !strings.Contains(r[0], "kB") || !strings.Contains(r[0], "101") {
		t.Errorf("rows sorted by tokens once built: %q", r)
	}
	if e := pageErrors(); len(e) > 0 {
		t.Errorf("page errors: %v", e)
	}
}
