package web_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/parley-chat/parley/adapters/web/webtest"
	"github.com/parley-chat/parley/core"
)

// The page lists the newest page of sessions and loads older ones on
// request, keeping them across a refresh of the list.
func TestBrowserOlderSessions(t *testing.T) {
	s := newStack(t)
	for i := range core.DefaultSessionPage + 5 {
		if _, _, err := s.store.CreateSession(context.Background(), core.Session{Title: fmt.Sprint("session ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, console := webtest.Browser(t)
	poll := func(expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatalf("waiting for %s: %v\nconsole: %v", expr, err, console())
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(s.srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	poll(`document.querySelectorAll('#sessions .session').length === 100 && !!document.querySelector('#sessions .more')`)
	poll(`document.querySelector('#sessions .session .title').textContent === 'session 104'`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#sessions .more"))); err != nil {
		t.Fatal(err)
	}
	poll(`document.querySelectorAll('#sessions .session').length === 105 && !document.querySelector('#sessions .more')`)
	// A new session refreshes the list: the older page stays shown.
	s.newSession("newest")
	poll(`document.querySelectorAll('#sessions .session').length === 106`)
}
