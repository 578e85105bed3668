package matrix_test

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/parley-chat/parley/adapters/matrix"
	"github.com/parley-chat/parley/adapters/matrix/matrixtest"
	"github.com/parley-chat/parley/core"
)

// viaProxy is an adapter for w's bot, with w's store, that talks to the
// homeserver through p: a new one stands for parley after a restart.
func (w *world) viaProxy(t *testing.T, p *matrixtest.Proxy) *matrix.Adapter {
	t.Helper()
	a, err := matrix.New(matrix.Options{Homeserver: p.URL, UserID: w.bot.ID, AccessToken: w.bot.AccessToken,
		Allowed: []string{string(w.ann.User.ID)}, Authorizer: admit(w.ann.User.ID), Cursors: w.store, Leases: w.store, Files: w.files, SyncTimeout: 2 * time.Second,
		HTTPClient: &http.Client{Timeout: time.Minute}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// shownCopies are the bot's messages with the text in the room that were
// not redacted, as the person sees them.
func shownCopies(p *matrixtest.Person, room id.RoomID, bot id.UserID, text string) []id.EventID {
	redacted := map[id.EventID]bool{}
	for _, ev := range p.Events(room) {
		if ev.Type == event.EventRedaction {
			redacted[ev.Redacts] = true
		}
	}
	var out []id.EventID
	for _, ev := range p.Events(room) {
		if ev.Type == event.EventMessage && ev.Sender == bot && matrixtest.ReplaceOf(ev) == "" &&
			matrixtest.Text(ev) == text && !redacted[ev.ID] {
			out = append(out, ev.ID)
		}
	}
	return out
}

// killedMidSend runs a first adapter, binds a room the person joins, and
// "kills" the adapter while a keyed send is held before the homeserver:
// the homeserver has the request, the process is gone. It returns the
// room's place.
func killedMidSend(t *testing.T, w *world, p *matrixtest.Proxy, h *handler, m core.OutMessage) core.Place {
	t.Helper()
	a1 := w.viaProxy(t, p)
	stop1 := run(t, a1, h)
	b, err := a1.Bind(t.Context(), core.Session{ID: "S1", Title: "Echo", Status: core.StatusIdle})
	if err != nil {
		t.Fatal(err)
	}
	room := id.RoomID(b.Place.Chat)
	w.ann.WaitInvite(t, w.bot.ID, 30*time.Second)
	w.ann.Join(t, room)
	joinedBy(t, w.ann, room, w.ann.User.ID, event.MembershipJoin)
	// Let the first adapter's sync store a position past the room's
	// creation, as a running parley has.
	mark, err := a1.Send(t.Context(), b.Place, core.OutMessage{Kind: core.KindNotice, Text: "before"})
	if err != nil {
		t.Fatal(err)
	}
	w.ann.WaitFor(t, room, func(e *event.Event) bool { return e.ID == id.EventID(mark.ID) }, 30*time.Second)

	p.HoldNext(matrixtest.KindMessage, 1)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { _, err := a1.Send(ctx, b.Place, m); errc <- err }()
	eventually(t, "the send to be held before the homeserver", func() bool { return p.Held() == 1 })
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a send cut off before the answer succeeded")
	}
	stop1()
	return b.Place
}

// TestReplayAfterRestartSeesEcho: the homeserver completed the send a
// killed parley made, under a transaction cache the replay does not meet
// (see matrixtest.Proxy.HoldNext; also a homeserver restarted, or a cache
// expired while parley was down). The restarted adapter's first sync
// shows the event with its transaction id, and the replay returns it
// without sending.
func TestReplayAfterRestartSeesEcho(t *testing.T) {
	w := newWorld(t)
	p := matrixtest.NewProxy(t, w.hs.URL)
	h := newHandler(w.ann.User.ID)
	m := core.OutMessage{Kind: core.KindAssistant, Text: "Queued answer 4 of 12", Key: "S1/post/4"}
	pl := killedMidSend(t, w, p, h, m)
	room := id.RoomID(pl.Chat)
	p.ReleaseHeld() // the homeserver finishes what the killed process asked
	first := w.ann.WaitFor(t, room, func(e *event.Event) bool { return matrixtest.Text(e) == m.Text }, 30*time.Second)

	a2 := w.viaProxy(t, p)
	if err := a2.Check(t.Context()); err != nil { // as the daemon starts a platform: Check, then Run
		t.Fatal(err)
	}
	run(t, a2, h)
	p.ResetCounts()
	got, err := a2.Send(t.Context(), pl, m)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != string(first.ID) {
		t.Errorf("the replay returned %s, want %s, the event the homeserver made", got.ID, first.ID)
	}
	if n := p.Counts().Requests[matrixtest.KindMessage]; n != 0 {
		t.Errorf("the replay sent %d messages, want none", n)
	}
	end, err := a2.Send(t.Context(), pl, core.OutMessage{Kind: core.KindAssistant, Text: "the end", Key: "S1/post/5"})
	if err != nil {
		t.Fatal(err)
	}
	w.ann.WaitFor(t, room, func(e *event.Event) bool { return e.ID == id.EventID(end.ID) }, 30*time.Second)
	if c := shownCopies(w.ann, room, w.bot.ID, m.Text); len(c) != 1 {
		t.Errorf("the message shows %d times (%v), want once", len(c), c)
	}
}

// TestInFlightDuplicateRedacted: the homeserver is still processing the
// killed parley's send when the restarted one replays it; Dendrite does
// not recognise the retry and makes a second event. The adapter sees the
// first one come in the sync under the same transaction id and redacts
// it, keeping the one its send returned (which core holds).
func TestInFlightDuplicateRedacted(t *testing.T) {
	w := newWorld(t)
	p := matrixtest.NewProxy(t, w.hs.URL)
	h := newHandler(w.ann.User.ID)
	m := core.OutMessage{Kind: core.KindAssistant, Text: "Queued answer 4 of 12", Key: "S1/post/4"}
	pl := killedMidSend(t, w, p, h, m)
	room := id.RoomID(pl.Chat)

	a2 := w.viaProxy(t, p)
	if err := a2.Check(t.Context()); err != nil { // as the daemon starts a platform: Check, then Run
		t.Fatal(err)
	}
	run(t, a2, h)
	kept, err := a2.Send(t.Context(), pl, m)
	if err != nil {
		t.Fatal(err)
	}
	p.ReleaseHeld() // the first request ends only now, after the replay
	w.ann.WaitFor(t, room, func(e *event.Event) bool {
		return e.Type == event.EventRedaction && e.Redacts != "" && e.Redacts != id.EventID(kept.ID)
	}, 30*time.Second)
	c := shownCopies(w.ann, room, w.bot.ID, m.Text)
	if len(c) != 1 || c[0] != id.EventID(kept.ID) {
		t.Errorf("copies shown %v, want only %s, the one the send returned", c, kept.ID)
	}
}
