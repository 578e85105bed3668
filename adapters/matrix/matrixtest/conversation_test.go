package matrixtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// How long a test waits for a homeserver to deliver what it should; far
// more than it takes, so that only a real failure reaches it.
const seen = 20 * time.Second

func textIs(text string) func(*event.Event) bool {
	return func(evt *event.Event) bool {
		return evt.Type == event.EventMessage && Text(evt) == text
	}
}

// Two people on a real Dendrite: a room with a name, an invite, a join,
// messages, a reply, an edit, a reaction, a redaction, a renamed room and
// a file downloaded through authenticated media — what the adapter relies
// on, seen from the other side.
func TestConversation(t *testing.T) {
	hs := Dendrite(t)
	alice := NewPerson(t, hs.URL, hs.Register(t, "alice"))
	bob := NewPerson(t, hs.URL, hs.Register(t, "bob"))

	room := alice.CreateRoom(t, "Planning", bob.User.ID)
	if got := bob.WaitInvite(t, alice.User.ID, seen); got != room {
		t.Fatalf("bob invited to %s, want %s", got, room)
	}
	if bob.RoomName(room) != "Planning" {
		t.Errorf("invited room's name %q, want Planning", bob.RoomName(room))
	}
	bob.Join(t, room)
	alice.WaitMembership(t, room, bob.User.ID, event.MembershipJoin, seen)

	hello := alice.Send(t, room, "hello bob")
	if got := bob.WaitFor(t, room, textIs("hello bob"), seen); got.ID != hello || got.Sender != alice.User.ID {
		t.Fatalf("bob saw %s from %s, want %s from %s", got.ID, got.Sender, hello, alice.User.ID)
	}
	if bob.SeenAt(hello).IsZero() || !alice.SeenAt("$unknown").IsZero() {
		t.Fatalf("SeenAt: %v for a seen event, %v for an unknown one", bob.SeenAt(hello), alice.SeenAt("$unknown"))
	}

	reply := bob.Reply(t, room, hello, "hi alice")
	got := alice.WaitFor(t, room, textIs("hi alice"), seen)
	if c := got.Content.AsMessage(); got.ID != reply || c.RelatesTo.GetReplyTo() != hello {
		t.Fatalf("reply %s in reply to %q, want %s in reply to %s", got.ID, c.RelatesTo.GetReplyTo(), reply, hello)
	}

	edit := alice.Edit(t, room, hello, "hello bob, edited")
	got = bob.WaitFor(t, room, func(e *event.Event) bool { return e.ID == edit }, seen)
	if ReplaceOf(got) != hello || Text(got) != "hello bob, edited" {
		t.Fatalf("edit replaces %q with %q, want %s with the new text", ReplaceOf(got), Text(got), hello)
	}
	if s := bob.Edited(room, hello); s != "hello bob, edited" {
		t.Fatalf("bob reads %q after the edit", s)
	}

	reaction := bob.React(t, room, hello, "1️⃣")
	got = alice.WaitFor(t, room, func(e *event.Event) bool { return e.ID == reaction }, seen)
	if r := got.Content.AsReaction(); r.RelatesTo.Key != "1️⃣" || r.RelatesTo.EventID != hello {
		t.Fatalf("reaction %q to %s, want 1️⃣ to %s", r.RelatesTo.Key, r.RelatesTo.EventID, hello)
	}

	redaction := alice.Redact(t, room, hello)
	got = bob.WaitFor(t, room, func(e *event.Event) bool { return e.ID == redaction }, seen)
	if got.Type != event.EventRedaction || got.Redacts != hello && got.Content.AsRedaction().Redacts != hello {
		t.Fatalf("redaction %s of type %s redacts %q", got.ID, got.Type.Type, got.Redacts)
	}

	bob.Typing(t, room, true)
	alice.WaitTyped(t, room, bob.User.ID, seen)

	// Below the redact power level bob may not delete alice's messages; at
	// 50 he may.
	other := alice.Send(t, room, "to be removed by bob")
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if _, err := bob.Client.RedactEvent(ctx, room, other); !IsMatrixError(err, "M_FORBIDDEN") {
		t.Fatalf("bob's redaction at power 0: %v, want M_FORBIDDEN", err)
	}
	alice.SetPowerLevel(t, room, bob.User.ID, 50)
	bobsRedaction := bob.Redact(t, room, other)
	alice.WaitFor(t, room, func(e *event.Event) bool { return e.ID == bobsRedaction }, seen)

	alice.SetRoomName(t, room, "Planning ✅")
	bob.WaitRoomName(t, room, func(n string) bool { return n == "Planning ✅" }, seen)

	data := []byte("report contents\n")
	file := bob.UploadFile(t, room, "report.txt", "text/plain", data)
	got = alice.WaitFor(t, room, func(e *event.Event) bool { return e.ID == file }, seen)
	c := got.Content.AsMessage()
	if c.MsgType != event.MsgFile || c.Body != "report.txt" {
		t.Fatalf("file event %s %q", c.MsgType, c.Body)
	}
	uri, err := c.URL.Parse()
	if err != nil {
		t.Fatal(err)
	}
	if got := download(t, hs.URL, alice.User, uri); !bytes.Equal(got, data) {
		t.Fatalf("downloaded %q, want %q", got, data)
	}

	bob.Leave(t, room)
	alice.WaitMembership(t, room, bob.User.ID, event.MembershipLeave, seen)
}

