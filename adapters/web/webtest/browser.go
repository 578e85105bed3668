// Package webtest drives parley's web page in a real headless Chromium for
// tests, through the Chrome DevTools Protocol (chromedp). It finds Debian's
// chromium (or $PARLEY_CHROMIUM), starts it with the flags this machine's
// closed network needs and a fresh profile, collects console messages, and
// saves screenshots for reviewers.
package webtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium returns the browser's path. Without one it skips the test, or
// fails it when $CI is set or under make test (PARLEY_TEST_DEPS=required),
// which must exercise the browser.
func Chromium(tb testing.TB) string {
	tb.Helper()
	for _, p := range []string{os.Getenv("PARLEY_CHROMIUM"), "/usr/bin/chromium", "chromium"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") != "" || os.Getenv("PARLEY_TEST_DEPS") == "required" {
		tb.Fatal("chromium is not installed (apt-get install -y chromium)")
	}
	tb.Skip("chromium is not installed (apt-get install -y chromium); skipping the browser test")
	return ""
}

// Browser starts a headless Chromium with a fresh profile and returns a tab
// (valid for 90 s) and a function returning what its pages wrote to the
// console so far. Everything is stopped when the test ends.
func Browser(tb testing.TB) (context.Context, func() []chromedp.ConsoleMessage) {
	tb.Helper()
	path := Chromium(tb)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(tb.TempDir()),
		chromedp.WindowSize(1280, 1080),
	)
	tab, cancelTab := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(tab, 90*time.Second)
	tb.Cleanup(func() { cancelTimeout(); cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		tb.Fatalf("start %s: %v", path, err)
	}
	var (
		mu   sync.Mutex
		msgs []chromedp.ConsoleMessage
	)
	console := chromedp.Console(ctx)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			mu.Lock()
			msgs = append(msgs, m)
			mu.Unlock()
		}
	}()
	return ctx, func() []chromedp.ConsoleMessage {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(msgs)
	}
}

// Screenshot saves a full-page PNG named name in $PARLEY_SCREENSHOT_DIR (or
// the test's temporary directory) and returns its path.
func Screenshot(tb testing.TB, ctx context.Context, name string) string {
	tb.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("PARLEY_SCREENSHOT_DIR")
	if dir == "" {
		dir = tb.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("screenshot: %s", path)
	return path
}

// TimelineJS evaluates to the page's rendered timeline items as
// "id | text", for comparing what a person sees.
const TimelineJS = `Array.from(document.querySelectorAll('#timeline .item')).map(e => e.dataset.id + ' | ' + e.innerText.trim())`
