package mcp

import (
	"testing"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
)

// session.create takes the agent to run the session with; session.get and
// session.list say it; an unknown name is refused with the names.
func TestSessionAgent(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{agents: []commands.Agent{{Name: core.DefaultAgent, Title: "Claude Code"}, {Name: "codex", Title: "Codex"}}})
	c := mustDial(t, st.url, connOptions{})
	var created struct {
		SessionID core.SessionID `json:"session_id"`
		Agent     string         `json:"agent"`
	}
	c.ok(t, "session.create", map[string]any{"title": "fix", "agent": "codex"}, &created)
	if created.Agent != "codex" {
		t.Fatalf("session.create = %+v", created)
	}
	var got sessionInfo
	c.ok(t, "session.get", map[string]any{"session_id": string(created.SessionID)}, &got)
	if got.ID != created.SessionID || got.Agent != "codex" || got.Title != "fix" {
		t.Fatalf("session.get = %+v", got)
	}
	var plain struct {
		SessionID core.SessionID `json:"session_id"`
		Agent     string         `json:"agent"`
	}
	c.ok(t, "session.create", map[string]any{"title": "plain"}, &plain)
	got = sessionInfo{}
	c.ok(t, "session.get", map[string]any{"session_id": string(plain.SessionID)}, &got)
	if plain.Agent != "" || got.Agent != "" {
		t.Fatalf("a session of the default agent: created %+v, got %+v", plain, got)
	}
	var list struct {
		Sessions []sessionInfo `json:"sessions"`
	}
	c.ok(t, "session.list", nil, &list)
	if len(list.Sessions) != 2 || list.Sessions[1].Agent != "codex" || list.Sessions[0].Agent != "" {
		t.Fatalf("session.list = %+v", list)
	}
	c.fails(t, "session.create", map[string]any{"agent": "gemini"}, `there is no agent "gemini"; the agents are: default, codex`)
	c.fails(t, "session.get", nil, "session.get needs session_id")

	// Bound, it reads its own session only.
	b := mustDial(t, st.url+"?session="+string(plain.SessionID), connOptions{})
	b.ok(t, "session.get", nil, &got)
	if got.ID != plain.SessionID {
		t.Fatalf("bound session.get = %+v", got)
	}
	b.fails(t, "session.get", map[string]any{"session_id": string(created.SessionID)}, "acts on that session only")
}
