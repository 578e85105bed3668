package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/parley-chat/parley/adapters/web"
	"github.com/parley-chat/parley/adapters/web/webtest"
	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
)

// The page's new-session form offers the agents parley runs (GET
// /api/agents/run); POST /api/sessions takes the agent, the session's
// view says it, and an unknown one is refused naming the agents.
func TestSessionAgentAPI(t *testing.T) {
	s := newStack(t, func(o *stackOptions) {
		o.agents = []commands.Agent{{Name: core.DefaultAgent, Title: "Claude Code"}, {Name: "codex", Title: "Codex"}}
		o.web.Agents = []web.Agent{{Name: "default", Title: "Claude Code"}, {Name: "codex", Title: "Codex"}}
	})
	run := must[struct {
		Agents []web.Agent `json:"agents"`
	}](t, http.StatusOK)(s.get("/api/agents/run"))
	if len(run.Agents) != 2 || run.Agents[1] != (web.Agent{Name: "codex", Title: "Codex"}) {
		t.Fatalf("agents %+v", run.Agents)
	}
	type view struct {
		ID    core.SessionID `json:"id"`
		Agent string         `json:"agent"`
	}
	made := must[view](t, http.StatusCreated)(s.post("/api/sessions", `{"title":"fix","agent":"codex"}`))
	if made.Agent != "codex" {
		t.Fatalf("created %+v", made)
	}
	if got, err := s.store.Session(t.Context(), made.ID); err != nil || got.Agent != "codex" {
		t.Fatalf("stored %+v %v", got, err)
	}
	list := must[struct {
		Sessions []view `json:"sessions"`
	}](t, http.StatusOK)(s.get("/api/sessions"))
	if len(list.Sessions) != 1 || list.Sessions[0].Agent != "codex" {
		t.Fatalf("list %+v", list)
	}
	status, body := s.post("/api/sessions", `{"agent":"gemini"}`)
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	if status != http.StatusBadRequest || !strings.Contains(e.Error, `there is no agent "gemini"; the agents are: default, codex`) {
		t.Fatalf("unknown agent: %d %s", status, body)
	}

	none := newStack(t)
	if got := must[map[string][]web.Agent](t, http.StatusOK)(none.get("/api/agents/run")); got["agents"] == nil || len(got["agents"]) != 0 {
		t.Fatalf("without agents: %+v", got)
	}
}

// The page offers the agents parley runs in its new-session form, makes
// the session with the one chosen, and names the session's agent in its
// header; with one agent it offers no choice.
func TestBrowserSessionAgent(t *testing.T) {
	s := newStack(t, func(o *stackOptions) {
		o.agents = []commands.Agent{{Name: core.DefaultAgent, Title: "Claude Code"}, {Name: "codex", Title: "Codex"}}
		o.web.Agents = []web.Agent{{Name: "default", Title: "Claude Code"}, {Name: "codex", Title: "Codex"}}
	})
	ctx, console := webtest.Browser(t)
	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("browser: %v\nconsole: %v", err, console())
		}
	}
	poll := func(expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatalf("waiting for %s: %v\nconsole: %v", expr, err, console())
		}
	}
	run(chromedp.Navigate(s.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#new-session")))
	poll(`!document.getElementById('new-agent').hidden && document.getElementById('new-agent').options.length === 2`)
	poll(`document.getElementById('new-agent').options[1].textContent === 'codex (Codex)'`)
	run(chromedp.SetValue(chromedp.CSS("#new-agent"), "codex"),
		chromedp.SendKeys(chromedp.CSS("#new-title"), "Fix the build"),
		chromedp.Click(chromedp.CSS("#new-button")))
	poll(`document.getElementById('session-title').textContent === 'Fix the build'`)
	poll(`[...document.querySelectorAll('#session-meta .agent')].some((e) => e.textContent === 'agent: codex (Codex)')`)
	ss, err := s.store.Sessions(t.Context())
	if err != nil || len(ss) != 1 || ss[0].Agent != "codex" {
		t.Fatalf("sessions %+v %v", ss, err)
	}
}
