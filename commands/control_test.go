package commands_test

import (
	"testing"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
)

func TestCreateSessionDedup(t *testing.T) {
	e := newEnv(t, commands.Options{})
	create := core.Command{Kind: core.CreateSession, Origin: "telegram", Actor: core.Actor{ID: "42"},
		Place: chat, Title: "new topic", PlatformID: "update-9"}
	first := e.handle(create)
	second := e.handle(create)
	if first.Duplicate || !second.Duplicate || second.Session != first.Session {
		t.Errorf("results %+v, %+v; want the redelivery to return the same session as a duplicate", first, second)
	}
	if n := len(e.sessions()); n != 1 {
		t.Errorf("%d sessions, want 1", n)
	}
	if got := ofKind(e.events(), core.EventSessionCreated); len(got) != 1 {
		t.Errorf("%d session-created events, want 1", len(got))
	}
	s := e.session(first.Session)
	if s.Title != "new topic" || s.Bindings["telegram"].Place != chat {
		t.Errorf("session %+v, want the title and a binding at the place", s)
	}

	other := create
	other.PlatformID = "update-10"
	if res := e.handle(other); res.Duplicate || res.Session == first.Session {
		t.Errorf("another update gave %+v, want a new session", res)
	}
	api := core.Command{Kind: core.CreateSession, Origin: core.OriginAPI, Title: "no platform id"}
	if a, b := e.handle(api), e.handle(api); a.Session == b.Session {
		t.Error("two API creations without a platform id gave the same session")
	}
}

func TestAgentCloseIsNoHumanInput(t *testing.T) {
	e := newEnv(t, commands.Options{})
	id := e.handle(core.Command{Kind: core.CreateSession, Origin: core.OriginMCP}).Session
	e.events()
	closed := e.handle(core.Command{Kind: core.Close, Origin: core.OriginMCP, Session: id})
	if closed.Message.Role != core.RoleSystem {
		t.Errorf("agent's close stored as %q, want system", closed.Message.Role)
	}
	evs := e.events()
	for _, ev := range evs {
		if ev.Human() {
			t.Errorf("agent's close published human input %+v", ev)
		}
	}
	if len(evs) != 1 || evs[0].Kind != core.EventSessionUpdated || evs[0].Status != core.StatusClosed {
		t.Errorf("events %+v, want only the closed status", evs)
	}
}
