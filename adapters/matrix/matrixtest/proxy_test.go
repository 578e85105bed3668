package matrixtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// respError returns the homeserver's error in err, failing the test when
// err is not one.
func respError(t *testing.T, err error) (status int, e *mautrix.RespError) {
	t.Helper()
	var he mautrix.HTTPError
	if !errors.As(err, &he) || he.RespError == nil || he.Response == nil {
		t.Fatalf("want a homeserver error, got %v", err)
	}
	return he.Response.StatusCode, he.RespError
}

func sendText(cli *mautrix.Client, room id.RoomID, text string) (id.EventID, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	resp, err := cli.SendText(ctx, room, text)
	if err != nil {
		return "", err
	}
	return resp.EventID, nil
}

// retryAfter returns retry_after_ms of an M_LIMIT_EXCEEDED error.
func retryAfter(t *testing.T, err error) time.Duration {
	t.Helper()
	status, e := respError(t, err)
	if status != 429 || e.ErrCode != "M_LIMIT_EXCEEDED" || e.Err != "Too Many Requests" {
		t.Fatalf("want 429 M_LIMIT_EXCEEDED Too Many Requests, got %d %s %q", status, e.ErrCode, e.Err)
	}
	ms, ok := e.ExtraData["retry_after_ms"].(float64)
	if !ok {
		t.Fatalf("no retry_after_ms in %v", e.ExtraData)
	}
	return time.Duration(ms) * time.Millisecond
}

// Through the proxy with Synapse's default-like limit, an account sends a
// burst of events and the next one is refused with retry_after_ms; typing
// and membership are not limited, and another account has its own bucket.
func TestProxyMessageLimit(t *testing.T) {
	hs := Dendrite(t)
	px := NewProxy(t, hs.URL)
	alice := NewPerson(t, px.URL, hs.Register(t, "alice"))
	bob := hs.Register(t, "bob")
	room := alice.CreateRoom(t, "Limited", bob.ID)
	px.SetMessageLimit(0.2, 3)
	px.ResetCounts()

	start := time.Now()
	first := alice.Send(t, room, "one")
	alice.Edit(t, room, first, "one, edited")
	alice.SetRoomName(t, room, "Limited ⏳")
	_, err := sendText(alice.Client, room, "four")
	// The bucket is free again one interval (5 s) after the first send,
	// which happened after start.
	if wait := retryAfter(t, err); wait > 5*time.Second || wait < 5*time.Second-time.Since(start) {
		t.Fatalf("retry_after_ms %v, want 5s less the time since the first send", wait)
	}
	for _, what := range []string{"redaction", "reaction"} {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		var err error
		if what == "redaction" {
			_, err = alice.Client.RedactEvent(ctx, room, first)
		} else {
			_, err = alice.Client.SendReaction(ctx, room, first, "👍")
		}
		cancel()
		if err == nil || !IsMatrixError(err, "M_LIMIT_EXCEEDED") {
			t.Fatalf("%s over the limit: %v, want M_LIMIT_EXCEEDED", what, err)
		}
	}
	// Not counted by rc_message: typing and membership. Counted below: 4
	// messages (one, four, the reaction, bob's), 2 of them forwarded.
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if _, err := alice.Client.UserTyping(ctx, room, true, 10*time.Second); err != nil {
		t.Fatalf("typing under the limit: %v", err)
	}
	bobCli := bob.Client(t, px.URL)
	if _, err := bobCli.JoinRoomByID(ctx, room); err != nil {
		t.Fatalf("join: %v", err)
	}
	if _, err := sendText(bobCli, room, "bob's own bucket"); err != nil {
		t.Fatalf("another account limited: %v", err)
	}

	c := px.Counts()
	want := map[Kind]int{KindMessage: 4, KindEdit: 1, KindState: 1, KindRedaction: 1, KindTyping: 1}
	for k, n := range want {
		if c.Requests[k] != n {
			t.Errorf("%s requests: %d, want %d (all %v)", k, c.Requests[k], n, c.Requests)
		}
	}
	if c.Limited != 3 {
		t.Errorf("limited %d, want 3", c.Limited)
	}
	if c.Forwarded[KindMessage] != 2 || c.Forwarded[KindEdit] != 1 || c.Forwarded[KindRedaction] != 0 {
		t.Errorf("forwarded %v, want 2 messages, 1 edit, no redaction", c.Forwarded)
	}
	if c.Accepted[KindMessage] != 2 || c.Accepted[KindEdit] != 1 || c.Accepted[KindState] != 1 || c.Accepted[KindTyping] != 1 {
		t.Errorf("accepted %v, want 2 messages, 1 edit, 1 state, 1 typing", c.Accepted)
	}
	// The refused events never reached the homeserver.
	alice.WaitFor(t, room, textIs("bob's own bucket"), seen)
	for _, evt := range alice.Events(room) {
		if Text(evt) == "four" || evt.Type == event.EventReaction || evt.Type == event.EventRedaction {
			t.Errorf("a refused event reached the room: %s %q", evt.Type.Type, Text(evt))
		}
	}
}

// LimitNext forces M_LIMIT_EXCEEDED with the given retry_after_ms on the
// next requests of a kind only, then lets them through.
func TestProxyLimitNext(t *testing.T) {
	hs := Dendrite(t)
	px := NewProxy(t, hs.URL)
	alice := NewPerson(t, px.URL, hs.Register(t, "alice"))
	room := alice.CreateRoom(t, "Faults")
	px.LimitNext(KindEdit, 2, 1234*time.Millisecond)

	msg := alice.Send(t, room, "not an edit")
	for range 2 {
		c := &event.MessageEventContent{MsgType: event.MsgText, Body: "edited"}
		c.SetEdit(msg)
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		_, err := alice.Client.SendMessageEvent(ctx, room, event.EventMessage, c)
		cancel()
		if wait := retryAfter(t, err); wait != 1234*time.Millisecond {
			t.Fatalf("retry_after_ms %v, want 1234ms", wait)
		}
	}
	edit := alice.Edit(t, room, msg, "edited at last")
	alice.WaitFor(t, room, func(e *event.Event) bool { return e.ID == edit }, seen)
	if c := px.Counts(); c.Limited != 2 || c.Requests[KindEdit] != 3 || c.Forwarded[KindEdit] != 1 {
		t.Fatalf("counts %+v, want 3 edits, 2 limited, 1 forwarded", c)
	}
}

