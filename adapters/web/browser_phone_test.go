package web_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/parley-chat/parley/adapters/web/webtest"
	"github.com/parley-chat/parley/core"
)

// tab is a browser tab for one test, with the helpers its steps share.
type tab struct {
	t       *testing.T
	ctx     context.Context
	console func() []chromedp.ConsoleMessage
}

func newTab(t *testing.T) *tab {
	ctx, console := webtest.Browser(t)
	return &tab{t: t, ctx: ctx, console: console}
}

// phone makes the tab a 375×812 portrait phone screen.
func (b *tab) phone() {
	b.t.Helper()
	b.do(chromedp.EmulateViewport(375, 812, chromedp.EmulatePortrait, chromedp.EmulateMobile, chromedp.EmulateTouch))
}

func (b *tab) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v\nconsole: %v", err, b.console())
	}
}

// poll waits until the JavaScript expression expr is true.
func (b *tab) poll(expr string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		b.t.Fatalf("waiting for %s: %v\nconsole: %v", expr, err, b.console())
	}
}

func (b *tab) str(expr string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// noConsoleErrors fails the test on an exception or console error.
func (b *tab) noConsoleErrors(allowed ...string) {
	b.t.Helper()
next:
	for _, m := range b.console() {
		if !m.IsException() && m.Type != chromedp.ConsoleError {
			continue
		}
		for _, a := range allowed {
			if strings.Contains(m.Text, a) {
				continue next
			}
		}
		b.t.Errorf("console %s: %s (%s:%d)", m.Type, m.Text, m.URL, m.Line+1)
	}
}

// fitsJS is true when nothing of the page reaches past the screen's width:
// no horizontal scrolling, and every visible element of the main column
// inside the screen.
const fitsJS = `(() => {
	const w = window.innerWidth;
	if (document.documentElement.scrollWidth > w || document.body.scrollWidth > w) return 'scrolls: ' + document.documentElement.scrollWidth + ' > ' + w;
	for (const e of document.querySelectorAll('#main *')) {
		const r = e.getBoundingClientRect();
		if (r.width === 0 || e.closest('pre')) continue; // code blocks scroll inside themselves
		if (r.left < -0.5 || r.right > w + 0.5) return (e.id || e.className || e.tagName) + ' spans ' + r.left + '..' + r.right;
	}
	return '';
})()`

// drawerOpenJS is true once the drawer has slid fully in.
const drawerOpenJS = `(document.body.classList.contains('drawer-open') && document.getElementById('sidebar').getBoundingClientRect().left === 0)`

// At phone width the session list is a drawer over the page, the selected
// session fills the screen without horizontal scrolling, and rename and
// archive work from the header: the whole of a person's phone session.
func TestBrowserPhone(t *testing.T) {
	s := newStack(t)
	b := newTab(t)
	b.phone()

	// An untitled session named by its first message, a titled one, and
	// one archived already.
	untitled := must[sessionJSON](t, 201)(s.post("/api/sessions", ``)).ID
	s.chat(untitled, "Why does the deploy to staging hang at the migration step since Tuesday's release?\nLogs attached.")
	long := "A reply with a long unbreakable line: " + strings.Repeat("abcdefghij", 12) +
		"\n\n```sh\nkubectl -n staging logs deploy/api --since=2h | grep -i 'migration lock' | tail -n 50\n```\n\n" +
		"- the lock is held by a pod that was evicted\n- see https://example.com/" + strings.Repeat("very-long-path-", 8)
	s.handle(core.Command{Kind: core.AssistantPost, Session: untitled, Origin: core.OriginMCP, Text: long})
	s.handle(core.Command{Kind: core.OutputUpdate, Session: untitled, Origin: core.OriginMCP, Text: "Checking the lock table…"})
	s.newSession("Release checklist")
	old := s.newSession("Old incident")
	s.handle(core.Command{Kind: core.Close, Session: old, Origin: core.OriginAPI})

	// No session chosen: the list opens as a drawer, archived ones hidden.
	b.do(chromedp.Navigate(s.srv.URL + "/"))
	b.poll(`document.getElementById('conn').dataset.state === 'live'`)
	b.poll(drawerOpenJS + ` && document.querySelectorAll('#sessions .session').length === 2`)
	if got := b.str(`Array.from(document.querySelectorAll('#sessions .session .title')).map(e => e.textContent).sort().join(' | ')`); got != "Release checklist | Why does the deploy to staging hang at the migration step…" {
		t.Fatalf("drawer lists %q", got)
	}
	if got := b.str(`document.getElementById('archived-count').textContent`); got != "(1)" {
		t.Fatalf("archived count %q", got)
	}
	if msg := b.str(fitsJS); msg != "" {
		t.Fatalf("with the drawer open: %s", msg)
	}
	webtest.Screenshot(t, b.ctx, "web-phone-drawer.png")

	// Choosing one closes the drawer; the session fills the screen.
	b.do(chromedp.Click(chromedp.CSS(`#sessions .session[data-id="` + string(untitled) + `"]`)))
	b.poll(`!document.body.classList.contains('drawer-open') && document.getElementById('sidebar').getBoundingClientRect().right <= 0`)
	b.poll(`document.querySelectorAll('#timeline .item').length === 3`)
	b.poll(`document.getElementById('session-title').textContent.startsWith('Why does the deploy')`)
	b.do(chromedp.WaitEnabled(chromedp.CSS("#input")),
		chromedp.SendKeys(chromedp.CSS("#input"), "Thanks, I will restart the pod."),
		chromedp.Click(chromedp.CSS("#send")))
	b.poll(`document.querySelectorAll('#timeline .item.user').length === 2`)
	if msg := b.str(fitsJS); msg != "" {
		t.Fatalf("the session at phone width: %s", msg)
	}
	if got := b.str(`(() => { const r = document.getElementById('send').getBoundingClientRect(); return r.right <= innerWidth && r.bottom <= innerHeight ? '' : 'send at ' + r.right + ',' + r.bottom; })()`); got != "" {
		t.Fatalf("the send button is off screen: %s", got)
	}
	webtest.Screenshot(t, b.ctx, "web-phone.png")

	// Rename from the header.
	b.do(chromedp.Click(chromedp.CSS("#rename")))
	b.poll(`!document.getElementById('rename-form').hidden && document.activeElement.id === 'rename-input'`)
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('rename-input').value = ''`),
		chromedp.SendKeys(chromedp.CSS("#rename-input"), "Staging deploy hangs\n"))
	b.poll(`document.getElementById('rename-form').hidden && document.getElementById('session-title').textContent === 'Staging deploy hangs'`)
	if sess, err := s.store.Session(context.Background(), untitled); err != nil || sess.Title != "Staging deploy hangs" {
		t.Fatalf("after renaming: %+v, %v", sess, err)
	}

	// Archive, confirmed: closed, gone from the list, back with the toggle.
	b.do(chromedp.Click(chromedp.CSS("#archive")))
	b.poll(`!document.getElementById('archive-confirm').hidden`)
	b.do(chromedp.Click(chromedp.CSS("#archive-yes")))
	b.poll(`!new URLSearchParams(location.hash.slice(1)).get('session') && ` + drawerOpenJS)
	b.poll(`document.querySelectorAll('#sessions .session').length === 1 && document.getElementById('archived-count').textContent === '(2)'`)
	if sess, err := s.store.Session(context.Background(), untitled); err != nil || sess.Status != core.StatusClosed {
		t.Fatalf("after archiving: %+v, %v", sess, err)
	}
	b.do(chromedp.Click(chromedp.CSS("#show-archived")))
	b.poll(`document.querySelectorAll('#sessions .session.archived').length === 2 && document.querySelectorAll('#sessions .session').length === 3`)
	b.noConsoleErrors()
}

// With a token configured and none known, the page asks for it in a box,
// refuses a wrong one in plain words without keeping it, and with the right
// one loads the sessions and the live stream, remembering it. A kept token
// the daemon no longer accepts brings the box back, saying so.
func TestBrowserTokenBox(t *testing.T) {
	s := newStack(t)
	srv := httptest.NewServer(guarded("s3cret", s.web.Handler()))
	t.Cleanup(srv.Close)
	s.newSession("guarded")
	b := newTab(t)
	b.phone()

	b.do(chromedp.Navigate(srv.URL + "/"))
	b.poll(`!document.getElementById('token-box').hidden && document.getElementById('token-error').hidden && document.activeElement.id === 'token-input'`)
	if got := b.str(`document.getElementById('token-input').type`); got != "password" {
		t.Fatalf("the token field is of type %q", got)
	}
	if got := b.str(`document.getElementById('banner').hidden ? '' : document.getElementById('banner').textContent`); got != "" {
		t.Fatalf("a banner shows besides the box: %q", got)
	}
	if msg := b.str(fitsJS); msg != "" {
		t.Fatalf("the token box at phone width: %s", msg)
	}
	webtest.Screenshot(t, b.ctx, "web-token-box.png")

	b.do(chromedp.SendKeys(chromedp.CSS("#token-input"), "wrong\n"))
	b.poll(`!document.getElementById('token-error').hidden && document.getElementById('token-error').textContent.includes('That token was refused')`)
	if got := b.str(`localStorage.getItem('parley.token') || ''`); got != "" {
		t.Fatalf("a refused token was kept: %q", got)
	}
	webtest.Screenshot(t, b.ctx, "web-token-refused.png")

	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('token-input').value = ''`),
		chromedp.SendKeys(chromedp.CSS("#token-input"), "s3cret\n"))
	b.poll(`document.getElementById('token-box').hidden`)
	b.poll(`document.getElementById('conn').dataset.state === 'live'`)
	b.poll(`document.querySelectorAll('#sessions .session').length === 1`)
	if got := b.str(`localStorage.getItem('parley.token') || ''`); got != "s3cret" {
		t.Fatalf("kept token %q", got)
	}

	// Remembered: a new visit goes straight in, and the stream is live.
	b.do(chromedp.Reload())
	b.poll(`document.getElementById('conn').dataset.state === 'live' && document.querySelectorAll('#sessions .session').length === 1`)
	if got := b.str(`document.getElementById('token-box').hidden ? '' : 'shown'`); got != "" {
		t.Fatal("the token box came back with a good token kept")
	}

	// The token changed in the configuration: the kept one is refused.
	b.do(chromedp.Evaluate[chromedp.Void](`localStorage.setItem('parley.token', 'rotated-away')`), chromedp.Reload())
	b.poll(`!document.getElementById('token-box').hidden && document.getElementById('token-error').textContent.includes('kept was refused')`)
	b.do(chromedp.SendKeys(chromedp.CSS("#token-input"), "s3cret\n"))
	b.poll(`document.getElementById('token-box').hidden && document.getElementById('conn').dataset.state === 'live'`)
	// The browser logs each refused request (401) as a console error.
	b.noConsoleErrors("401")
}
