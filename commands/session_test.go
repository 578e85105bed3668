package commands_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
	"github.com/parley-chat/parley/store/bolt"
)

// The contract every command on a session shares (session.go): found by id
// or place, refused when closed, written once under its dedup key, and
// published only after the write.

// dedupCases are the commands that carry a platform message id and append
// an inbox message, each made ready on session id.
var dedupCases = []struct {
	kind core.CommandKind
	cmd  func(e *env, id core.SessionID) core.Command
}{
	{core.SendMessage, func(_ *env, id core.SessionID) core.Command {
		return core.Command{Kind: core.SendMessage, Session: id, Origin: "telegram", Actor: core.Actor{ID: "42"}, Text: "hi",
			Ref: core.MessageRef{Adapter: "telegram", Place: chat, ID: "m1"}}
	}},
	{core.Answer, func(e *env, id core.SessionID) core.Command {
		e.handle(core.Command{Kind: core.Ask, Session: id, Origin: core.OriginMCP, QuestionID: "q", Text: "ok?", Options: []string{"yes", "no"}})
		return core.Command{Kind: core.Answer, Session: id, Origin: "telegram", Actor: core.Actor{ID: "42"}, QuestionID: "q", Option: 1,
			Ref: core.MessageRef{Adapter: "telegram", Place: chat, ID: "m1"}}
	}},
	{core.Cancel, func(_ *env, id core.SessionID) core.Command {
		return core.Command{Kind: core.Cancel, Session: id, Origin: "telegram", Actor: core.Actor{ID: "42"}}
	}},
	{core.Close, func(_ *env, id core.SessionID) core.Command {
		return core.Command{Kind: core.Close, Session: id, Origin: "telegram", Actor: core.Actor{ID: "42"}}
	}},
	{core.AssistantPost, func(_ *env, id core.SessionID) core.Command {
		return core.Command{Kind: core.AssistantPost, Session: id, Origin: core.OriginMCP, Text: "done"}
	}},
	{core.Ask, func(_ *env, id core.SessionID) core.Command {
		return core.Command{Kind: core.Ask, Session: id, Origin: core.OriginMCP, QuestionID: "q", Text: "ok?", Options: []string{"yes"}}
	}},
	{core.RequestApproval, func(_ *env, id core.SessionID) core.Command {
		return core.Command{Kind: core.RequestApproval, Session: id, Origin: core.OriginMCP, QuestionID: "q",
			Call: &core.ToolCall{CallID: "c1", Tool: "Bash", Cmd: "ls"}}
	}},
}

// A command delivered twice is appended, logged and published once, and
// its second delivery is a duplicate naming the first message.
func TestRedeliveryIsADuplicate(t *testing.T) {
	for _, tt := range dedupCases {
		t.Run(string(tt.kind), func(t *testing.T) {
			e := newEnv(t, commands.Options{})
			id := e.newSession()
			cmd := tt.cmd(e, id)
			cmd.PlatformID = "update-1"
			first := e.handle(cmd)
			if first.Duplicate || first.Message.ID == "" {
				t.Fatalf("first delivery gave %+v, want a new message", first)
			}
			e.events()
			msgs, seq := len(e.inbox(id)), e.lastSeq()
			rows, _ := e.st.Cleanup(context.Background(), "")
			second, err := e.svc.Handle(context.Background(), cmd)
			if err != nil || !second.Duplicate || second.Message.ID != first.Message.ID || second.Session != id {
				t.Errorf("redelivery gave %+v, %v; want a duplicate of %s in %s", second, err, first.Message.ID, id)
			}
			if n := len(e.inbox(id)); n != msgs {
				t.Errorf("redelivery appended %d messages", n-msgs)
			}
			if got := e.lastSeq(); got != seq {
				t.Errorf("redelivery logged %d events", got-seq)
			}
			if got := e.events(); len(got) > 0 {
				t.Errorf("redelivery published %v", kinds(got))
			}
			if again, _ := e.st.Cleanup(context.Background(), ""); len(again) != len(rows) {
				t.Errorf("redelivery added %d ledger rows", len(again)-len(rows))
			}
		})
	}
}

