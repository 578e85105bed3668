package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/core"
)

// TestAgentCredential: a connection with an agent's credential is bound to
// its session, whatever session_id it passes, sees and calls only the
// tools agents parley runs may (posting the agent's messages, asking,
// reading, renaming), and is refused the orchestrator's and people's.
func TestAgentCredential(t *testing.T) {
	for _, modern := range []bool{false, true} {
		t.Run(map[bool]string{false: "2025-11-25", true: "2026-07-28"}[modern], func(t *testing.T) {
			st := newStack(t, t.TempDir(), stackOptions{})
			mine, other := st.createSession("mine"), st.createSession("other")
			c := mustDial(t, st.url, connOptions{modern: modern, headers: map[string]string{AgentTokenHeader: st.srv.AgentToken(mine)}})

			res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range res.Tools {
				names = append(names, tool.Name)
			}
			slices.Sort(names)
			// Each once, by the name model APIs accept.
			want := []string{"chat_assistant_post", "chat_read_since", "session_get", "session_list", "session_rename", "ui_ask"}
			if !slices.Equal(names, want) {
				t.Fatalf("tools %q, want %q", names, want)
			}

			var posted postResult
			c.ok(t, "chat_assistant_post", map[string]any{"content": "from the agent"}, &posted)
			if posted.SessionID != mine {
				t.Fatalf("posted to %s, want the credential's session %s", posted.SessionID, mine)
			}
			c.ok(t, "session_rename", map[string]any{"title": "Renamed by the agent"}, nil)
			if s, _ := st.store.Session(context.Background(), mine); s.Title != "Renamed by the agent" {
				t.Fatalf("title %q", s.Title)
			}
			c.fails(t, "chat_assistant_post", map[string]any{"content": "elsewhere", "session_id": string(other)}, "acts on that session only")
			var list struct {
				Sessions []sessionInfo `json:"sessions"`
			}
			c.ok(t, "session_list", nil, &list)
			if len(list.Sessions) != 1 || list.Sessions[0].ID != mine {
				t.Fatalf("session.list %+v", list)
			}
			for _, tool := range []string{"chat.human.post", "chat_human_post", "agent.state", "loop.yield_turn", "session.output",
				"ui.tool_call", "ui.request_approval", "session.close", "session.create"} {
				_, err := c.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool,
					Arguments: map[string]any{"content": "x", "key": "claude-code", "value": "{}", "call_id": "c", "tool": "t", "title": "t"}}})
				if err == nil || !strings.Contains(err.Error(), "not found") {
					t.Errorf("%s: %v, want it not found", tool, err)
				}
			}
			if msgs, _ := st.store.Inbox(context.Background(), mine, "", 0); len(msgs) != 1 {
				t.Fatalf("inbox %+v", msgs)
			}
		})
	}
}

// TestAgentCredentialRefused: a credential names its session and no other
// — a URL or header naming another is refused, as is a credential forged
// for another session or made by another parley; a request without it is
// what it was.
func TestAgentCredentialRefused(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	mine, other := st.createSession("mine"), st.createSession("other")
	tok := st.srv.AgentToken(mine)
	_, mac, _ := strings.Cut(tok, ".")
	elsewhere := newStack(t, t.TempDir(), stackOptions{})
	for name, o := range map[string]connOptions{
		"another session by URL":    {query: "session=" + string(other), headers: map[string]string{AgentTokenHeader: tok}},
		"another session by header": {headers: map[string]string{AgentTokenHeader: tok, SessionHeader: string(other)}},
		"forged for another":        {headers: map[string]string{AgentTokenHeader: string(other) + "." + mac}},
		"of another parley":         {headers: map[string]string{AgentTokenHeader: elsewhere.srv.AgentToken(mine)}},
		"not one":                   {headers: map[string]string{AgentTokenHeader: "garbage"}},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := dial(t, st.url, o)
			t.Log(err)
			if err == nil {
				var posted postResult
				_, ok := c.call(t, "chat.assistant.post", map[string]any{"content": "x"})
				t.Fatalf("connected and posted (%v): %+v", ok, posted)
			}
		})
	}
	// The same session by URL is the same binding.
	c := mustDial(t, st.url, connOptions{query: "session=" + string(mine), headers: map[string]string{AgentTokenHeader: tok}})
	c.ok(t, "session_get", nil, nil)

	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	if st.srv.AgentAuthorized(r) {
		t.Fatal("a request without a credential is authorized")
	}
	r.Header.Set(AgentTokenHeader, tok)
	if !st.srv.AgentAuthorized(r) {
		t.Fatal("a request with its credential is not authorized")
	}
	r.Header.Set(AgentTokenHeader, string(other)+"."+mac)
	if st.srv.AgentAuthorized(r) {
		t.Fatal("a forged credential is authorized")
	}
	if id, ok := st.srv.agentTokenSession(tok); !ok || id != mine || !core.ValidID(string(id)) {
		t.Fatalf("credential of %s", id)
	}
}

// TestProxyAgentToken: `parley mcp --session ID` run by an agent sends
// its credential (PARLEY_SESSION_TOKEN) instead of the [http] token: the
// connection is its session's, with an agent's tools.
func TestProxyAgentToken(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	mine := st.createSession("mine")
	var sawBearer atomic.Bool
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			sawBearer.Store(true)
		}
		if !st.srv.AgentAuthorized(r) {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		st.srv.Handler().ServeHTTP(w, r)
	}))
	defer front.Close()
	c, _ := proxied(t, ProxyOptions{URL: front.URL, Token: "the-http-token", Session: string(mine), AgentToken: st.srv.AgentToken(mine)}, false)
	tools, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != len(agentTools) {
		t.Fatalf("%d tools through the proxy, want an agent's %d", len(tools.Tools), len(agentTools))
	}
	var posted postResult
	c.ok(t, "chat_assistant_post", map[string]any{"content": "over stdio"}, &posted)
	if posted.SessionID != mine {
		t.Fatalf("posted to %s", posted.SessionID)
	}
	if sawBearer.Load() {
		t.Fatal("the proxy sent the [http] token along with the agent's credential")
	}
}
