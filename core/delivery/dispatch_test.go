package delivery_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
	"github.com/parley-chat/parley/store/bolt"
)

// The dispatcher's tests run it with the Outbox and the Router over the
// bbolt store and the fake platform, in synctest bubbles: events are stored
// the way the command service stores them and dispatched one by one, in
// order, as Dispatcher.Run does; pacing, renewals and retries happen on the
// fake clock, to the exact instant.

// rig is a dispatcher delivering to one fake platform.
type rig struct {
	t     *testing.T
	store core.Store
	fk    *fake.Adapter
	out   *delivery.Outbox
	d     *delivery.Dispatcher
}

// openStore opens a bbolt store for the test, closed when it ends.
func openStore(t *testing.T) *bolt.Store {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "parley.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return st
}

// newRig starts a dispatcher and its outbox on st and fk inside the current
// bubble; both stop when the test ends (before the store closes).
func newRig(t *testing.T, fk *fake.Adapter, st core.Store, opts delivery.OutboxOptions) *rig {
	t.Helper()
	out := newOutbox(fk, opts)
	t.Cleanup(out.Close)
	d := delivery.NewDispatcher(st, delivery.NewRouter(fk), out, delivery.DispatcherOptions{})
	t.Cleanup(d.StopTyping)
	return &rig{t: t, store: st, fk: fk, out: out, d: d}
}

// emit dispatches stored events in order.
func (r *rig) emit(events []core.Event) {
	r.t.Helper()
	for _, e := range events {
		if err := r.d.Dispatch(context.Background(), e); err != nil {
			r.t.Fatalf("dispatch %s: %v", e.Kind, err)
		}
	}
}

// newSession stores a new idle session. A session bound at a place from the
// start is one a person began there; one created with the zero place is
// bound lazily, through fake's Bind, on its first delivery.
func (r *rig) newSession(title string, at core.Place) core.SessionID {
	r.t.Helper()
	now := time.Now()
	s := core.Session{ID: core.NewSessionID(now), Title: title, Status: core.StatusIdle, Created: now, Updated: now}
	if !at.IsZero() {
		s.Bindings = map[core.AdapterName]core.Binding{"fake": {Adapter: "fake", Place: at}}
	}
	s, events, err := r.store.CreateSession(context.Background(), s,
		core.Event{Kind: core.EventSessionCreated, Session: s.ID, Status: s.Status, Title: title})
	if err != nil {
		r.t.Fatal(err)
	}
	r.emit(events)
	return s.ID
}

// update changes the session with fn, which returns the events the change
// causes, stores both atomically and dispatches the events.
func (r *rig) update(id core.SessionID, fn func(*core.Session) []core.Event) {
	r.t.Helper()
	s := r.session(id)
	events := fn(&s)
	_, events, err := r.store.UpdateSession(context.Background(), id, func(s *core.Session) error {
		fn(s)
		return nil
	}, events...)
	if err != nil {
		r.t.Fatal(err)
	}
	r.emit(events)
}

func statusEvent(s *core.Session) core.Event {
	return core.Event{Kind: core.EventSessionUpdated, Session: s.ID, Status: s.Status, Title: s.Title}
}

// output replaces the turn's live output; the session starts working.
func (r *rig) output(id core.SessionID, text string) {
	r.t.Helper()
	r.update(id, func(s *core.Session) []core.Event {
		events := []core.Event{{Kind: core.EventOutput, Session: id, Text: text, Turn: s.Turn}}
		if s.Status == core.StatusIdle {
			s.Status = core.StatusWorking
			events = append(events, statusEvent(s))
		}
		s.Output, s.OutputFinal = text, false
		return events
	})
}

// yield completes the turn: the live output becomes final, the turn-done
// message follows, and the session goes idle.
func (r *rig) yield(id core.SessionID) {
	r.t.Helper()
	r.update(id, func(s *core.Session) []core.Event {
		var events []core.Event
		if s.Output != "" && !s.OutputFinal {
			events = append(events, core.Event{Kind: core.EventOutput, Session: id, Text: s.Output, Turn: s.Turn, Final: true})
		}
		events = append(events, core.Event{Kind: core.EventTurnComplete, Session: id, Turn: s.Turn})
		if s.Status != core.StatusIdle {
			s.Status = core.StatusIdle
			events = append(events, statusEvent(s))
		}
		s.Turn++
		s.Output, s.OutputFinal = "", false
		return events
	})
}