// Deliveries of one command that arrive together (a platform retrying
// while the first is still handled) give one message and one set of
// events; the others are duplicates of it or, when the first changed what
// they would act on (a closed session, an answered question), refused.
func TestConcurrentRedeliveries(t *testing.T) {
	for _, tt := range dedupCases {
		t.Run(string(tt.kind), func(t *testing.T) {
			e := newEnv(t, commands.Options{})
			id := e.newSession()
			cmd := tt.cmd(e, id)
			cmd.PlatformID = "update-1"
			e.events()
			msgs, seq := len(e.inbox(id)), e.lastSeq()
			const n = 8
			results := make([]core.Result, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { results[i], errs[i] = e.svc.Handle(context.Background(), cmd) })
			}
			wg.Wait()
			var first []core.Result
			for i, res := range results {
				switch err := errs[i]; {
				case err == nil && !res.Duplicate:
					first = append(first, res)
				case err == nil:
				case tt.kind == core.Close && errors.Is(err, core.ErrSessionClosed),
					tt.kind == core.Answer && errors.Is(err, core.ErrInvalid):
				default:
					t.Errorf("delivery %d: %v", i, err)
				}
			}
			if len(first) != 1 {
				t.Fatalf("%d deliveries were handled as new, want 1", len(first))
			}
			for i, res := range results {
				if errs[i] == nil && res.Duplicate && res.Message.ID != first[0].Message.ID {
					t.Errorf("delivery %d is a duplicate of %s, want of %s", i, res.Message.ID, first[0].Message.ID)
				}
			}
			if got := len(e.inbox(id)) - msgs; got != 1 {
				t.Errorf("%d messages appended, want 1", got)
			}
			logged := e.lastSeq() - seq
			if published := len(e.events()); uint64(published) != logged || logged == 0 {
				t.Errorf("%d events logged and %d published, want the same, at least one", logged, published)
			}
		})
	}
}

// A command for a session id that does not exist is refused with the
// words and sentinel it always had, and nothing is written.
func TestUnknownSession(t *testing.T) {
	const id = core.SessionID("01NOSUCHSESSION00000000000")
	call := &core.ToolCall{CallID: "c1", Tool: "Bash"}
	cmds := []core.Command{
		{Kind: core.SendMessage, Origin: "telegram", Text: "hi"},
		{Kind: core.Answer, Origin: "telegram", QuestionID: "q", Option: 1},
		{Kind: core.Cancel, Origin: "telegram"},
		{Kind: core.Close, Origin: "telegram"},
		{Kind: core.Rename, Origin: core.OriginAPI, Title: "t"},
		{Kind: core.AssistantPost, Origin: core.OriginMCP, Text: "x"},
		{Kind: core.OutputUpdate, Origin: core.OriginMCP, Text: "x"},
		{Kind: core.YieldTurn, Origin: core.OriginMCP},
		{Kind: core.Ask, Origin: core.OriginMCP, Text: "ok?", Options: []string{"yes"}},
		{Kind: core.Withdraw, Origin: core.OriginMCP, QuestionID: "q"},
		{Kind: core.Notice, Origin: "telegram", Text: "x"},
		{Kind: core.StatusQuery, Origin: "telegram"},
		{Kind: core.ToolCallStart, Origin: core.OriginMCP, Call: call},
		{Kind: core.ToolCallOutput, Origin: core.OriginMCP, Call: call},
		{Kind: core.RequestApproval, Origin: core.OriginMCP, QuestionID: "q", Call: call},
	}
	e := newEnv(t, commands.Options{})
	for _, cmd := range cmds {
		t.Run(string(cmd.Kind), func(t *testing.T) {
			cmd.Session, cmd.PlatformID = id, "update-1"
			seq := e.lastSeq()
			res, err := e.svc.Handle(context.Background(), cmd)
			if !errors.Is(err, core.ErrNotFound) {
				t.Fatalf("got %v, want ErrNotFound", err)
			}
			if said, ok := delivery.UserMessage(err); !ok || said != "unknown session "+string(id) {
				t.Errorf("people are told %q (a user error: %v)", said, ok)
			}
			if !strings.HasPrefix(err.Error(), "commands: session "+string(id)+": ") {
				t.Errorf("logged as %q", err)
			}
			if !reflect.DeepEqual(res, core.Result{}) {
				t.Errorf("result %+v, want none", res)
			}
			if got := e.lastSeq(); got != seq {
				t.Errorf("logged %d events", got-seq)
			}
			if got := e.events(); len(got) > 0 {
				t.Errorf("published %v", kinds(got))
			}
		})
	}
	if n := len(e.sessions()); n != 0 {
		t.Errorf("%d sessions created", n)
	}
}

