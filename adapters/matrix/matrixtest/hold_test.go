package matrixtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
)

// HoldNext: a held request waits before the homeserver however long the
// client waits; the client's retry with the same transaction id goes
// through meanwhile, and on release the held request is completed too,
// making a second event, as on Dendrite when a retry arrives while the
// first request is still being processed.
func TestProxyHoldNext(t *testing.T) {
	hs := Dendrite(t)
	px := NewProxy(t, hs.URL)
	alice := NewPerson(t, px.URL, hs.Register(t, "alice"))
	room := alice.CreateRoom(t, "Held")
	px.HoldNext(KindMessage, 1)
	px.ResetCounts()

	content := &event.MessageEventContent{MsgType: event.MsgText, Body: "held"}
	send := func(timeout time.Duration) (*mautrix.RespSendEvent, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return alice.Client.SendMessageEvent(ctx, room, event.EventMessage, content, mautrix.ReqSendEvent{TransactionID: "txn-held"})
	}
	if _, err := send(300 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("held send: %v, want the client's deadline", err)
	}
	if n := px.Held(); n != 1 {
		t.Fatalf("Held = %d after the client gave up, want 1", n)
	}
	retry, err := send(callTimeout)
	if err != nil {
		t.Fatalf("retry while the first is held: %v", err)
	}
	alice.WaitFor(t, room, func(e *event.Event) bool { return e.ID == retry.EventID }, seen)

	px.ReleaseHeld()
	if n := px.Held(); n != 0 {
		t.Errorf("Held = %d after ReleaseHeld, want 0", n)
	}
	second := alice.WaitFor(t, room, func(e *event.Event) bool { return Text(e) == "held" && e.ID != retry.EventID }, seen)
	if second.Sender != alice.User.ID {
		t.Errorf("released event sent by %s", second.Sender)
	}
	if c := px.Counts(); c.Requests[KindMessage] != 2 || c.Forwarded[KindMessage] != 2 || c.Accepted[KindMessage] != 2 {
		t.Errorf("counts %+v, want 2 message requests, both forwarded and accepted", c)
	}
}