// show sets the session's title and status.
func (r *rig) show(id core.SessionID, title string, st core.Status) {
	r.t.Helper()
	r.update(id, func(s *core.Session) []core.Event {
		s.Title, s.Status = title, st
		return []core.Event{statusEvent(s)}
	})
}

// post stores an assistant message (journaled) and dispatches it.
func (r *rig) post(id core.SessionID, text string) {
	r.t.Helper()
	msg := core.Message{Session: id, Role: core.RoleAssistant, Mime: core.MimeMarkdown, Content: text}
	res, err := r.store.Append(context.Background(), core.Append{Message: msg,
		Events: []core.Event{{Kind: core.EventAssistant, Session: id, Message: &msg}}})
	if err != nil {
		r.t.Fatal(err)
	}
	r.emit(res.Events)
}

// notice stores feedback for the person from the fake platform's adapter
// (journaled) and dispatches it.
func (r *rig) notice(id core.SessionID, text string) {
	r.t.Helper()
	msg := core.Message{Session: id, Role: core.RoleSystem, Origin: "fake", Mime: core.MimeMarkdown, Content: text}
	events, err := r.store.AppendEvents(context.Background(), core.Event{Kind: core.EventNotice, Session: id,
		Origin: "fake", Message: &msg, Lifetime: core.LifetimeNextNotice, SourceOnly: true})
	if err != nil {
		r.t.Fatal(err)
	}
	r.emit(events)
}

// settle lets the outbox finish everything queued, on the fake clock, and
// every completion callback run.
func (r *rig) settle() {
	r.t.Helper()
	for {
		synctest.Wait()
		if s := r.out.Stats(); s.Pending == 0 && s.InFlight == 0 {
			return
		}
		drain(r.t, r.out)
	}
}

func (r *rig) session(id core.SessionID) core.Session {
	r.t.Helper()
	s, err := r.store.Session(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

// binding is the session's binding on the fake platform.
func (r *rig) binding(id core.SessionID) core.Binding {
	r.t.Helper()
	b, ok := r.session(id).Bindings["fake"]
	if !ok {
		r.t.Fatalf("session %s is not bound", id)
	}
	return b
}

// calls describes the platform calls of the given methods at place, with
// their time since start, one string each.
func calls(fk *fake.Adapter, start time.Time, place core.Place, methods ...string) []string {
	var out []string
	for _, op := range fk.Ops() {
		if op.Place != place || !contains(methods, op.Method) {
			continue
		}
		s := fmt.Sprintf("%s %q", op.Method, op.Text)
		if op.ID != "" {
			s += " #" + op.ID
		}
		s += fmt.Sprintf(" at +%s", op.Time.Sub(start))
		if op.Err != nil {
			s += " refused"
		}
		out = append(out, s)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// messages returns the texts of the messages of kind shown at place.
func messages(fk *fake.Adapter, place core.Place, kind core.MessageKind) []string {
	var out []string
	for _, m := range fk.Messages(place) {
		if m.Kind == kind {
			out = append(out, m.Text)
		}
	}
	return out
}

var dm = core.Place{Chat: "dm", Thread: "1"}

// TestDispatchOutputSendsThenEdits: a turn's first output is sent, later
// ones edit that message, at most once per edit interval, the newest text
// shown when the interval is up.
func TestDispatchOutputSendsThenEdits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFake(core.Capabilities{}), openStore(t), delivery.OutboxOptions{EditInterval: time.Second})
		id := r.newSession("edits", core.Place{})
		start := time.Now()
		r.output(id, "v1")
		time.Sleep(100 * time.Millisecond)
		r.output(id, "v2")
		time.Sleep(100 * time.Millisecond)
		r.output(id, "v3")
		time.Sleep(2800 * time.Millisecond)
		r.output(id, "v4") // at +3 s: the interval is long over
		r.settle()
		b := r.binding(id)
		want := []string{
			`send "v1" #2 at +0s`,
			`edit "v3" #2 at +1s`,
			`edit "v4" #2 at +3s`,
		}
		if got := calls(r.fk, start, b.Place, "send", "edit"); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("calls\n%q, want\n%q", got, want)
		}
		if got := messages(r.fk, b.Place, core.KindOutput); fmt.Sprint(got) != "[v4]" {
			t.Errorf("output messages %q, want one showing v4", got)
		}
		if b.Output.Ref.ID != "2" {
			t.Errorf("binding remembers output message %q, want 2", b.Output.Ref.ID)
		}
	})
}