// Every command that changes a session refuses a closed one, naming it,
// and writes nothing.
func TestClosedSessionRefusesChanges(t *testing.T) {
	call := &core.ToolCall{CallID: "c1", Tool: "Bash"}
	cmds := []core.Command{
		{Kind: core.SendMessage, Origin: "telegram", Text: "hi"},
		{Kind: core.Answer, Origin: "telegram", QuestionID: "q", Option: 1},
		{Kind: core.Cancel, Origin: "telegram"},
		{Kind: core.Close, Origin: "telegram"},
		{Kind: core.Rename, Origin: core.OriginAPI, Title: "t"},
		{Kind: core.AssistantPost, Origin: core.OriginMCP, Text: "x"},
		{Kind: core.OutputUpdate, Origin: core.OriginMCP, Text: "x"},
		{Kind: core.YieldTurn, Origin: core.OriginMCP},
		{Kind: core.Ask, Origin: core.OriginMCP, Text: "ok?", Options: []string{"yes"}},
		{Kind: core.Withdraw, Origin: core.OriginMCP, QuestionID: "q"},
		{Kind: core.ToolCallStart, Origin: core.OriginMCP, Call: call},
		{Kind: core.ToolCallOutput, Origin: core.OriginMCP, Call: call},
		{Kind: core.RequestApproval, Origin: core.OriginMCP, QuestionID: "q", Call: call},
	}
	e := newEnv(t, commands.Options{})
	id := e.newSession()
	e.handle(core.Command{Kind: core.Close, Origin: core.OriginAPI, Session: id})
	e.events()
	for _, cmd := range cmds {
		t.Run(string(cmd.Kind), func(t *testing.T) {
			cmd.Session = id
			msgs, seq := len(e.inbox(id)), e.lastSeq()
			res, err := e.svc.Handle(context.Background(), cmd)
			if !errors.Is(err, core.ErrSessionClosed) {
				t.Fatalf("got %v, want ErrSessionClosed", err)
			}
			if said, _ := delivery.UserMessage(err); said != "this session is closed" {
				t.Errorf("people are told %q", said)
			}
			if !reflect.DeepEqual(res, core.Result{Session: id}) {
				t.Errorf("result %+v, want only the session", res)
			}
			if n := len(e.inbox(id)); n != msgs {
				t.Errorf("stored %d messages", n-msgs)
			}
			if got := e.lastSeq(); got != seq {
				t.Errorf("logged %d events", got-seq)
			}
			if got := e.events(); len(got) > 0 {
				t.Errorf("published %v", kinds(got))
			}
		})
	}
}

// A command from a platform place where no session lives is refused as
// such, except a person's message (which starts one) and a notice (which
// is addressed to the place).
func TestNoSessionAtThePlace(t *testing.T) {
	place := core.Place{Chat: "-100", Thread: "77"}
	e := newEnv(t, commands.Options{})
	for _, kind := range []core.CommandKind{core.Answer, core.Cancel, core.Close, core.Rename, core.StatusQuery} {
		t.Run(string(kind), func(t *testing.T) {
			_, err := e.svc.Handle(context.Background(), core.Command{Kind: kind, Origin: "telegram", Place: place,
				Title: "t", QuestionID: "q", Option: 1})
			if said, _ := delivery.UserMessage(err); !errors.Is(err, core.ErrNotFound) || said != "there is no session here" {
				t.Errorf("got %v (told %q), want ErrNotFound saying there is no session here", err, said)
			}
		})
	}
	if n := len(e.sessions()); n != 0 {
		t.Errorf("%d sessions created", n)
	}
}

// movingStore changes the session under a command, as the dispatcher does
// when it records where a question is shown: before each UpdateSession
// while armed, move runs on the stored session.
// The Service calls it on the goroutine of the command it handles.
type movingStore struct {
	*bolt.Store
	armed   bool
	move    func(*core.Session)
	updates int
}

func (m *movingStore) UpdateSession(ctx context.Context, id core.SessionID, fn func(*core.Session) error, events ...core.Event) (core.Session, []core.Event, error) {
	if m.armed {
		m.updates++
		if _, _, err := m.Store.UpdateSession(ctx, id, func(s *core.Session) error { m.move(s); return nil }); err != nil {
			return core.Session{}, nil, err
		}
	}
	return m.Store.UpdateSession(ctx, id, fn, events...)
}

