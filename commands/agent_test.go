package commands_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

var agents = []commands.Agent{{Name: core.DefaultAgent, Title: "Claude Code"}, {Name: "codex", Title: "Codex"}, {Name: "oc", Title: "OpenCode"}}

// refused runs cmd and returns the words people are told of its refusal,
// failing unless it was refused as invalid.
func (e *env) refused(cmd core.Command) string {
	e.tb.Helper()
	_, err := e.svc.Handle(context.Background(), cmd)
	if !errors.Is(err, core.ErrInvalid) {
		e.tb.Fatalf("%s %q: %v, want it refused as invalid", cmd.Kind, cmd.Agent, err)
	}
	msg, _ := delivery.UserMessage(err)
	return msg
}

// A session is made with the agent its creator names; the default one by
// name or by none; an unknown name is refused, naming the agents, and
// makes no session.
func TestCreateWithAgent(t *testing.T) {
	e := newEnv(t, commands.Options{Agents: agents})
	for name, want := range map[string]string{"codex": "codex", "": "", "default": "", " oc ": "oc"} {
		id := e.handle(core.Command{Kind: core.CreateSession, Origin: core.OriginAPI, Agent: name}).Session
		if got := e.session(id).Agent; got != want {
			t.Errorf("created with agent %q: the session's agent is %q, want %q", name, got, want)
		}
	}
	n := len(e.sessions())
	msg := e.refused(core.Command{Kind: core.CreateSession, Origin: core.OriginAPI, Agent: "gemini"})
	if msg != `there is no agent "gemini"; the agents are: default, codex, oc` {
		t.Errorf("refusal %q", msg)
	}
	if len(e.sessions()) != n {
		t.Error("a refused creation made a session")
	}
	// An adapter asks before it makes a place for the session.
	if msg := e.refused(core.Command{Kind: core.CheckAgent, Origin: "telegram", Actor: core.Actor{ID: "1"}, Agent: "gemini"}); !strings.Contains(msg, "the agents are") {
		t.Errorf("check: %q", msg)
	}
	e.handle(core.Command{Kind: core.CheckAgent, Origin: "telegram", Actor: core.Actor{ID: "1"}, Agent: "codex"})
	if len(e.sessions()) != n {
		t.Error("a check made a session")
	}
	none := newEnv(t, commands.Options{})
	if msg := none.refused(core.Command{Kind: core.CreateSession, Origin: core.OriginAPI, Agent: "codex"}); !strings.Contains(msg, "parley runs no agents itself") {
		t.Errorf("without agents: %q", msg)
	}
	none.handle(core.Command{Kind: core.CreateSession, Origin: core.OriginAPI, Agent: "default"})
}

// /agent NAME switches the session: its agent changes, the inbox gets the
// control message for the agent side (a human event, so agents hear of
// it), and the person who switched is told, in the same write, that the
// new agent starts its own conversation. A redelivery changes nothing;
// switching to the agent it has, or to an unknown one, is refused.
func TestSetAgent(t *testing.T) {
	e := newEnv(t, commands.Options{Agents: agents})
	id := e.newSession()
	cmd := core.Command{Kind: core.SetAgent, Session: id, Origin: "telegram", Actor: core.Actor{ID: "1", Name: "Ann"},
		Place: chat, Agent: "codex", PlatformID: "p1"}
	e.handle(cmd)
	if got := e.session(id).Agent; got != "codex" {
		t.Fatalf("the session's agent is %q", got)
	}
	inbox := e.inbox(id)
	if len(inbox) != 1 || inbox[0].Mime != core.MimeControl || inbox[0].Content != "agent codex" || inbox[0].Role != core.RoleUser {
		t.Fatalf("inbox %+v", inbox)
	}
	evs := e.events()
	if got := kinds(evs); len(got) != 3 || got[0] != core.EventHumanMessage || got[2] != core.EventNotice {
		t.Fatalf("events %v", got)
	}
	notice := evs[2]
	if !notice.SourceOnly || !strings.Contains(notice.Message.Content, "now runs with codex (Codex). It starts its own conversation") ||
		!strings.Contains(notice.Message.Content, "default (Claude Code)") {
		t.Errorf("notice %+v %q", notice, notice.Message.Content)
	}
	if res := e.handle(cmd); !res.Duplicate || len(e.inbox(id)) != 1 {
		t.Errorf("a redelivered /agent: %+v", res)
	}
	cmd.PlatformID = "p2"
	if msg := e.refused(cmd); msg != "this session runs with codex (Codex) already" {
		t.Errorf("switching to its own agent: %q", msg)
	}
	cmd.PlatformID, cmd.Agent = "p3", "nope"
	if msg := e.refused(cmd); !strings.Contains(msg, "the agents are: default, codex, oc") {
		t.Errorf("unknown agent: %q", msg)
	}
	cmd.PlatformID, cmd.Agent = "p4", "default"
	e.handle(cmd)
	if got := e.session(id).Agent; got != "" {
		t.Errorf("switched back: agent %q", got)
	}
	if in := e.inbox(id); in[len(in)-1].Content != "agent default" {
		t.Errorf("control message %q", in[len(in)-1].Content)
	}
}

// /agent alone lists the agents, the session's marked; /status names the
// session's agent.
func TestListAgentsAndStatus(t *testing.T) {
	e := newEnv(t, commands.Options{Agents: agents})
	id := e.handle(core.Command{Kind: core.CreateSession, Origin: core.OriginAPI, Agent: "oc"}).Session
	e.events()
	e.handle(core.Command{Kind: core.SetAgent, Session: id, Origin: "telegram", Actor: core.Actor{ID: "1"}})
	evs := ofKind(e.events(), core.EventNotice)
	want := "Agents (/agent NAME switches this session to one):\n• default — Claude Code\n• codex — Codex\n• oc — OpenCode (this session's)"
	if len(evs) != 1 || evs[0].Message.Content != want {
		t.Fatalf("list %+v", evs)
	}
	e.handle(core.Command{Kind: core.StatusQuery, Session: id, Origin: "telegram", Actor: core.Actor{ID: "1"}})
	if evs := ofKind(e.events(), core.EventNotice); len(evs) != 1 || !strings.HasSuffix(evs[0].Message.Content, ", agent oc (OpenCode)") {
		t.Fatalf("status %+v", evs)
	}
	none := newEnv(t, commands.Options{})
	nid := none.newSession()
	if msg := none.refused(core.Command{Kind: core.SetAgent, Session: nid, Origin: "telegram", Actor: core.Actor{ID: "1"}}); !strings.Contains(msg, "runs no agents") {
		t.Errorf("list without agents: %q", msg)
	}
	none.handle(core.Command{Kind: core.StatusQuery, Session: nid, Origin: "telegram", Actor: core.Actor{ID: "1"}})
	if evs := ofKind(none.events(), core.EventNotice); len(evs) != 1 || strings.Contains(evs[0].Message.Content, "agent") {
		t.Fatalf("status without agents %+v", evs)
	}
}