// TestDispatchIdenticalPayloadNotResent: an update showing what the
// platform shows already makes no call, nor does the same text made final.
func TestDispatchIdenticalPayloadNotResent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFake(core.Capabilities{}), openStore(t), delivery.OutboxOptions{})
		id := r.newSession("same", dm)
		start := time.Now()
		r.output(id, "same")
		r.settle()
		time.Sleep(time.Second)
		r.output(id, "same")
		r.settle()
		r.yield(id) // final, with the same text
		r.settle()
		if got, want := calls(r.fk, start, dm, "send", "edit"), []string{
			`send "same" #1 at +0s`,
			`send "✅ Done" #2 at +1s`,
		}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("calls %q, want %q", got, want)
		}
	})
}

// TestDispatchOutputMessageGone: when the output message was deleted, the
// edit finds it gone and a new message is sent and remembered.
func TestDispatchOutputMessageGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFake(core.Capabilities{}), openStore(t), delivery.OutboxOptions{})
		id := r.newSession("gone", dm)
		start := time.Now()
		r.output(id, "v1")
		r.settle()
		r.fk.Vanish(r.binding(id).Output.Ref.ID)
		r.output(id, "v2")
		r.settle()
		want := []string{
			`send "v1" #1 at +0s`,
			`edit "v2" #1 at +0s refused`,
			`send "v2" #2 at +0s`,
		}
		if got := calls(r.fk, start, dm, "send", "edit"); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("calls %q, want %q", got, want)
		}
		if got := messages(r.fk, dm, core.KindOutput); fmt.Sprint(got) != "[v2]" {
			t.Errorf("output messages %q, want one showing v2", got)
		}
		if got := r.binding(id).Output.Ref.ID; got != "2" {
			t.Errorf("binding remembers output message %q, want the new one, 2", got)
		}
	})
}

// TestDispatchThreadGone: a send that finds the session's conversation
// deleted binds the session anew and sends there, once.
func TestDispatchThreadGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFake(core.Capabilities{}), openStore(t), delivery.OutboxOptions{})
		id := r.newSession("thread", core.Place{})
		r.post(id, "hello")
		r.settle()
		old := r.binding(id).Place
		r.fk.DeleteThread(old)
		r.post(id, "are you still there?")
		r.settle()
		b := r.binding(id)
		if b.Place == old {
			t.Fatal("the session was not bound anew")
		}
		var refused, binds int
		for _, op := range r.fk.Ops() {
			switch {
			case op.Method == "send" && errors.Is(op.Err, core.ErrThreadGone):
				refused++
			case op.Method == "bind":
				binds++
			}
		}
		if refused != 1 || binds != 2 {
			t.Errorf("%d sends to the gone thread and %d binds, want 1 and 2", refused, binds)
		}
		if got := messages(r.fk, b.Place, core.KindAssistant); fmt.Sprint(got) != "[are you still there?]" {
			t.Errorf("the new thread shows %q, want the message once", got)
		}
		if got, want := string(b.Meta), fmt.Sprintf(`{"thread":%q}`, b.Place.Thread); got != want {
			t.Errorf("binding meta %s, want the new thread's, %s", got, want)
		}
		if rows, _ := r.store.Deliveries(context.Background(), 0, 0); len(rows) != 0 {
			t.Errorf("%d journal rows left, want none", len(rows))
		}
	})
}