// A change decided on a session that moved before its write is decided
// again on the session as it is then, a bounded number of times: a
// withdrawal carries every message the question was shown in by then.
func TestWithdrawDecidesAgainWhenShownMoves(t *testing.T) {
	ref := func(id string) core.MessageRef {
		return core.MessageRef{Adapter: "telegram", Place: chat, ID: id}
	}
	setup := func(t *testing.T) (*movingStore, *commands.Service, *core.Subscription, core.SessionID) {
		st, err := bolt.Open(filepath.Join(t.TempDir(), "db"), bolt.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		ms := &movingStore{Store: st}
		bus := core.NewMemBus(1)
		sub, cancel := bus.Subscribe(4096, false)
		t.Cleanup(cancel)
		ctx := context.Background()
		svc, err := commands.New(ctx, ms, bus, commands.Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := svc.Handle(ctx, core.Command{Kind: core.CreateSession, Origin: core.OriginAPI})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Handle(ctx, core.Command{Kind: core.Ask, Session: res.Session, Origin: core.OriginMCP,
			QuestionID: "q", Text: "Go?", Options: []string{"yes"}}); err != nil {
			t.Fatal(err)
		}
		for len(sub.C) > 0 {
			<-sub.C
		}
		return ms, svc, sub, res.Session
	}
	withdraw := func(svc *commands.Service, id core.SessionID) (core.Result, error) {
		return svc.Handle(context.Background(), core.Command{Kind: core.Withdraw, Session: id, Origin: core.OriginMCP, QuestionID: "q"})
	}
	show := func(s *core.Session, r core.MessageRef) {
		qs := slices.Clone(s.Questions)
		for i := range qs {
			qs[i].Shown = append(slices.Clone(qs[i].Shown), r)
		}
		s.Questions = qs
	}

	t.Run("shown once more", func(t *testing.T) {
		ms, svc, sub, id := setup(t)
		ms.armed = true
		ms.move = func(s *core.Session) { show(s, ref("1")); ms.armed = false }
		if _, err := withdraw(svc, id); err != nil {
			t.Fatal(err)
		}
		var closed []core.Event
		for len(sub.C) > 0 {
			if ev := <-sub.C; ev.Kind == core.EventQuestionClosed {
				closed = append(closed, ev)
			}
		}
		if len(closed) != 1 || !slices.Equal(closed[0].Refs, []core.MessageRef{ref("1")}) {
			t.Errorf("closed events %+v, want one carrying the message shown meanwhile", closed)
		}
	})
	t.Run("answered meanwhile", func(t *testing.T) {
		ms, svc, sub, id := setup(t)
		ms.armed = true
		ms.move = func(s *core.Session) { s.Questions = nil; ms.armed = false }
		res, err := withdraw(svc, id)
		if said, _ := delivery.UserMessage(err); !errors.Is(err, core.ErrInvalid) || said != "this question is no longer open" ||
			!strings.Contains(err.Error(), "question answered meanwhile") {
			t.Errorf("got %v (told %q), want the question no longer open, answered meanwhile", err, said)
		}
		if !reflect.DeepEqual(res, core.Result{Session: id}) {
			t.Errorf("result %+v, want only the session", res)
		}
		if len(sub.C) > 0 {
			t.Errorf("published %v", (<-sub.C).Kind)
		}
	})
	t.Run("moving all the time", func(t *testing.T) {
		ms, svc, sub, id := setup(t)
		n := 0
		ms.armed = true
		ms.move = func(s *core.Session) { n++; show(s, ref(fmt.Sprint(n))) }
		res, err := withdraw(svc, id)
		if _, told := delivery.UserMessage(err); err == nil || told || !strings.HasPrefix(err.Error(), "commands: withdraw: ") ||
			!strings.Contains(err.Error(), "shown somewhere new meanwhile") {
			t.Errorf("got %v, want the withdrawal to give up as a failure to write", err)
		}
		if !reflect.DeepEqual(res, core.Result{}) {
			t.Errorf("result %+v, want none", res)
		}
		if ms.updates != 11 {
			t.Errorf("%d writes tried, want the first and 10 more", ms.updates)
		}
		if len(sub.C) > 0 {
			t.Errorf("published %v", (<-sub.C).Kind)
		}
	})
}
