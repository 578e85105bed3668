package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/parley-chat/parley/adapters/web/webtest"
	"github.com/parley-chat/parley/cmd/parley/internal/serve"
)

// startMain runs the daemon in-process on a free loopback port.
func startMain(t *testing.T) *serve.Main { return startMainWith(t, nil) }

// TestBrowserPersonAndMCPAgent is the whole product in one test: a person
// uses the web page in a real Chromium, an agent connected over MCP is
// notified, reads the message and answers with a message and streamed
// output, the page shows both live, and a reload shows the same timeline.
func TestBrowserPersonAndMCPAgent(t *testing.T) {
	t.Parallel()
	ctx, console := webtest.Browser(t)
	m := startMain(t)
	base := "http://" + m.Addr()
	a := subscribedAgent(t, m.Addr())

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
	timeline := func() []string {
		t.Helper()
		items, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](webtest.TimelineJS))
		if err != nil {
			t.Fatal(err)
		}
		return items
	}

	do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#new-button")))
	do(chromedp.SendKeys(chromedp.CSS("#new-title"), "Release checklist"), chromedp.Click(chromedp.CSS("#new-button")))
	do(chromedp.WaitEnabled(chromedp.CSS("#input")),
		chromedp.SendKeys(chromedp.CSS("#input"), "What is left before the release?"),
		chromedp.Click(chromedp.CSS("#send")))

	// The agent hears about it over MCP and reads it.
	select {
	case <-a.notes:
	case <-time.After(15 * time.Second):
		t.Fatal("the agent was not notified of the person's message")
	}
	var read readResult
	a.call(t, "chat_read_since", map[string]any{}, &read)
	if len(read.Messages) != 1 || read.Messages[0].Content != "What is left before the release?" {
		t.Fatalf("agent read %+v", read.Messages)
	}
	session := read.Messages[0].SessionID
	a.call(t, "chat.assistant.post", map[string]any{"session_id": session,
		"content": "Two things:\n\n- bump the **version**\n- write the `CHANGELOG`"}, nil)
	for _, text := range []string{"Checking the tags…", "Checking the tags… done.", "Checking the tags… done.\nAll green: ready to tag `v1.0.0`."} {
		a.call(t, "session.output", map[string]any{"session_id": session, "content": text}, nil)
	}
	a.call(t, "loop.yield_turn", map[string]any{"session_id": session}, nil)

	waitJS(`document.querySelector('#timeline').innerText.includes('write the CHANGELOG')`)
	waitJS(`document.querySelector('#timeline').innerText.includes('ready to tag v1.0.0')`)
	before := timeline()
	webtest.Screenshot(t, ctx, "parley-person-and-agent.png")

	do(chromedp.Reload())
	waitJS(`document.querySelector('#timeline').innerText.includes('ready to tag v1.0.0')`)
	if after := timeline(); !slices.Equal(before, after) {
		t.Errorf("timeline changed across a reload:\nbefore %q\nafter  %q", before, after)
	}
	for _, msg := range console() {
		if msg.IsException() || msg.Type == chromedp.ConsoleError {
			t.Errorf("console: %s", strings.TrimSpace(msg.Text))
		}
	}
}