// TestDispatchLongOutput: an output too long for the platform shows its
// tail while it streams; made final it is delivered whole: the output
// message shows the first part, continuations the rest, in order, each
// within the limit.
func TestDispatchLongOutput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 100
		r := newRig(t, newFake(core.Capabilities{MaxLength: limit, LengthUnit: core.Bytes}), openStore(t), delivery.OutboxOptions{})
		id := r.newSession("long", dm)
		var paras []string
		for i := range 5 {
			paras = append(paras, fmt.Sprintf("part %d %s", i, strings.Repeat("x", 60)))
		}
		text := strings.Join(paras, "\n\n")
		r.output(id, text)
		r.settle()
		if got, want := messages(r.fk, dm, core.KindOutput), []string{delivery.Tail(text, limit, core.Bytes, "…")}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("while streaming shows %q, want the tail %q", got, want)
		}
		if got := messages(r.fk, dm, core.KindOutput)[0]; !strings.HasPrefix(got, "…") || !strings.HasSuffix(got, paras[4]) {
			t.Errorf("live view %q, want the end behind a marker", got)
		}
		r.yield(id)
		r.settle()
		var got []string
		var kinds []core.MessageKind
		for _, m := range r.fk.Messages(dm) {
			kinds = append(kinds, m.Kind)
			if m.Kind == core.KindOutput || m.Kind == core.KindContinuation {
				got = append(got, m.Text)
				if n := delivery.Measure(m.Text, core.Bytes); n > limit {
					t.Errorf("a message of %d bytes, over the limit of %d", n, limit)
				}
			}
		}
		if want := delivery.Split(text, limit, core.Bytes); fmt.Sprint(got) != fmt.Sprint(want) || len(want) < 3 {
			t.Errorf("final delivered as %q, want %q", got, want)
		}
		wantKinds := []core.MessageKind{core.KindOutput}
		for range len(got) - 1 {
			wantKinds = append(wantKinds, core.KindContinuation)
		}
		wantKinds = append(wantKinds, core.KindTurnDone)
		if fmt.Sprint(kinds) != fmt.Sprint(wantKinds) {
			t.Errorf("messages in the order %v, want %v", kinds, wantKinds)
		}
		if rows, _ := r.store.Deliveries(context.Background(), 0, 0); len(rows) != 0 {
			t.Errorf("%d journal rows left, want none", len(rows))
		}
	})
}

// TestDispatchTyping: the typing indicator is renewed every 4.5 s while
// the agent works and stops when its turn ends; a spell of work shows it
// for ten minutes at most.
func TestDispatchTyping(t *testing.T) {
	t.Run("stops at turn end", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, newFake(core.Capabilities{}), openStore(t), delivery.OutboxOptions{})
			id := r.newSession("typing", dm)
			r.settle()
			start := time.Now()
			r.show(id, "typing", core.StatusWorking)
			time.Sleep(10 * time.Second)
			r.yield(id)
			time.Sleep(time.Minute)
			r.settle()
			want := []string{`typing "" at +0s`, `typing "" at +4.5s`, `typing "" at +9s`}
			if got := calls(r.fk, start, dm, "typing"); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("typing %q, want %q", got, want)
			}
		})
	})
	t.Run("bounded to ten minutes", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, newFake(core.Capabilities{}), openStore(t), delivery.OutboxOptions{})
			id := r.newSession("typing", dm)
			r.settle()
			start := time.Now()
			r.show(id, "typing", core.StatusWorking)
			time.Sleep(time.Hour)
			r.settle()
			got := calls(r.fk, start, dm, "typing")
			// 0, 4.5 s, … 598.5 s: the last renewal before 10 minutes.
			if len(got) != 134 || got[133] != `typing "" at +9m58.5s` {
				t.Errorf("%d typing indicators, the last %q; want 134, the last at +9m58.5s", len(got), got[len(got)-1])
			}
		})
	})
}

