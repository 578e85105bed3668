package commands_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
)

func TestSendMessageDedup(t *testing.T) {
	tests := []struct {
		name string
		cmd  func(e *env) core.Command
	}{
		{"bound session", func(e *env) core.Command {
			c := msg(e.newSession(), "telegram", "hello")
			c.PlatformID = "update-1"
			return c
		}},
		{"place with no session yet", func(e *env) core.Command {
			return core.Command{Kind: core.SendMessage, Origin: "telegram", Place: chat, Actor: core.Actor{ID: "42"},
				Text: "hello", PlatformID: "update-1",
				Ref: core.MessageRef{Adapter: "telegram", Place: chat, ID: "m1"}}
		}},
		{"API message", func(e *env) core.Command {
			c := msg(e.newSession(), core.OriginAPI, "hello")
			c.PlatformID = "request-1"
			return c
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, commands.Options{})
			cmd := tt.cmd(e)
			first := e.handle(cmd)
			second := e.handle(cmd)
			if first.Duplicate || !second.Duplicate {
				t.Errorf("Duplicate = %v, %v; want false, true", first.Duplicate, second.Duplicate)
			}
			if second.Message.ID != first.Message.ID || second.Session != first.Session {
				t.Errorf("redelivery gave message %s of %s, want %s of %s",
					second.Message.ID, second.Session, first.Message.ID, first.Session)
			}
			if msgs := e.inbox(""); len(msgs) != 1 {
				t.Errorf("inbox holds %d messages, want 1", len(msgs))
			}
			if n := len(e.sessions()); n != 1 {
				t.Errorf("%d sessions, want 1", n)
			}
			if got := ofKind(e.events(), core.EventHumanMessage); len(got) != 1 {
				t.Errorf("%d human message events published, want 1", len(got))
			}
			if rows, _ := e.st.Cleanup(context.Background(), ""); len(rows) > 1 {
				t.Errorf("%d ledger rows, want at most the one of the message", len(rows))
			}
		})
	}
	t.Run("numbered answer redelivered", func(t *testing.T) {
		e := newEnv(t, commands.Options{})
		id := e.newSession()
		e.handle(core.Command{Kind: core.Ask, Origin: core.OriginMCP, Session: id, QuestionID: "q", Text: "ok?", Options: []string{"yes", "no"}})
		reply := msg(id, "telegram", "2")
		reply.PlatformID = "update-2"
		first := e.handle(reply)
		e.events()
		second := e.handle(reply)
		if !second.Duplicate || second.Message.ID != first.Message.ID {
			t.Errorf("redelivery gave %+v, want a duplicate of %s", second, first.Message.ID)
		}
		if got := e.events(); len(got) > 0 {
			t.Errorf("redelivery published %v", kinds(got))
		}
	})
	// A person's /close whose acknowledgement the platform did not see
	// comes again: it was dealt with, so the adapter must be told so
	// (Duplicate), not that the session is closed.
	t.Run("close redelivered", func(t *testing.T) {
		e := newEnv(t, commands.Options{})
		id := e.newSession()
		cmd := core.Command{Kind: core.Close, Origin: "telegram", Actor: core.Actor{ID: "42"}, Session: id, PlatformID: "update-3"}
		first := e.handle(cmd)
		e.events()
		second, err := e.svc.Handle(context.Background(), cmd)
		if err != nil || !second.Duplicate || second.Message.ID != first.Message.ID {
			t.Errorf("redelivery gave %+v, %v; want a duplicate of %s", second, err, first.Message.ID)
		}
		if got := e.events(); len(got) > 0 {
			t.Errorf("redelivery published %v", kinds(got))
		}
	})
	t.Run("same platform id from another origin is another message", func(t *testing.T) {
		e := newEnv(t, commands.Options{})
		id := e.newSession()
		a, b := msg(id, "telegram", "hi"), msg(id, "slack", "hi")
		a.PlatformID, b.PlatformID = "1", "1"
		e.handle(a)
		if res := e.handle(b); res.Duplicate {
			t.Error("a message from another origin with the same id was taken for a duplicate")
		}
		if n := len(e.inbox(id)); n != 2 {
			t.Errorf("inbox holds %d messages, want 2", n)
		}
	})
}

