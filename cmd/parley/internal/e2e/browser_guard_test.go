package e2e

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/parley-chat/parley/adapters/web/webtest"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/core"
)

// TestBrowserPageThroughGuard: the page's own requests pass the guard
// (adapters/web/httpguard) in a real browser, which sends Origin and
// Sec-Fetch-Site on them: creating a session, sending a message, renaming
// and archiving it (a POST without a body), with a token set and the page
// opened as localhost.
func TestBrowserPageThroughGuard(t *testing.T) {
	t.Parallel()
	const token = "0123456789abcdef0123456789abcdef"
	ctx, console := webtest.Browser(t)
	m := startMainWith(t, func(c *config.Config) { c.HTTP.Token = token })
	_, port, _ := net.SplitHostPort(m.Addr())
	base := "http://localhost:" + port
	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
	}
	waitJS := func(expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatalf("waiting for %s: %v", expr, err)
		}
	}
	do(chromedp.Navigate(base+"/#token="+token), chromedp.WaitVisible(chromedp.CSS("#new-button")))
	do(chromedp.SendKeys(chromedp.CSS("#new-title"), "Guarded"), chromedp.Click(chromedp.CSS("#new-button")))
	do(chromedp.WaitEnabled(chromedp.CSS("#input")),
		chromedp.SendKeys(chromedp.CSS("#input"), "hello through the guard"),
		chromedp.Click(chromedp.CSS("#send")))
	waitJS(`document.querySelector('#timeline').innerText.includes('hello through the guard')`)
	do(chromedp.Click(chromedp.CSS("#archive")))
	waitJS(`!document.getElementById('archive-confirm').hidden`)
	do(chromedp.Click(chromedp.CSS("#archive-yes")))
	// The page lists the session as archived once the POST was answered,
	// and the answer comes after the store closed the session.
	waitJS(`document.getElementById('archived-count').textContent === '(1)'`)
	list, err := m.Daemon().Store.Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Status != core.StatusClosed {
		t.Fatalf("the page's archive did not close the session: %+v", list)
	}
	for _, msg := range console() {
		if msg.IsException() || msg.Type == chromedp.ConsoleError {
			t.Errorf("console: %s", msg.Text)
		}
	}
}