// TestDispatchFirstBindingShowsWork: a session an agent started is bound
// by its first output; the status change that came with it (before the
// binding) is shown once bound, and the typing indicator runs.
func TestDispatchFirstBindingShowsWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFake(core.Capabilities{}), openStore(t), delivery.OutboxOptions{})
		id := r.newSession("agent's", core.Place{})
		start := time.Now()
		r.output(id, "working on it")
		time.Sleep(10 * time.Second)
		r.settle()
		place := r.binding(id).Place
		// The send and the rename both go at +0s; which first is not
		// decided (the send is paced anew at the place it bound).
		want := []string{
			`rename "⏳ agent's" at +0s`,
			`send "working on it" #2 at +0s`,
			`typing "" at +0s`, `typing "" at +4.5s`, `typing "" at +9s`,
		}
		got := calls(r.fk, start, place, "send", "rename", "typing")
		slices.Sort(got)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("calls %q, want %q", got, want)
		}
		r.yield(id)
	})
}

// TestDispatchStatusShownOnChange: the platform is asked to show the title
// and status only when they differ from what it shows.
func TestDispatchStatusShownOnChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFake(core.Capabilities{}), openStore(t), delivery.OutboxOptions{})
		start := time.Now()
		id := r.newSession("first", dm) // shown: idle
		r.settle()
		for _, step := range []struct {
			title string
			st    core.Status
		}{
			{"first", core.StatusIdle}, // unchanged
			{"first", core.StatusWorking},
			{"first", core.StatusWorking}, // unchanged
			{"second", core.StatusWorking},
			{"second", core.StatusWorking}, // unchanged
			{"second", core.StatusClosed},
		} {
			time.Sleep(time.Second)
			r.show(id, step.title, step.st)
			r.settle()
		}
		want := []string{
			`rename "💬 first" at +0s`,
			`rename "⏳ first" at +2s`,
			`rename "⏳ second" at +4s`,
			`rename "✅ second" at +6s`,
		}
		if got := calls(r.fk, start, dm, "rename"); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("renames %q, want %q", got, want)
		}
		if got := r.binding(id).Shown; got != (core.StatusView{Title: "second", Status: core.StatusClosed}) {
			t.Errorf("binding remembers %+v shown", got)
		}
	})
}

// TestDispatchBindingMetaPersisted: the Meta an adapter returns from Bind is
// stored with the binding, and kept when showing a status returns none.
func TestDispatchBindingMetaPersisted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFake(core.Capabilities{}), openStore(t), delivery.OutboxOptions{})
		id := r.newSession("meta", core.Place{})
		r.post(id, "hello")
		r.settle()
		b := r.binding(id)
		var meta map[string]string
		if err := json.Unmarshal(b.Meta, &meta); err != nil || meta["thread"] != b.Place.Thread || b.Place.Thread == "" {
			t.Fatalf("binding at %+v has meta %s (%v), want the thread the platform made", b.Place, b.Meta, err)
		}
		r.show(id, "meta", core.StatusWorking)
		r.settle()
		if got := r.binding(id); string(got.Meta) != string(b.Meta) || got.Shown.Status != core.StatusWorking {
			t.Errorf("after a status change: meta %s shown %+v, want meta %s kept and the status shown", got.Meta, got.Shown, b.Meta)
		}
	})
}