// download fetches media through the authenticated endpoint the adapter
// uses, /_matrix/client/v1/media/download.
func download(t *testing.T, hsURL string, u *User, uri id.ContentURI) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		hsURL+"/_matrix/client/v1/media/download/"+uri.Homeserver+"/"+uri.FileID, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+u.AccessToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("download %s: %s %s", uri, resp.Status, body)
	}
	return body
}

// A declined invite is no longer pending: WaitInvite gives the next one.
func TestInviteDeclined(t *testing.T) {
	hs := Dendrite(t)
	alice := NewPerson(t, hs.URL, hs.Register(t, "alice"))
	bob := NewPerson(t, hs.URL, hs.Register(t, "bob"))

	first := alice.CreateRoom(t, "First", bob.User.ID)
	if got := bob.WaitInvite(t, "", seen); got != first {
		t.Fatalf("invited to %s, want %s", got, first)
	}
	bob.Leave(t, first)
	alice.WaitMembership(t, first, bob.User.ID, event.MembershipLeave, seen)
	bob.WaitMembership(t, first, bob.User.ID, event.MembershipLeave, seen)

	second := alice.CreateRoom(t, "Second", bob.User.ID)
	if got := bob.WaitInvite(t, alice.User.ID, seen); got != second {
		t.Fatalf("invited to %s, want %s (the first was declined)", got, second)
	}
	if bob.Joined(first) || bob.Joined(second) {
		t.Fatal("bob joined a room he did not accept")
	}
}

// More events than a sync's default timeline limit (20) arrive between
// two syncs — here all before the person's first sync — and the person
// still sees every one of them, in order.
func TestPersonSeesLongTimelines(t *testing.T) {
	hs := Dendrite(t)
	alice := NewPerson(t, hs.URL, hs.Register(t, "alice"))
	bobUser := hs.Register(t, "bob")
	room := alice.CreateRoom(t, "Busy", bobUser.ID)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if _, err := bobUser.Client(t, hs.URL).JoinRoomByID(ctx, room); err != nil {
		t.Fatal(err)
	}
	var sent []id.EventID
	for i := range 45 {
		sent = append(sent, alice.Send(t, room, fmt.Sprintf("message %d", i)))
	}
	bob := NewPerson(t, hs.URL, bobUser)
	bob.WaitFor(t, room, func(e *event.Event) bool { return e.ID == sent[len(sent)-1] }, seen)
	var got []id.EventID
	for _, evt := range bob.Events(room) {
		if evt.Type == event.EventMessage {
			got = append(got, evt.ID)
		}
	}
	if !slices.Equal(got, sent) {
		t.Fatalf("bob saw %d of the %d messages", len(got), len(sent))
	}
}
