package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/parley-chat/parley/adapters/web/webtest"
)

// TestBrowserToolGroups: the page shows each tool call the agent reports
// as a ToolGroup — tool, command, running or exit code, the decision on
// its approval (made through the page's answer endpoint) — the failed call
// opened on its output; a reload shows the same, and a call that ends
// while the page is open changes live.
func TestBrowserToolGroups(t *testing.T) {
	t.Parallel()
	ctx, console := webtest.Browser(t)
	m := startMain(t)
	base := "http://" + m.Addr()
	a := connectAgent(t, m.Addr())
	var created struct {
		SessionID string `json:"session_id"`
	}
	a.call(t, "session.create", map[string]any{"title": "Tools"}, &created)
	session := created.SessionID
	call := func(tool string, args map[string]any) {
		t.Helper()
		args["session_id"] = session
		a.call(t, tool, args, nil)
	}
	call("ui.tool_call", map[string]any{"call_id": "c1", "tool": "shell", "cmd": "make"})
	call("ui.tool_output", map[string]any{"call_id": "c1", "stdout": "built ok", "exit_code": 0})
	call("ui.tool_call", map[string]any{"call_id": "c2", "tool": "shell", "cmd": "go test ./..."})
	call("ui.tool_output", map[string]any{"call_id": "c2", "stderr": "FAIL TestRetry", "exit_code": 1})

	decided := make(chan approvalDecision, 1)
	go func() {
		var d approvalDecision
		d.err = a.callErr(blockingCall, "ui.request_approval", map[string]any{"session_id": session, "call_id": "c3", "tool": "shell", "cmd": "rm -rf build"}, &d)
		decided <- d
	}()
	var qid string
	deadline := time.Now().Add(30 * time.Second)
	for qid == "" {
		for _, q := range sessionQuestions(t, base, session) {
			qid = q
		}
		if time.Now().After(deadline) {
			t.Fatal("the approval question was not asked")
		}
		select {
		case <-time.After(20 * time.Millisecond): // polling the API for the question
		case d := <-decided:
			t.Fatalf("ui.request_approval returned %+v before anyone answered", d)
		}
	}
	body, _ := json.Marshal(map[string]any{"question_id": qid, "option": 1})
	resp, err := http.Post(base+"/api/sessions/"+session+"/answer", "application/json", bytes.NewReader(body))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("answer from the page: %v %v", err, resp)
	}
	resp.Body.Close()
	if d := <-decided; d.err != nil || d.Decision != "approve" {
		t.Fatalf("ui.request_approval = %+v", d)
	}
	call("ui.tool_call", map[string]any{"call_id": "c4", "tool": "deploy"})

	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#session="+session)); err != nil {
		t.Fatal(err)
	}
	waitJS := func(expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatalf("waiting for %s: %v", expr, err)
		}
	}
	groups := func() []string {
		t.Helper()
		out, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
			`Array.from(document.querySelectorAll('#timeline details.toolgroup')).map(d => (d.open ? 'open: ' : '') + d.innerText.trim().replace(/\s+/g, ' '))`))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	waitJS(`document.querySelectorAll('#timeline details.toolgroup').length === 4`)
	want := []string{
		"✓ shell make exit 0",
		"open: ✗ shell go test ./... exit 1 stderr FAIL TestRetry",
		"• shell rm -rf build running approved by You",
		"• deploy running",
	}
	before := groups()
	if !slices.Equal(before, want) {
		t.Fatalf("the page shows tool groups\n%q, want\n%q", before, want)
	}
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitJS(`document.querySelectorAll('#timeline details.toolgroup').length === 4`)
	if after := groups(); !slices.Equal(before, after) {
		t.Errorf("tool groups changed across a reload:\nbefore %q\nafter  %q", before, after)
	}
	// Live: the running call ends while the page is open.
	call("ui.tool_output", map[string]any{"call_id": "c4", "stdout": "deployed", "exit_code": 0})
	waitJS(`Array.from(document.querySelectorAll('#timeline details.toolgroup.ok')).some(d => d.innerText.includes('deploy'))`)
	if got := groups(); got[3] != "✓ deploy exit 0" {
		t.Errorf("the ended call shows %q", got[3])
	}
	webtest.Screenshot(t, ctx, "parley-tool-groups.png")
	for _, msg := range console() {
		if msg.IsException() || msg.Type == chromedp.ConsoleError {
			t.Errorf("console: %s", strings.TrimSpace(msg.Text))
		}
	}
}

// sessionQuestions returns the ids of the session's open questions, as
// the HTTP API lists them.
func sessionQuestions(t *testing.T, base, session string) []string {
	t.Helper()
	resp, err := http.Get(base + "/api/sessions?limit=100")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Sessions []struct {
			ID        string `json:"id"`
			Questions []struct {
				ID string `json:"id"`
			} `json:"questions"`
		} `json:"sessions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range page.Sessions {
		if s.ID == session {
			for _, q := range s.Questions {
				out = append(out, q.ID)
			}
		}
	}
	return out
}