// TestDispatchPermanentRefusalNotice: an assistant message the platform
// refuses for good is not retried; the person gets exactly one short
// notice instead, and a notice refused in turn is not noticed again.
func TestDispatchPermanentRefusalNotice(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refused int // sends refused for good: the message, then the notice
		sends   int
		notices int
		notice  bool // the refused message is itself a notice
	}{
		{name: "message refused", refused: 1, sends: 2, notices: 1},
		{name: "notice about it refused too", refused: 2, sends: 2, notices: 0},
		{name: "a notice refused", refused: 1, sends: 1, notices: 0, notice: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, newFake(core.Capabilities{}), openStore(t), delivery.OutboxOptions{})
				id := r.newSession("refused", dm)
				r.settle()
				for range tc.refused {
					r.fk.FailNext("send", core.Permanent(errors.New("Bad Request: can't parse entities")))
				}
				if tc.notice {
					r.notice(id, "🎤 Transcribing…")
				} else {
					r.post(id, "an answer the platform will not take")
				}
				r.settle()
				var sends int
				for _, op := range r.fk.Ops() {
					if op.Method == "send" {
						sends++
					}
				}
				if sends != tc.sends {
					t.Errorf("%d sends, want %d: each message once", sends, tc.sends)
				}
				if got := messages(r.fk, dm, core.KindAssistant); len(got) != 0 {
					t.Errorf("assistant messages %q shown", got)
				}
				notices := r.fk.Messages(dm)[:0:0]
				for _, m := range r.fk.Messages(dm) {
					if m.Kind == core.KindNotice {
						notices = append(notices, m)
					}
				}
				if len(notices) != tc.notices {
					t.Fatalf("%d notices %+v, want %d", len(notices), notices, tc.notices)
				}
				for _, n := range notices {
					if !n.Silent || !strings.Contains(n.Text, "could not be shown") || len(n.Text) > 200 {
						t.Errorf("notice %+v, want a short silent one saying the message could not be shown", n)
					}
				}
				if s := r.out.Stats(); s.Failed["fake"] != uint64(tc.refused) {
					t.Errorf("outbox counts %d failed, want %d", s.Failed["fake"], tc.refused)
				}
				if rows, _ := r.store.Deliveries(context.Background(), 0, 0); len(rows) != 0 {
					t.Errorf("%d journal rows left, want none: a refusal for good is an outcome", len(rows))
				}
			})
		})
	}
}

// lostConfirmation is a store whose next ConfirmDelivery fails: what a
// crash between the platform's answer and the confirmation's commit leaves
// behind, a journal row for an operation the platform carried out.
type lostConfirmation struct {
	core.Store
	fail atomic.Bool
}

func (s *lostConfirmation) ConfirmDelivery(ctx context.Context, seq uint64, key string, last bool) error {
	if s.fail.CompareAndSwap(true, false) {
		return errors.New("crashed before the commit")
	}
	return s.Store.ConfirmDelivery(ctx, seq, key, last)
}

// TestDispatchReplayKeyIsStable: a message whose confirmation was lost is
// sent again by the replay at the next start with the same OutMessage.Key.
// A platform that takes the key as an idempotency key (as Matrix takes
// transaction ids) shows it once. One that does not shows it twice: that
// is the documented window of at-least-once delivery, between the
// platform's answer and the confirmation's commit.
func TestDispatchReplayKeyIsStable(t *testing.T) {
	for _, idempotent := range []bool{true, false} {
		t.Run(fmt.Sprintf("idempotent=%v", idempotent), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				st := &lostConfirmation{Store: openStore(t)}
				fk := newFake(core.Capabilities{})
				fk.Idempotent = idempotent
				r := newRig(t, fk, st, delivery.OutboxOptions{})
				id := r.newSession("replay", dm)
				r.settle()
				st.fail.Store(true)
				// Held until the event is sealed: a send confirmed before
				// that would have its event finished by the seal itself.
				r.out.Hold("fake", true)
				r.post(id, "the answer")
				r.out.Hold("fake", false)
				r.settle()
				if rows, _ := st.Deliveries(ctx, 0, 0); len(rows) != 1 {
					t.Fatalf("%d journal rows after the lost confirmation, want 1", len(rows))
				}
				// The daemon restarts: a new outbox and dispatcher on the
				// same store and platform replay the journal.
				r.out.Close()
				time.Sleep(time.Minute)
				r = newRig(t, fk, st, delivery.OutboxOptions{})
				last, err := st.LastEventSeq(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if n, err := r.d.Replay(ctx, last); n != 1 || err != nil {
					t.Fatalf("replayed %d events (%v), want 1", n, err)
				}
				r.settle()
				var ids []string
				for _, op := range fk.Ops() {
					if op.Method == "send" && op.Text == "the answer" {
						ids = append(ids, op.ID)
					}
				}
				shown := messages(fk, dm, core.KindAssistant)
				if idempotent {
					if len(ids) != 2 || ids[0] != ids[1] || len(shown) != 1 {
						t.Errorf("sends answered with messages %v, %d shown; want the same message twice, shown once", ids, len(shown))
					}
				} else if len(ids) != 2 || ids[0] == ids[1] || len(shown) != 2 {
					t.Errorf("sends answered with messages %v, %d shown; want two messages (the window)", ids, len(shown))
				}
				if rows, _ := st.Deliveries(ctx, 0, 0); len(rows) != 0 {
					t.Errorf("%d journal rows after the replay, want none", len(rows))
				}
			})
		})
	}
}

