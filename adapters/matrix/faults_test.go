package matrix_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/parley-chat/parley/adapters/matrix"
	"github.com/parley-chat/parley/adapters/matrix/matrixtest"
	"github.com/parley-chat/parley/core"
)

// proxied is an adapter for w's bot that talks to the homeserver through a
// matrixtest.Proxy.
func (w *world) proxied(t *testing.T) (*matrix.Adapter, *matrixtest.Proxy) {
	t.Helper()
	p := matrixtest.NewProxy(t, w.hs.URL)
	a, err := matrix.New(matrix.Options{Homeserver: p.URL, UserID: w.bot.ID, AccessToken: w.bot.AccessToken,
		Allowed: []string{string(w.ann.User.ID)}, Authorizer: admit(w.ann.User.ID), Cursors: w.store, Leases: w.store, Files: w.files, HTTPClient: &http.Client{Timeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	return a, p
}

// messagesFrom are the bodies of the sender's messages in the room, as the
// person sees them.
func messagesFrom(p *matrixtest.Person, room id.RoomID, sender id.UserID) []string {
	var out []string
	for _, ev := range p.Events(room) {
		if ev.Type == event.EventMessage && ev.Sender == sender && matrixtest.ReplaceOf(ev) == "" {
			out = append(out, matrixtest.Text(ev))
		}
	}
	return out
}

// TestSendRetriedAfterTimeoutPostsOnce: the homeserver made the event but
// its answer came too late; the outbox's retry of the same logical send
// (same Key) returns that event instead of posting another.
func TestSendRetriedAfterTimeoutPostsOnce(t *testing.T) {
	w := newWorld(t)
	a, proxy := w.proxied(t)
	b, err := a.Bind(t.Context(), core.Session{ID: "S1", Title: "Once", Status: core.StatusIdle})
	if err != nil {
		t.Fatal(err)
	}
	room := id.RoomID(b.Place.Chat)
	w.ann.WaitInvite(t, w.bot.ID, 30*time.Second)
	w.ann.Join(t, room)

	proxy.SlowNext(matrixtest.KindMessage, 1, 2*time.Second)
	made := proxy.Counts().Accepted[matrixtest.KindMessage]
	m := core.OutMessage{Kind: core.KindAssistant, Text: "exactly once", Key: "S1/post/7"}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, err = a.Send(ctx, b.Place, m)
	cancel()
	if err == nil || core.IsPermanent(err) {
		t.Fatalf("a send past its deadline: %v, want a transient error", err)
	}
	// The retry comes once the homeserver made the event, as the outbox's
	// (a second or more later) does: on a loaded machine Dendrite can take
	// longer than the deadline, and a retry racing a request with the same
	// transaction id that it is still working on is made a second event —
	// the homeserver's race, not what this test is about.
	deadline := time.Now().Add(30 * time.Second)
	for proxy.Counts().Accepted[matrixtest.KindMessage] == made {
		if time.Now().After(deadline) {
			t.Fatal("the homeserver did not complete the first request")
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	ref, err := a.Send(t.Context(), b.Place, m)
	if err != nil {
		t.Fatal(err)
	}
	w.ann.WaitFor(t, room, func(e *event.Event) bool { return e.ID == id.EventID(ref.ID) }, 30*time.Second)
	// A later message shows that nothing else is still on its way.
	if _, err := a.Send(t.Context(), b.Place, core.OutMessage{Kind: core.KindAssistant, Text: "the end", Key: "S1/post/8"}); err != nil {
		t.Fatal(err)
	}
	w.ann.WaitFor(t, room, func(e *event.Event) bool { return matrixtest.Text(e) == "the end" }, 30*time.Second)
	n := 0
	for _, body := range messagesFrom(w.ann, room, w.bot.ID) {
		if body == "exactly once" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the message shows %d times, want once", n)
	}
}

// TestRedactionNeedsPower: in a room a person created, the bot redacts
// its own messages but not the person's, and asks the homeserver nothing
// for those (core.ErrNoCall: the outbox takes it as done, without an error
// log); in a room it created it redacts both.
func TestRedactionNeedsPower(t *testing.T) {
	w := newWorld(t)
	a, proxy := w.proxied(t)
	theirs := w.ann.CreateRoom(t, "Ann's", w.bot.ID)
	ctx := t.Context()
	if _, err := w.bot.Client(t, w.hs.URL).JoinRoomByID(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	joinedBy(t, w.ann, theirs, w.bot.ID, event.MembershipJoin)
	hers := w.ann.Send(t, theirs, "a person's message")
	mine, err := a.Send(ctx, core.Place{Chat: string(theirs)}, core.OutMessage{Kind: core.KindNotice, Text: "transient"})
	if err != nil {
		t.Fatal(err)
	}
	w.ann.WaitFor(t, theirs, func(e *event.Event) bool { return e.ID == id.EventID(mine.ID) }, 30*time.Second)

	proxy.ResetCounts()
	err = a.Delete(ctx, core.MessageRef{Adapter: matrix.Name, Place: core.Place{Chat: string(theirs)}, ID: string(hers)})
	if !errors.Is(err, core.ErrNoCall) {
		t.Errorf("Delete of a person's message without power: %v, want core.ErrNoCall (skipped without a call or an error log)", err)
	}
	if n := proxy.Counts().Requests[matrixtest.KindRedaction]; n != 0 {
		t.Errorf("%d redactions asked without the power to redact", n)
	}
	if err := a.Delete(ctx, mine); err != nil {
		t.Errorf("Delete of the bot's own message: %v", err)
	}
	w.ann.WaitFor(t, theirs, func(e *event.Event) bool {
		return e.Type == event.EventRedaction && e.Redacts == id.EventID(mine.ID)
	}, 30*time.Second)

	// Nor can it rename the room: the status is not shown, and the room
	// is told once what would let it be.
	proxy.ResetCounts()
	for _, st := range []core.Status{core.StatusWorking, core.StatusIdle} {
		if _, err := a.ShowStatus(ctx, core.Binding{Adapter: matrix.Name, Place: core.Place{Chat: string(theirs)}},
			core.StatusView{Title: "Ann's", Status: st}); err != nil {
			t.Errorf("ShowStatus without the power to rename: %v", err)
		}
	}
	if n := proxy.Counts().Requests[matrixtest.KindState]; n != 0 {
		t.Errorf("%d state events asked without the power to rename the room", n)
	}
	w.ann.WaitFor(t, theirs, func(e *event.Event) bool { return strings.Contains(matrixtest.Text(e), "power level 50") }, 30*time.Second)

	b, err := a.Bind(ctx, core.Session{ID: "S2", Title: "Bot's", Status: core.StatusIdle})
	if err != nil {
		t.Fatal(err)
	}
	ours := id.RoomID(b.Place.Chat)
	w.ann.WaitInvite(t, w.bot.ID, 30*time.Second)
	w.ann.Join(t, ours)
	theirMsg := w.ann.Send(t, ours, "delete me")
	if err := a.Delete(ctx, core.MessageRef{Adapter: matrix.Name, Place: b.Place, ID: string(theirMsg)}); err != nil {
		t.Errorf("Delete of a person's message in the bot's room: %v", err)
	}
	w.ann.WaitFor(t, ours, func(e *event.Event) bool { return e.Type == event.EventRedaction && e.Redacts == theirMsg }, 30*time.Second)
	asks := 0
	for _, body := range messagesFrom(w.ann, theirs, w.bot.ID) {
		if strings.Contains(body, "power level 50") {
			asks++
		}
	}
	if asks != 1 {
		t.Errorf("the room was asked for power %d times, want once", asks)
	}
}

// TestRemovedFromRoom: once a person kicks the bot, a send there is
// core.ErrThreadGone, and binding the session again makes a new room with
// the people invited; a 429 is a rate limit for the whole account.
func TestRemovedFromRoom(t *testing.T) {
	w := newWorld(t)
	a, proxy := w.proxied(t)
	room := w.ann.CreateRoom(t, "Kick", w.bot.ID)
	if _, err := w.bot.Client(t, w.hs.URL).JoinRoomByID(t.Context(), room); err != nil {
		t.Fatal(err)
	}
	joinedBy(t, w.ann, room, w.bot.ID, event.MembershipJoin)
	w.ann.Kick(t, room, w.bot.ID)
	_, err := a.Send(t.Context(), core.Place{Chat: string(room)}, core.OutMessage{Text: "anyone?"})
	if !errors.Is(err, core.ErrThreadGone) {
		t.Fatalf("send after a kick: %v, want core.ErrThreadGone", err)
	}
	b, err := a.Bind(t.Context(), core.Session{ID: "S3", Title: "Again", Status: core.StatusWorking})
	if err != nil {
		t.Fatal(err)
	}
	again := w.ann.WaitInvite(t, w.bot.ID, 30*time.Second)
	if string(again) != b.Place.Chat || b.Shown != (core.StatusView{Title: "Again", Status: core.StatusWorking}) {
		t.Errorf("Bind = %+v, invite to %s", b, again)
	}
	w.ann.Join(t, again)
	if name := w.ann.WaitRoomName(t, again, func(n string) bool { return n != "" }, 30*time.Second); name != "⏳ Again" {
		t.Errorf("the new room is named %q", name)
	}

	proxy.LimitNext(matrixtest.KindMessage, 1, 1500*time.Millisecond)
	_, err = a.Send(t.Context(), b.Place, core.OutMessage{Text: "limited"})
	var rl *core.RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter != 1500*time.Millisecond || rl.Scope != core.ScopeAccount {
		t.Errorf("send refused with M_LIMIT_EXCEEDED: %v, want a rate limit of 1.5s for the account", err)
	}
}

// TestPasswordLoginKept: with a password the bot logs in once; the token
// is kept in the store and reused by the next start.
func TestPasswordLoginKept(t *testing.T) {
	w := newWorld(t)
	opts := func() matrix.Options {
		return matrix.Options{Homeserver: w.hs.URL, UserID: w.bot.ID, Password: w.bot.Password, Cursors: w.store, Leases: w.store, Authorizer: admit(w.ann.User.ID),
			HTTPClient: &http.Client{Timeout: time.Minute}}
	}
	a, err := matrix.New(opts())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	first, _ := w.store.Cursor(t.Context(), "matrix.login")
	if first == "" || !strings.Contains(first, "device_id") {
		t.Fatalf("no login kept: %q", first)
	}
	b, _ := matrix.New(opts())
	if err := b.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	if again, _ := w.store.Cursor(t.Context(), "matrix.login"); again != first {
		t.Error("the second start logged in again instead of reusing the kept token")
	}

	bad := opts()
	bad.Password = "wrong"
	bad.Cursors = newCursors()
	c, _ := matrix.New(bad)
	if err := c.Check(t.Context()); err == nil || !strings.Contains(err.Error(), "password") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("Check with a wrong password: %v", err)
	}
	other := opts()
	other.Password, other.AccessToken, other.UserID = "", w.bot.AccessToken, id.UserID("@someone:"+w.hs.ServerName)
	d, _ := matrix.New(other)
	if err := d.Check(t.Context()); err == nil || !strings.Contains(err.Error(), "belongs to "+string(w.bot.ID)) {
		t.Errorf("Check with another account's token: %v", err)
	}
}

// TestTypingRenewedAndStopped: core renews the typing indicator every few
// seconds; a notification lasts longer, so renewals in between make no
// call, and the turn's "done" message ends it.
func TestTypingRenewedAndStopped(t *testing.T) {
	w := newWorld(t)
	a, proxy := w.proxied(t)
	b, err := a.Bind(t.Context(), core.Session{ID: "S1", Title: "Typing", Status: core.StatusWorking})
	if err != nil {
		t.Fatal(err)
	}
	typing := func() int { return proxy.Counts().Requests[matrixtest.KindTyping] }
	if err := a.Typing(t.Context(), b.Place); err != nil {
		t.Fatal(err)
	}
	if err := a.Typing(t.Context(), b.Place); !errors.Is(err, core.ErrNoCall) {
		t.Errorf("a renewal while the notification lasts: %v, want core.ErrNoCall", err)
	}
	if n := typing(); n != 1 {
		t.Errorf("%d typing calls, want 1", n)
	}
	if _, err := a.Send(t.Context(), b.Place, core.OutMessage{Kind: core.KindTurnDone, Text: "✅ Done"}); err != nil {
		t.Fatal(err)
	}
	if n := typing(); n != 2 {
		t.Errorf("%d typing calls after the turn's end, want 2 (the stop)", n)
	}
	if err := a.Typing(t.Context(), b.Place); err != nil {
		t.Errorf("typing in the next turn: %v", err)
	}
}

// TestFileWithoutAuthenticatedMedia: a homeserver from before Matrix 1.11
// answers authenticated media 404 M_UNRECOGNIZED; files then come through
// /_matrix/media/v3, which it still serves, instead of being declined.
func TestFileWithoutAuthenticatedMedia(t *testing.T) {
	w := newWorld(t)
	a, proxy := w.proxied(t)
	proxy.WithoutAuthenticatedMedia()
	h := newHandler(w.ann.User.ID)
	run(t, a, h)
	room := w.ann.CreateRoom(t, "Old media", w.bot.ID)
	h.wait(t, "the session", func(c core.Command) bool { return c.Kind == core.CreateSession })
	joinedBy(t, w.ann, room, w.bot.ID, event.MembershipJoin)
	for _, name := range []string{"one.txt", "two.txt"} {
		w.ann.UploadFile(t, room, name, "text/plain", []byte("the text of "+name))
		c := h.wait(t, name, func(c core.Command) bool {
			return c.Kind == core.SendMessage && len(c.Attachments) > 0 && c.Attachments[0].Name == name
		})
		if data, err := os.ReadFile(c.Attachments[0].Path); err != nil || string(data) != "the text of "+name {
			t.Errorf("%s holds %q (%v)", name, data, err)
		}
	}
	if n := h.count(func(c core.Command) bool { return c.Kind == core.Notice && strings.Contains(c.Text, "Could not fetch") }); n != 0 {
		t.Errorf("%d files declined", n)
	}
}