// SlowNext: the homeserver stores the event, the answer comes after the
// client's deadline; the client's retry with the same transaction id gets
// the same event, and the room holds it once.
func TestProxySlowNext(t *testing.T) {
	hs := Dendrite(t)
	px := NewProxy(t, hs.URL)
	alice := NewPerson(t, px.URL, hs.Register(t, "alice"))
	room := alice.CreateRoom(t, "Slow")
	px.SlowNext(KindMessage, 1, time.Hour)

	content := &event.MessageEventContent{MsgType: event.MsgText, Body: "once"}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := alice.Client.SendMessageEvent(ctx, room, event.EventMessage, content, mautrix.ReqSendEvent{TransactionID: "txn-once"})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow send: %v, want the client's deadline", err)
	}
	stored := alice.WaitFor(t, room, textIs("once"), seen)

	ctx, cancel = context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	resp, err := alice.Client.SendMessageEvent(ctx, room, event.EventMessage, content, mautrix.ReqSendEvent{TransactionID: "txn-once"})
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if resp.EventID != stored.ID {
		t.Fatalf("retry with the same transaction id gave %s, want %s", resp.EventID, stored.ID)
	}
	after := alice.Send(t, room, "after")
	alice.WaitFor(t, room, func(e *event.Event) bool { return e.ID == after }, seen)
	n := 0
	for _, evt := range alice.Events(room) {
		if Text(evt) == "once" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the room holds %d copies of the message, want 1", n)
	}
	// The homeserver accepted the slow send (its answer came too late),
	// the retry (from its transaction cache) and the last message.
	if c := px.Counts(); c.Requests[KindMessage] != 3 || c.Accepted[KindMessage] != 3 {
		t.Fatalf("counts %+v, want 3 message requests, 3 accepted", c)
	}
}

// The injected M_FORBIDDEN answers are the ones Dendrite gives in the real
// situations: a redaction below the redact power level, and any request in
// a room the account has left.
func TestProxyFaultsMatchDendrite(t *testing.T) {
	hs := Dendrite(t)
	px := NewProxy(t, hs.URL)
	alice := NewPerson(t, hs.URL, hs.Register(t, "alice"))
	bob := NewPerson(t, hs.URL, hs.Register(t, "bob"))
	room := alice.CreateRoom(t, "Powers", bob.User.ID)
	bob.Join(t, room)
	msg := alice.Send(t, room, "alice's message")
	bob.WaitFor(t, room, func(e *event.Event) bool { return e.ID == msg }, seen)

	// Real: bob (power 0) may not redact alice's message.
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	_, realErr := bob.Client.RedactEvent(ctx, room, msg)
	realStatus, real := respError(t, realErr)
	// Injected: alice (power 100) through the proxy is refused the same way.
	px.ForbidRedactions(1)
	aliceViaProxy := alice.User.Client(t, px.URL)
	_, fakeErr := aliceViaProxy.RedactEvent(ctx, room, msg)
	fakeStatus, fake := respError(t, fakeErr)
	t.Logf("redaction refused: Dendrite %d %s %q; proxy %d %s %q", realStatus, real.ErrCode, real.Err, fakeStatus, fake.ErrCode, fake.Err)
	if fakeStatus != realStatus || fake.ErrCode != real.ErrCode || !errors.Is(fakeErr, mautrix.MForbidden) {
		t.Fatalf("proxy answers %d %s, Dendrite %d %s", fakeStatus, fake.ErrCode, realStatus, real.ErrCode)
	}
	// Only the next one: alice's own redaction then goes through.
	if _, err := aliceViaProxy.RedactEvent(ctx, room, msg); err != nil {
		t.Fatalf("second redaction: %v", err)
	}

	// Real: bob left the room and writes in it.
	bob.Leave(t, room)
	_, realErr = sendText(bob.Client, room, "still here?")
	realStatus, real = respError(t, realErr)
	_, realTypingErr := bob.Client.UserTyping(ctx, room, true, time.Second)
	// Injected: the room vanishes for alice, who is still in it.
	px.VanishRoom(room)
	_, fakeErr = sendText(aliceViaProxy, room, "still here?")
	fakeStatus, fake = respError(t, fakeErr)
	t.Logf("room left: Dendrite %d %s %q (typing: %v); proxy %d %s %q", realStatus, real.ErrCode, real.Err, realTypingErr, fakeStatus, fake.ErrCode, fake.Err)
	if fakeStatus != realStatus || fake.ErrCode != real.ErrCode {
		t.Fatalf("proxy answers %d %s, Dendrite %d %s", fakeStatus, fake.ErrCode, realStatus, real.ErrCode)
	}
	if _, err := aliceViaProxy.UserTyping(ctx, room, true, time.Second); !IsMatrixError(err, real.ErrCode) {
		t.Fatalf("typing in the vanished room: %v", err)
	}
	// Other rooms are unaffected.
	other := alice.CreateRoom(t, "Elsewhere")
	if _, err := sendText(aliceViaProxy, other, "fine"); err != nil {
		t.Fatalf("another room: %v", err)
	}
}
