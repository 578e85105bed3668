package delivery_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// TestDispatchFollowsEventsGetsNoOps: an adapter that declares
// FollowsEvents (the web page) gets no platform operations and leaves no
// journal entries, whether an event is broadcast to it and another adapter
// bound to the same session (which gets its operations as before) or routed
// to it alone because the person wrote there last (which must not broadcast
// the reply to the other adapter either).
func TestDispatchFollowsEventsGetsNoOps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fk := newFake(core.Capabilities{})
		page := fake.New("page", core.Capabilities{Markup: core.MarkupMarkdown, Buttons: true, FollowsEvents: true})
		page.Slack = 0
		st := openStore(t)
		out := delivery.NewOutbox(delivery.OutboxOptions{EditInterval: time.Second, Jitter: func() float64 { return 0 }}, fk, page)
		t.Cleanup(out.Close)
		d := delivery.NewDispatcher(st, delivery.NewRouter(fk, page), out, delivery.DispatcherOptions{})
		t.Cleanup(d.StopTyping)
		r := &rig{t: t, store: st, fk: fk, out: out, d: d}
		noOps := func() {
			t.Helper()
			if ops := page.Ops(); len(ops) != 0 {
				t.Errorf("the adapter that follows events got platform calls: %+v", ops)
			}
			s := out.Stats()
			if n := s.Backlog["page"]; n != 0 || len(s.Outcomes["page"]) != 0 {
				t.Errorf("operations were made for the adapter that follows events: %d waiting, ended %v", n, s.Outcomes["page"])
			}
		}

		// A session started through the API: bound nowhere, so both
		// Binders are reached and everything is broadcast.
		id := r.newSession("api session", core.Place{})
		r.output(id, "working on it")
		r.post(id, "a question for you")
		r.notice(id, "a notice from fake")
		r.yield(id)
		r.settle()

		if got := messages(fk, r.binding(id).Place, core.KindAssistant); len(got) != 1 || got[0] != "a question for you" {
			t.Errorf("fake shows assistant messages %q, want the one posted", got)
		}
		noOps()
		if _, bound := r.session(id).Bindings["page"]; bound {
			t.Error("the adapter that follows events was bound by the dispatcher")
		}
		noJournal(t, r)

		// The person now writes on the page: replies go there only,
		// which is nowhere on the platforms.
		r.update(id, func(s *core.Session) []core.Event {
			s.LastInputOrigin = "page"
			s.Bindings["page"] = core.Binding{Adapter: "page", Place: core.Place{Chat: string(id)}}
			return nil
		})
		before := len(fk.Ops())
		r.output(id, "streaming to the page")
		r.post(id, "an answer on the page")
		r.yield(id)
		noJournal(t, r)
		r.settle()
		noOps()
		// fake still shows the session's status (status changes go to
		// every binding), and nothing else.
		for _, op := range fk.Ops()[before:] {
			if op.Method != "rename" && op.Method != "typing" {
				t.Errorf("a reply to input on the page reached fake: %+v", op)
			}
		}

		// Nor does a withdrawn question shown there (a ref from before
		// the declaration), or a notice to a place with no session.
		ctx := context.Background()
		pageRef := core.MessageRef{Adapter: "page", Place: core.Place{Chat: string(id)}, ID: "1"}
		msg := core.Message{Role: core.RoleSystem, Origin: "page", Content: "no session here"}
		for _, e := range []core.Event{
			{Kind: core.EventQuestionClosed, Session: id, QuestionID: "q1", Text: core.QuestionCancelled,
				Message: &core.Message{Content: "pick one"}, Refs: []core.MessageRef{pageRef}},
			{Kind: core.EventNotice, Origin: "page", Place: &pageRef.Place, Message: &msg, SourceOnly: true},
		} {
			if err := d.Dispatch(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		r.settle()
		noOps()

		// A ledger row of the page's (written before it declared so) is
		// done at once, with no call.
		var got []error
		d.EnqueueDelete(pageRef, func(err error) { got = append(got, err) })
		if len(got) != 1 || got[0] != nil {
			t.Errorf("deleting a page message: done with %v, want nil at once", got)
		}
		noOps()
	})
}

// noJournal fails when a journaled event is still being delivered or is
// still in the store's journal.
func noJournal(t *testing.T, r *rig) {
	t.Helper()
	if n := r.d.Delivering(); n != 0 {
		t.Errorf("%d journaled events still being delivered", n)
	}
	left, err := r.store.Deliveries(context.Background(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, dl := range left {
		t.Errorf("journal still holds %s #%d (done %q)", dl.Event.Kind, dl.Event.Seq, dl.Done)
	}
}
