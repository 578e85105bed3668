package commands_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
	"github.com/parley-chat/parley/store/bolt"
)

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
			if said, ok := delivery.UserMessage(err); !ok || !strings.HasPrefix(said, tt.say) {
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
