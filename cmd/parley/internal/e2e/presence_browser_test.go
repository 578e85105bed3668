package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/adapters/web/webtest"
	"github.com/parley-chat/parley/mcp"
)

// TestBrowserPresenceAndExpiredQuestion: in a real Chromium, the page says
// "no agent connected" while nobody listens to the session, even when it is
// working on the person's message, and stops saying so when an agent
// subscribes; the agent's question that times out shows expired, its
// buttons off, the same after a reload.
func TestBrowserPresenceAndExpiredQuestion(t *testing.T) {
	t.Parallel()
	ctx, console := webtest.Browser(t)
	m := startMain(t)
	a := connectAgent(t, m.Addr())
	waitJS := func(expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatalf("waiting for %s: %v", expr, err)
		}
	}
	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
	}
	do(chromedp.Navigate("http://"+m.Addr()+"/"), chromedp.WaitVisible(chromedp.CSS("#new-button")))
	do(chromedp.SendKeys(chromedp.CSS("#new-title"), "Alone"), chromedp.Click(chromedp.CSS("#new-button")))
	do(chromedp.WaitEnabled(chromedp.CSS("#input")),
		chromedp.SendKeys(chromedp.CSS("#input"), "Hello?"), chromedp.Click(chromedp.CSS("#send")))
	waitJS(`document.querySelector('#timeline').innerText.includes('Hello?')`)
	waitJS(`document.querySelector('#session-meta').innerText.includes('no agent connected')`)

	sessions, err := m.Daemon().Store.Sessions(t.Context())
	if err != nil || len(sessions) != 1 {
		t.Fatalf("sessions %+v, %v", sessions, err)
	}
	id := sessions[0].ID
	sub, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Subscribe(sub, mcpgo.SubscribeRequest{Params: mcpgo.SubscribeParams{URI: mcp.SessionInboxURI(id)}}); err != nil {
		t.Fatal(err)
	}
	waitJS(`!document.querySelector('#session-meta').innerText.includes('no agent connected') &&
		document.querySelector('#session-meta').innerText.includes('agent is working')`)

	if text, isErr := a.try(t, "ui.ask", map[string]any{"session_id": string(id), "question": "Which branch?",
		"options": []string{"main", "next"}, "timeout_s": 1}); !isErr || !strings.Contains(text, "withdrawn") {
		t.Fatalf("ui.ask = %q", text)
	}
	expired := `(() => { const q = [...document.querySelectorAll('#timeline article.question')].find((e) => e.innerText.includes('Which branch?'));
		return !!q && q.innerText.includes('expired') && [...q.querySelectorAll('button')].every((b) => b.disabled); })()`
	waitJS(expired)
	do(chromedp.Reload())
	waitJS(expired)
	for _, msg := range console() {
		if msg.IsException() || msg.Type == chromedp.ConsoleError {
			t.Errorf("console: %s", strings.TrimSpace(msg.Text))
		}
	}
}
