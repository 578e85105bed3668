package commands_test

import (
	"context"
	"path/filepath"
	"testing"

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