// TestDispatchSendsPacedAsSends: on a platform that limits new messages per
// group and edits per account (Slack: a message a second per channel, 50
// edits a minute per workspace), the ops queued at edit priority that post
// a message — a turn's first output, its "✅ Done" — are paced by the limits
// of messages: three threads of one channel that start streaming at once
// get their output messages a second apart, and their "done" messages
// after, none refused.
func TestDispatchSendsPacedAsSends(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		caps := limits(
			core.Limit{Scope: core.ScopeGroup, Kinds: []core.OpKind{core.OpSend}, Rate: core.Rate{N: 1, Per: time.Second}},
			core.Limit{Scope: core.ScopeAccount, Kinds: []core.OpKind{core.OpEdit, core.OpRename}, Rate: core.Rate{N: 50, Per: time.Minute}},
		)
		r := newRig(t, newFake(caps), openStore(t), delivery.OutboxOptions{})
		var ids []core.SessionID
		for _, thread := range []string{"1", "2", "3"} {
			ids = append(ids, r.newSession("thread "+thread, core.Place{Chat: "channel", Thread: thread}))
		}
		r.settle()
		start := time.Now()
		for _, id := range ids {
			r.output(id, "working")
		}
		r.settle()
		for _, id := range ids {
			r.yield(id)
		}
		r.settle()
		var got []string
		for _, op := range r.fk.Ops() {
			if op.Method == "send" {
				s := fmt.Sprintf("send %q at +%s", op.Text, op.Time.Sub(start))
				if op.Err != nil {
					s += " refused"
				}
				got = append(got, s)
			}
		}
		want := []string{
			`send "working" at +0s`, `send "working" at +1s`, `send "working" at +2s`,
			`send "✅ Done" at +3s`, `send "✅ Done" at +4s`, `send "✅ Done" at +5s`,
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("sends\n%q, want\n%q", got, want)
		}
	})
}

// TestDispatchFinalOutputGoesFirst: five sessions stream into one chat
// whose budget (one message a second) they share; the final text of the
// one whose turn ends goes in the next free second, before the other
// sessions' streaming edits, though it was queued after them.
func TestDispatchFinalOutputGoesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		caps := limits(core.Limit{Scope: core.ScopeGroup, Rate: core.Rate{N: 1, Per: time.Second},
			Kinds: []core.OpKind{core.OpSend, core.OpEdit, core.OpDelete, core.OpRename}})
		r := newRig(t, newFake(caps), openStore(t), delivery.OutboxOptions{EditInterval: time.Second})
		var ids []core.SessionID
		for i := range 5 {
			ids = append(ids, r.newSession(fmt.Sprint("s", i), core.Place{Chat: "group", Thread: fmt.Sprint(i)}))
		}
		for _, id := range ids {
			r.output(id, "v1")
		}
		r.settle()
		time.Sleep(time.Second) // the chat's second is free again
		start := time.Now()
		for _, id := range ids {
			r.output(id, "v2")
		}
		last := ids[len(ids)-1]
		r.update(last, func(s *core.Session) []core.Event {
			s.OutputFinal = true
			return []core.Event{{Kind: core.EventOutput, Session: last, Text: "v2 final", Turn: s.Turn, Final: true}}
		})
		r.settle()
		var got []string
		for _, op := range r.fk.Ops() {
			if op.Method == "edit" && !op.Time.Before(start) {
				got = append(got, fmt.Sprintf("%s %q at +%s", op.Place.Thread, op.Text, op.Time.Sub(start)))
			}
		}
		// The first edit takes the free second as it comes; the final
		// text takes the next one.
		want := []string{`0 "v2" at +0s`, `4 "v2 final" at +1s`, `1 "v2" at +2s`, `2 "v2" at +3s`, `3 "v2" at +4s`}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("edits\n%q, want\n%q", got, want)
		}
	})
}

