package e2e

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/parley-chat/parley/adapters/web/webtest"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/platforms"
	"github.com/parley-chat/parley/cmd/parley/internal/serve"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
)

// TestBrowserTokenBoxServe is the token box against the daemon's own token
// check: parley serve with [http] token set, a phone-sized browser that
// knows no token, a wrong token refused, the right one let in, and the
// person's first message naming the untitled session they started.
func TestBrowserTokenBoxServe(t *testing.T) {
	t.Parallel()
	ctx, console := webtest.Browser(t)
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.HTTP.Token = "correct horse"
	m := servetest.Serve(t, &serve.Main{Config: cfg, Platforms: platforms.All()})

	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("browser: %v\nconsole: %v", err, console())
		}
	}
	waitJS := func(expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatalf("waiting for %s: %v\nconsole: %v", expr, err, console())
		}
	}

	do(chromedp.EmulateViewport(375, 812, chromedp.EmulatePortrait, chromedp.EmulateMobile),
		chromedp.Navigate("http://"+m.Addr()+"/"))
	waitJS(`!document.getElementById('token-box').hidden`)
	do(chromedp.SendKeys(chromedp.CSS("#token-input"), "wrong horse\n"))
	waitJS(`document.getElementById('token-error').textContent.includes('That token was refused')`)
	do(chromedp.Evaluate[chromedp.Void](`document.getElementById('token-input').value = ''`),
		chromedp.SendKeys(chromedp.CSS("#token-input"), "correct horse\n"))
	waitJS(`document.getElementById('token-box').hidden && document.getElementById('conn').dataset.state === 'live'`)

	// In: start an untitled session from the drawer and write in it.
	waitJS(`document.body.classList.contains('drawer-open') && document.getElementById('sidebar').getBoundingClientRect().left === 0`)
	do(chromedp.Click(chromedp.CSS("#new-button")))
	waitJS(`!document.body.classList.contains('drawer-open') && new URLSearchParams(location.hash.slice(1)).get('session')`)
	do(chromedp.WaitEnabled(chromedp.CSS("#input")),
		chromedp.SendKeys(chromedp.CSS("#input"), "Plan the v2 migration of the billing database"),
		chromedp.Click(chromedp.CSS("#send")))
	waitJS(`document.getElementById('session-title').textContent === 'Plan the v2 migration of the billing database'`)
	webtest.Screenshot(t, ctx, "parley-phone-after-token.png")
}