func TestLastInputOrigin(t *testing.T) {
	tests := []struct {
		origin core.Origin
		want   core.Origin // after a first message from "fake"
	}{
		{"telegram", "telegram"},
		{"fake", "fake"},
		{"web", "web"},
		{core.OriginAPI, "fake"},
		{core.OriginMCP, "fake"},
		{core.OriginHook, "fake"},
	}
	for _, tt := range tests {
		t.Run(string(tt.origin), func(t *testing.T) {
			e := newEnv(t, commands.Options{})
			id := e.newSession()
			if got := e.session(id).LastInputOrigin; got != "" {
				t.Fatalf("new session has last input origin %q, want none", got)
			}
			e.handle(msg(id, "fake", "first"))
			e.handle(msg(id, tt.origin, "second"))
			if got := e.session(id).LastInputOrigin; got != tt.want {
				t.Errorf("last input origin %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("non-UI origin alone leaves it empty", func(t *testing.T) {
		e := newEnv(t, commands.Options{})
		id := e.newSession()
		e.handle(msg(id, core.OriginAPI, "from a script"))
		if got := e.session(id).LastInputOrigin; got != "" {
			t.Errorf("last input origin %q, want none", got)
		}
	})
}

func TestInputWhileBusy(t *testing.T) {
	e := newEnv(t, commands.Options{})
	id := e.newSession()
	first := e.handle(msg(id, "telegram", "first"))
	if first.Queued {
		t.Error("a message to an idle session was queued")
	}
	if st := e.session(id).Status; st != core.StatusWorking {
		t.Fatalf("status %s after a message, want working", st)
	}
	if got := ofKind(e.events(), core.EventQueued); len(got) > 0 {
		t.Errorf("queued events for the first message: %+v", got)
	}

	second := e.handle(msg(id, "telegram", "second"))
	if !second.Queued {
		t.Error("a message while the agent works was not marked queued")
	}
	evs := e.events()
	q := ofKind(evs, core.EventQueued)
	if len(q) != 1 || q[0].Message == nil || q[0].Message.ID != second.Message.ID {
		t.Errorf("queued events %+v, want one for the second message", q)
	}
	if h := ofKind(evs, core.EventHumanMessage); len(h) != 1 {
		t.Errorf("%d human message events for the queued message, want 1", len(h))
	}
	if msgs := e.inbox(id); len(msgs) != 2 || msgs[1].Content != "second" {
		t.Errorf("inbox %+v, want both messages", msgs)
	}

	e.handle(core.Command{Kind: core.YieldTurn, Origin: core.OriginMCP, Session: id})
	if res := e.handle(msg(id, "telegram", "third")); res.Queued {
		t.Error("a message after the turn completed was queued")
	}
}

func TestMessageAtUnboundPlace(t *testing.T) {
	e := newEnv(t, commands.Options{})
	at := func(place core.Place, text string) core.Command {
		return core.Command{Kind: core.SendMessage, Origin: "fake", Place: place, Actor: core.Actor{ID: "42"}, Text: text}
	}
	first := e.handle(at(chat, "hello"))
	if first.Session == "" {
		t.Fatal("no session")
	}
	evs := e.events()
	if got := kinds(evs); len(got) < 2 || got[0] != core.EventSessionCreated || got[1] != core.EventHumanMessage {
		t.Errorf("events %v, want session_created then human_message", got)
	}
	s := e.session(first.Session)
	if b, ok := s.Bindings["fake"]; !ok || b.Place != chat {
		t.Errorf("bindings %+v, want fake at %v", s.Bindings, chat)
	}
	if s.LastInputOrigin != "fake" {
		t.Errorf("last input origin %q, want fake", s.LastInputOrigin)
	}
	if at, err := e.st.SessionAt(context.Background(), "fake", chat); err != nil || at.ID != first.Session {
		t.Errorf("SessionAt = %s, %v; want %s", at.ID, err, first.Session)
	}

	second := e.handle(at(chat, "still there?"))
	if second.Session != first.Session {
		t.Errorf("second message went to %s, want %s", second.Session, first.Session)
	}
	if got := ofKind(e.events(), core.EventSessionCreated); len(got) > 0 {
		t.Error("the second message created a session")
	}
	if n := len(e.inbox(first.Session)); n != 2 {
		t.Errorf("session inbox holds %d messages, want 2", n)
	}

	elsewhere := e.handle(at(core.Place{Chat: "chat-2"}, "hi"))
	if elsewhere.Session == first.Session {
		t.Error("a message at another place went to the same session")
	}
	if n := len(e.sessions()); n != 2 {
		t.Errorf("%d sessions, want 2", n)
	}
}

// People writing at the same moment in a new chat (a group's first messages,
// or an adapter handling updates concurrently) all land in one session.
func TestConcurrentFirstMessagesShareSession(t *testing.T) {
	e := newEnv(t, commands.Options{})
	const n = 8
	ids := make([]core.SessionID, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := e.svc.Handle(context.Background(), core.Command{Kind: core.SendMessage, Origin: "fake",
				Place: chat, Actor: core.Actor{ID: fmt.Sprint(i)}, Text: fmt.Sprintf("hello %d", i)})
			ids[i], errs[i] = res.Session, err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if ss := e.sessions(); len(ss) != 1 {
		got := map[core.SessionID]int{}
		for _, id := range ids {
			got[id]++
		}
		t.Errorf("%d sessions created for one chat, want 1 (messages per session: %v)", len(ss), got)
	}
}

func TestQuestions(t *testing.T) {
	e := newEnv(t, commands.Options{})
	id := e.newSession()
	e.handle(msg(id, "fake", "deploy it"))
	e.events()
	ask := func(qid string) {
		t.Helper()
		e.handle(core.Command{Kind: core.Ask, Origin: core.OriginMCP, Session: id, QuestionID: qid,
			Text: "Where to?", Options: []string{"staging", "production"}})
	}

	ask("q1")
	s := e.session(id)
	if s.Status != core.StatusWaiting || len(s.Questions) != 1 || s.Questions[0].ID != "q1" {
		t.Fatalf("after ask: status %s, questions %+v; want waiting with q1 open", s.Status, s.Questions)
	}
	q := ofKind(e.events(), core.EventQuestion)
	if len(q) != 1 || q[0].QuestionID != "q1" || !slices.Equal(q[0].Options, []string{"staging", "production"}) ||
		q[0].Message == nil || q[0].Message.Content != "Where to?" {
		t.Errorf("question events %+v", q)
	}

	res := e.handle(core.Command{Kind: core.Answer, Origin: "fake", Actor: core.Actor{ID: "42"}, Session: id, QuestionID: "q1", Option: 2})
	if res.Message.Content != "production" || res.Message.Role != core.RoleUser {
		t.Errorf("answer stored %+v, want the person's message %q", res.Message, "production")
	}
	a := ofKind(e.events(), core.EventAnswer)
	if len(a) != 1 || a[0].QuestionID != "q1" || a[0].Message == nil || a[0].Message.Content != "production" {
		t.Errorf("answer events %+v", a)
	}
	if s := e.session(id); len(s.Questions) != 0 || s.Status != core.StatusWorking {
		t.Errorf("after answer: status %s, questions %+v; want working, none open", s.Status, s.Questions)
	}
	_, err := e.svc.Handle(context.Background(), core.Command{Kind: core.Answer, Origin: "fake", Session: id, QuestionID: "q1", Option: 1})
	if !errors.Is(err, core.ErrInvalid) {
		t.Errorf("second answer: %v, want ErrInvalid", err)
	}
	if got := e.events(); len(got) > 0 {
		t.Errorf("second answer published %v", kinds(got))
	}

	t.Run("option out of range", func(t *testing.T) {
		ask("q2")
		e.events()
		_, err := e.svc.Handle(context.Background(), core.Command{Kind: core.Answer, Origin: "fake", Session: id, QuestionID: "q2", Option: 3})
		if !errors.Is(err, core.ErrInvalid) {
			t.Errorf("got %v, want ErrInvalid", err)
		}
		if s := e.session(id); len(s.Questions) != 1 {
			t.Errorf("questions %+v, want q2 still open", s.Questions)
		}
	})
	t.Run("a number in reply answers the open question", func(t *testing.T) {
		res := e.handle(msg(id, "fake", " 1 "))
		if res.Message.Content != "staging" {
			t.Errorf("stored %q, want the first option", res.Message.Content)
		}
		evs := e.events()
		if len(ofKind(evs, core.EventAnswer)) != 1 || len(ofKind(evs, core.EventHumanMessage)) != 0 {
			t.Errorf("events %v, want an answer and no plain message", kinds(evs))
		}
		if s := e.session(id); len(s.Questions) != 0 {
			t.Errorf("questions %+v, want none open", s.Questions)
		}
	})
	t.Run("a number with no question open is a message", func(t *testing.T) {
		res := e.handle(msg(id, "fake", "1"))
		if res.Message.Content != "1" {
			t.Errorf("stored %q, want the message as written", res.Message.Content)
		}
		if got := ofKind(e.events(), core.EventHumanMessage); len(got) != 1 {
			t.Errorf("%d human message events, want 1", len(got))
		}
	})
	t.Run("text answer", func(t *testing.T) {
		ask("q3")
		e.events()
		res := e.handle(core.Command{Kind: core.Answer, Origin: "fake", Session: id, QuestionID: "q3", Text: "canary first"})
		if res.Message.Content != "canary first" {
			t.Errorf("stored %q, want the text", res.Message.Content)
		}
	})
}

func TestStatusQueryAnswersTheAsker(t *testing.T) {
	e := newEnv(t, commands.Options{})
	place := core.Place{Chat: "1", Thread: "2"}
	e.handle(core.Command{Kind: core.SendMessage, Origin: "telegram", Place: place, Text: "hi"})
	e.events()
	e.handle(core.Command{Kind: core.StatusQuery, Origin: "telegram", Place: place})
	evs := e.events()
	if len(evs) != 1 || evs[0].Kind != core.EventNotice || !evs[0].SourceOnly || evs[0].Origin != "telegram" ||
		!strings.Contains(evs[0].Message.Content, "working, 0 turn(s) completed") {
		t.Errorf("status answer %+v, want one source-only notice with the status", evs)
	}
}