// TestDispatchLateFinalIsNotLost: a turn's final edit held back by a
// failure until the next turn has posted its own output message is not
// dropped: it lands in its own turn's message.
func TestDispatchLateFinalIsNotLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFake(core.Capabilities{}), openStore(t), delivery.OutboxOptions{})
		id := r.newSession("late", dm)
		r.output(id, "turn 0 live")
		r.settle()
		r.fk.FailNext("edit", errors.New("502 Bad Gateway"))
		r.update(id, func(s *core.Session) []core.Event {
			events := []core.Event{
				{Kind: core.EventOutput, Session: id, Text: "turn 0 final", Turn: s.Turn, Final: true},
				{Kind: core.EventTurnComplete, Session: id, Turn: s.Turn},
			}
			s.Turn++
			s.Output, s.OutputFinal = "", false
			return events
		})
		r.output(id, "turn 1 live")
		time.Sleep(time.Minute)
		r.settle()
		var shown []string
		for _, kind := range []core.MessageKind{core.KindOutput, core.KindContinuation} {
			shown = append(shown, messages(r.fk, dm, kind)...)
		}
		slices.Sort(shown)
		if want := "[turn 0 final turn 1 live]"; fmt.Sprint(shown) != want {
			t.Errorf("messages %q, want %s: the late final in its own turn's message", shown, want)
		}
	})
}

// TestDispatchLateFinalPastFileThreshold: a late final with no message of
// its own turn to edit goes as new messages, and past the file threshold in
// the same form as on time: its tail, then the whole text as a document.
// (A binding made after the turn ended starts at the next turn, which makes
// the turn's final late: it then went as eleven messages instead.)
func TestDispatchLateFinalPastFileThreshold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fk := newFake(core.Capabilities{MaxLength: 200, FileThreshold: 1000})
		r := newRig(t, fk, openStore(t), delivery.OutboxOptions{})
		id := r.newSession("late file", dm)
		r.settle()
		text := strings.Repeat("all work and no play\n", 100)
		fk.FailNext("send", errors.New("502 Bad Gateway"))
		r.update(id, func(s *core.Session) []core.Event {
			events := []core.Event{
				{Kind: core.EventOutput, Session: id, Text: text, Turn: s.Turn, Final: true},
				{Kind: core.EventTurnComplete, Session: id, Turn: s.Turn},
			}
			s.Turn++
			s.Output, s.OutputFinal = "", false
			return events
		})
		r.output(id, "turn 1 live")
		time.Sleep(time.Minute)
		r.settle()
		var docs []string
		for _, op := range fk.Ops() {
			if op.Method == "file" && op.Err == nil {
				docs = append(docs, op.File)
			}
		}
		if len(docs) != 1 || docs[0] != text {
			t.Fatalf("%d documents sent, want one with the whole %d bytes of the late final", len(docs), len(text))
		}
		// The fake shows a document as a message too: its name and caption.
		if got := messages(fk, dm, core.KindContinuation); len(got) != 2 || !strings.Contains(got[0], "attached as a file") ||
			!strings.Contains(got[0], "no play") || !strings.HasPrefix(got[1], "[file ") {
			t.Errorf("messages %q, want the final's tail, then the document", got)
		}
	})
}

// TestDispatchDeliveringBy: an event counts against the adapter that still
// owes one of its operations, until the platform confirms it.
func TestDispatchDeliveringBy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fk := newFake(core.Capabilities{})
		r := newRig(t, fk, openStore(t), delivery.OutboxOptions{})
		id := r.newSession("backlog", dm)
		r.settle()
		fk.FailNext("send", errors.New("502 Bad Gateway"))
		r.post(id, "the answer")
		synctest.Wait()
		if got := r.d.DeliveringBy(); !maps.Equal(got, map[core.AdapterName]int{"fake": 1}) {
			t.Errorf("while the send is retried: %v, want fake: 1", got)
		}
		r.settle()
		if got := r.d.DeliveringBy(); len(got) != 0 {
			t.Errorf("after delivery: %v, want none", got)
		}
	})
}
