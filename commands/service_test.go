package commands_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/bolt"
)

// env is a Service on a real store and bus, with a reliable subscriber that
// records what was published.
type env struct {
	tb  testing.TB
	svc *commands.Service
	st  *bolt.Store
	bus *core.MemBus
	sub *core.Subscription
}

func newEnv(tb testing.TB, opts commands.Options) *env {
	tb.Helper()
	st, err := bolt.Open(filepath.Join(tb.TempDir(), "db"), bolt.Options{NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	bus := core.NewMemBus(1)
	sub, cancel := bus.Subscribe(4096, false)
	tb.Cleanup(cancel)
	svc, err := commands.New(context.Background(), st, bus, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return &env{tb: tb, svc: svc, st: st, bus: bus, sub: sub}
}

// handle runs cmd and fails the test on an error.
func (e *env) handle(cmd core.Command) core.Result {
	e.tb.Helper()
	res, err := e.svc.Handle(context.Background(), cmd)
	if err != nil {
		e.tb.Fatalf("%s: %v", cmd.Kind, err)
	}
	return res
}

// events returns what was published since the last call. Publish is
// synchronous, so after Handle returned its events are in the buffer.
func (e *env) events() []core.Event {
	var out []core.Event
	for {
		select {
		case ev := <-e.sub.C:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func (e *env) session(id core.SessionID) core.Session {
	e.tb.Helper()
	s, err := e.st.Session(context.Background(), id)
	if err != nil {
		e.tb.Fatal(err)
	}
	return s
}

func (e *env) sessions() []core.Session {
	e.tb.Helper()
	ss, err := e.st.Sessions(context.Background())
	if err != nil {
		e.tb.Fatal(err)
	}
	return ss
}

// inbox returns a session's messages (every session's for "").
func (e *env) inbox(id core.SessionID) []core.Message {
	e.tb.Helper()
	msgs, err := e.st.Inbox(context.Background(), id, "", 0)
	if err != nil {
		e.tb.Fatal(err)
	}
	return msgs
}

func (e *env) lastSeq() uint64 {
	e.tb.Helper()
	seq, err := e.st.LastEventSeq(context.Background())
	if err != nil {
		e.tb.Fatal(err)
	}
	return seq
}

// newSession creates a session from the API and forgets its events.
func (e *env) newSession() core.SessionID {
	e.tb.Helper()
	id := e.handle(core.Command{Kind: core.CreateSession, Origin: core.OriginAPI, Title: "test"}).Session
	e.events()
	return id
}

func kinds(evs []core.Event) []core.EventKind {
	out := make([]core.EventKind, 0, len(evs))
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

func ofKind(evs []core.Event, k core.EventKind) []core.Event {
	var out []core.Event
	for _, e := range evs {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

func msg(id core.SessionID, origin core.Origin, text string) core.Command {
	return core.Command{Kind: core.SendMessage, Session: id, Origin: origin, Actor: core.Actor{ID: "42"}, Text: text}
}

var chat = core.Place{Chat: "chat-1"}

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

func TestAuthorization(t *testing.T) {
	allow := map[core.Origin][]string{"telegram": {"42"}, "slack": {}}
	tests := []struct {
		name   string
		origin core.Origin
		actor  string
		kind   core.CommandKind
		ok     bool
	}{
		{"listed actor", "telegram", "42", core.SendMessage, true},
		{"unlisted actor", "telegram", "666", core.SendMessage, false},
		{"no actor", "telegram", "", core.SendMessage, false},
		{"empty list admits nobody", "slack", "42", core.SendMessage, false},
		{"origin without a list admits all", "web", "anyone", core.SendMessage, true},
		{"non-UI origin is not checked", core.OriginAPI, "666", core.SendMessage, true},
		{"unlisted actor cannot close", "telegram", "666", core.Close, false},
		{"unlisted actor cannot cancel", "telegram", "666", core.Cancel, false},
		{"unlisted actor cannot rename", "telegram", "666", core.Rename, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, commands.Options{Allow: allow})
			id := e.newSession()
			seq := e.lastSeq()
			before := e.session(id)
			cmd := core.Command{Kind: tt.kind, Session: id, Origin: tt.origin, Actor: core.Actor{ID: tt.actor},
				Text: "hello", Title: "renamed", PlatformID: "p1",
				Ref: core.MessageRef{Adapter: core.AdapterName(tt.origin), Place: chat, ID: "m1"}}
			_, err := e.svc.Handle(context.Background(), cmd)
			if tt.ok {
				if err != nil {
					t.Fatalf("got %v, want it admitted", err)
				}
				if n := len(e.inbox(id)); n != 1 {
					t.Errorf("inbox holds %d messages, want 1", n)
				}
				return
			}
			if !errors.Is(err, core.ErrUnauthorized) {
				t.Fatalf("got %v, want ErrUnauthorized", err)
			}
			if n := len(e.inbox("")); n != 0 {
				t.Errorf("unauthorized input stored %d messages", n)
			}
			if got := e.lastSeq(); got != seq {
				t.Errorf("unauthorized input logged %d events", got-seq)
			}
			if got := e.events(); len(got) > 0 {
				t.Errorf("unauthorized input published %v", kinds(got))
			}
			if rows, _ := e.st.Cleanup(context.Background(), ""); len(rows) > 0 {
				t.Errorf("unauthorized input added %d ledger rows", len(rows))
			}
			after := e.session(id)
			if after.Status != before.Status || after.Title != before.Title || after.LastInputOrigin != before.LastInputOrigin {
				t.Errorf("unauthorized input changed the session: %+v → %+v", before, after)
			}
		})
	}
	t.Run("unauthorized at a new place starts no session", func(t *testing.T) {
		e := newEnv(t, commands.Options{Allow: allow})
		_, err := e.svc.Handle(context.Background(), core.Command{Kind: core.SendMessage, Origin: "telegram",
			Place: chat, Actor: core.Actor{ID: "666"}, Text: "let me in"})
		if !errors.Is(err, core.ErrUnauthorized) {
			t.Fatalf("got %v, want ErrUnauthorized", err)
		}
		if n := len(e.sessions()); n != 0 {
			t.Errorf("%d sessions created", n)
		}
		if got := e.events(); len(got) > 0 {
			t.Errorf("published %v", kinds(got))
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

func TestValidation(t *testing.T) {
	const max = 64
	tests := []struct {
		name string
		cmd  func(open, closed core.SessionID) core.Command
		want error
		// say is what the person (or agent) is told: the start of the
		// core.UserError's message.
		say string
	}{
		{"empty content", func(open, _ core.SessionID) core.Command { return msg(open, "telegram", "  \n\t") }, core.ErrInvalid, "the message is empty"},
		{"oversized content", func(open, _ core.SessionID) core.Command {
			return msg(open, "telegram", strings.Repeat("x", max+1))
		}, core.ErrInvalid, "the message is 65 bytes, more than the limit of 64"},
		{"invalid UTF-8", func(open, _ core.SessionID) core.Command { return msg(open, "telegram", "ok \xff\xfe") }, core.ErrInvalid, "the message is not valid UTF-8"},
		{"unknown kind", func(open, _ core.SessionID) core.Command {
			c := msg(open, "telegram", "hi")
			c.Kind = "frobnicate"
			return c
		}, core.ErrInvalid, `unknown command kind "frobnicate"`},
		{"API message without session", func(_, _ core.SessionID) core.Command { return msg("", core.OriginAPI, "hi") }, core.ErrInvalid, "send_message needs a session id"},
		{"empty assistant post", func(open, _ core.SessionID) core.Command {
			return core.Command{Kind: core.AssistantPost, Origin: core.OriginMCP, Session: open}
		}, core.ErrInvalid, "the message is empty"},
		{"oversized assistant post", func(open, _ core.SessionID) core.Command {
			return core.Command{Kind: core.AssistantPost, Origin: core.OriginMCP, Session: open, Text: strings.Repeat("x", max+1)}
		}, core.ErrInvalid, "the message is 65 bytes, more than the limit of 64"},
		{"invalid UTF-8 output", func(open, _ core.SessionID) core.Command {
			return core.Command{Kind: core.OutputUpdate, Origin: core.OriginMCP, Session: open, Text: "\xc3("}
		}, core.ErrInvalid, "the output is not valid UTF-8"},
		{"question without options", func(open, _ core.SessionID) core.Command {
			return core.Command{Kind: core.Ask, Origin: core.OriginMCP, Session: open, Text: "well?"}
		}, core.ErrInvalid, "a question needs 1 to 20 options, got 0"},
		{"empty title", func(open, _ core.SessionID) core.Command {
			return core.Command{Kind: core.Rename, Origin: core.OriginAPI, Session: open, Title: " "}
		}, core.ErrInvalid, "the title is empty"},
		{"answer to no question", func(open, _ core.SessionID) core.Command {
			return core.Command{Kind: core.Answer, Origin: "telegram", Session: open, QuestionID: "nope", Option: 1}
		}, core.ErrInvalid, "this question is no longer open"},
		{"unknown session", func(_, _ core.SessionID) core.Command {
			return msg(core.NewSessionID(time.Now()), "telegram", "hi")
		}, core.ErrNotFound, "unknown session "},
		{"output to unknown session", func(_, _ core.SessionID) core.Command {
			return core.Command{Kind: core.OutputUpdate, Origin: core.OriginMCP, Session: "01NOSUCHSESSION00000000000", Text: "x"}
		}, core.ErrNotFound, "unknown session 01NOSUCHSESSION00000000000"},
		{"cancel where no session is", func(_, _ core.SessionID) core.Command {
			return core.Command{Kind: core.Cancel, Origin: "telegram", Place: core.Place{Chat: "-100", Thread: "77"}}
		}, core.ErrNotFound, "there is no session here"},
		{"message to closed session", func(_, closed core.SessionID) core.Command { return msg(closed, "telegram", "hi") }, core.ErrSessionClosed, "this session is closed"},
		{"API message to closed session", func(_, closed core.SessionID) core.Command { return msg(closed, core.OriginAPI, "hi") }, core.ErrSessionClosed, "this session is closed"},
		{"cancel in closed session", func(_, closed core.SessionID) core.Command {
			return core.Command{Kind: core.Cancel, Origin: "telegram", Session: closed}
		}, core.ErrSessionClosed, "this session is closed"},
		{"close closed session", func(_, closed core.SessionID) core.Command {
			return core.Command{Kind: core.Close, Origin: "telegram", Session: closed}
		}, core.ErrSessionClosed, "this session is closed"},
		{"output to closed session", func(_, closed core.SessionID) core.Command {
			return core.Command{Kind: core.OutputUpdate, Origin: core.OriginMCP, Session: closed, Text: "x"}
		}, core.ErrSessionClosed, "this session is closed"},
		{"question in closed session", func(_, closed core.SessionID) core.Command {
			return core.Command{Kind: core.Ask, Origin: core.OriginMCP, Session: closed, Text: "well?", Options: []string{"a"}}
		}, core.ErrSessionClosed, "this session is closed"},
	}
	e := newEnv(t, commands.Options{MaxContent: max})
	open, closed := e.newSession(), e.newSession()
	e.handle(core.Command{Kind: core.Close, Origin: core.OriginAPI, Session: closed})
	e.events()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, seq := len(e.inbox("")), e.lastSeq()
			_, err := e.svc.Handle(context.Background(), tt.cmd(open, closed))
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if said, ok := core.UserMessage(err); !ok || !strings.HasPrefix(said, tt.say) {
				t.Errorf("people are told %q (a user error: %v), want %q", said, ok, tt.say)
			}
			if n := len(e.inbox("")); n != msgs {
				t.Errorf("refused command stored %d messages", n-msgs)
			}
			if got := e.lastSeq(); got != seq {
				t.Errorf("refused command logged %d events", got-seq)
			}
			if got := e.events(); len(got) > 0 {
				t.Errorf("refused command published %v", kinds(got))
			}
		})
	}
	t.Run("content of exactly the limit is accepted", func(t *testing.T) {
		e.handle(msg(open, "telegram", strings.Repeat("x", max)))
	})
}

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

func TestTurns(t *testing.T) {
	type update struct {
		text  string
		final bool
	}
	out := func(id core.SessionID, u update) core.Command {
		return core.Command{Kind: core.OutputUpdate, Origin: core.OriginMCP, Session: id, Text: u.text, Final: u.final}
	}
	tests := []struct {
		name    string
		updates []update
		// wantYield are the events of YieldTurn; the output event's text
		// is the last update's.
		wantYield []core.EventKind
		finalText string
	}{
		{"streaming output is made final", []update{{"a", false}, {"ab", false}},
			[]core.EventKind{core.EventOutput, core.EventTurnComplete, core.EventSessionUpdated}, "ab"},
		{"final output is not repeated", []update{{"a", false}, {"done", true}},
			[]core.EventKind{core.EventTurnComplete, core.EventSessionUpdated}, ""},
		{"no output", nil, []core.EventKind{core.EventTurnComplete}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, commands.Options{})
			id := e.newSession()
			for i, u := range tt.updates {
				e.handle(out(id, u))
				evs := e.events()
				o := ofKind(evs, core.EventOutput)
				if len(o) != 1 || o[0].Turn != 0 || o[0].Text != u.text || o[0].Final != u.final {
					t.Errorf("update %d: output events %+v, want one of turn 0", i, o)
				}
				st := ofKind(evs, core.EventSessionUpdated)
				if i == 0 && (len(st) != 1 || st[0].Status != core.StatusWorking) {
					t.Errorf("first update: status events %+v, want working", st)
				}
				if i > 0 && len(st) != 0 {
					t.Errorf("update %d: status events %+v, want none", i, st)
				}
				if s := e.session(id); s.Status != core.StatusWorking || s.Output != u.text {
					t.Errorf("update %d: session %s %q, want working with the text", i, s.Status, s.Output)
				}
			}

			e.handle(core.Command{Kind: core.YieldTurn, Origin: core.OriginMCP, Session: id})
			evs := e.events()
			if got := kinds(evs); !slices.Equal(got, tt.wantYield) {
				t.Fatalf("yield events %v, want %v", got, tt.wantYield)
			}
			for _, ev := range evs {
				switch ev.Kind {
				case core.EventOutput:
					if !ev.Final || ev.Text != tt.finalText || ev.Turn != 0 {
						t.Errorf("yield output %+v, want the final text of turn 0", ev)
					}
				case core.EventTurnComplete:
					if ev.Turn != 0 {
						t.Errorf("turn complete for turn %d, want 0", ev.Turn)
					}
				case core.EventSessionUpdated:
					if ev.Status != core.StatusIdle {
						t.Errorf("status event %s, want idle", ev.Status)
					}
				}
			}
			s := e.session(id)
			if s.Status != core.StatusIdle || s.Turn != 1 || s.Output != "" || s.OutputFinal {
				t.Errorf("after yield: %+v; want idle, turn 1, no output", s)
			}

			e.handle(out(id, update{"next turn", false}))
			if o := ofKind(e.events(), core.EventOutput); len(o) != 1 || o[0].Turn != 1 {
				t.Errorf("next turn's output %+v, want turn 1", o)
			}
		})
	}
}

// Whoever hears of an event finds it, and the message it carries, in the
// store: a subscriber that resumes from the store after a restart must not
// miss what it was told about.
func TestEventsStoredBeforePublished(t *testing.T) {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	bus := core.NewMemBus(1)
	// Unbuffered: the subscriber looks at the store the moment each event
	// is handed over.
	sub, cancel := bus.Subscribe(0, false)
	defer cancel()
	ctx := context.Background()
	svc, err := commands.New(ctx, st, bus, commands.Options{})
	if err != nil {
		t.Fatal(err)
	}

	problems := make(chan string, 100)
	seen := make(chan uint64, 1000)
	stop := make(chan struct{})
	go func() {
		for {
			var ev core.Event
			select {
			case ev = <-sub.C:
			case <-stop:
				return
			}
			if ev.Seq == 0 {
				problems <- fmt.Sprintf("%s published without a seq", ev.Kind)
			} else if got, err := st.EventsSince(ctx, ev.Seq-1, 1); err != nil || len(got) != 1 || got[0].Kind != ev.Kind || got[0].Seq != ev.Seq {
				problems <- fmt.Sprintf("%s (seq %d) published before it was stored: %v, %v", ev.Kind, ev.Seq, got, err)
			}
			if ev.Message != nil && ev.Message.ID != "" {
				msgs, err := st.Inbox(ctx, ev.Session, "", 0)
				if err != nil || !slices.ContainsFunc(msgs, func(m core.Message) bool { return m.ID == ev.Message.ID }) {
					problems <- fmt.Sprintf("%s published before its message %s was stored", ev.Kind, ev.Message.ID)
				}
			}
			switch ev.Kind {
			case core.EventHumanMessage, core.EventQueued, core.EventAssistant, core.EventQuestion, core.EventAnswer, core.EventCancel:
				if ev.Message == nil || ev.Message.ID == "" {
					problems <- fmt.Sprintf("%s published without its stored message", ev.Kind)
				}
			}
			seen <- ev.Seq
		}
	}()
	defer close(stop)

	do := func(cmd core.Command) core.Result {
		t.Helper()
		res, err := svc.Handle(ctx, cmd)
		if err != nil {
			t.Fatalf("%s: %v", cmd.Kind, err)
		}
		return res
	}
	id := do(core.Command{Kind: core.SendMessage, Origin: "fake", Place: chat, Actor: core.Actor{ID: "42"}, Text: "hi"}).Session
	do(core.Command{Kind: core.SendMessage, Origin: "fake", Session: id, Text: "are you there?"})
	do(core.Command{Kind: core.Notice, Origin: "fake", Session: id, Text: "🎤 Transcribing…"})
	do(core.Command{Kind: core.AssistantPost, Origin: core.OriginMCP, Session: id, Text: "yes"})
	do(core.Command{Kind: core.OutputUpdate, Origin: core.OriginMCP, Session: id, Text: "working"})
	do(core.Command{Kind: core.Ask, Origin: core.OriginMCP, Session: id, QuestionID: "q", Text: "ok?", Options: []string{"yes", "no"}})
	do(core.Command{Kind: core.SendMessage, Origin: "fake", Session: id, Text: "1"})
	do(core.Command{Kind: core.Cancel, Origin: "fake", Session: id})
	do(core.Command{Kind: core.Rename, Origin: core.OriginAPI, Session: id, Title: "renamed"})
	do(core.Command{Kind: core.YieldTurn, Origin: core.OriginMCP, Session: id})
	do(core.Command{Kind: core.CreateSession, Origin: core.OriginAPI, Title: "another"})
	do(core.Command{Kind: core.Close, Origin: "fake", Session: id})

	last, err := st.LastEventSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for got := uint64(0); got < last; {
		select {
		case got = <-seen:
		case <-timeout:
			t.Fatalf("subscriber saw events up to seq %d of %d", got, last)
		}
	}
	close(problems)
	for p := range problems {
		t.Error(p)
	}
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
