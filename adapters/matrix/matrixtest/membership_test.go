package matrixtest

import (
	"testing"

	"maunium.net/go/mautrix/event"
)

// An invite made after the room exists reaches the invitee like one made
// at creation; a kick is, as the Matrix spec defines it, a leave of the
// member's that another member sent: the kicked account sees the room
// leave its joined rooms.
func TestInviteAndKick(t *testing.T) {
	hs := Dendrite(t)
	alice := NewPerson(t, hs.URL, hs.Register(t, "alice"))
	bob := NewPerson(t, hs.URL, hs.Register(t, "bob"))

	room := alice.CreateRoom(t, "Later")
	alice.Invite(t, room, bob.User.ID)
	if got := bob.WaitInvite(t, alice.User.ID, seen); got != room {
		t.Fatalf("bob invited to %s, want %s", got, room)
	}
	bob.Join(t, room)
	alice.WaitMembership(t, room, bob.User.ID, event.MembershipJoin, seen)
	bob.wait(t, seen, "bob in the room", func() bool { return bob.joined[room] })

	alice.Kick(t, room, bob.User.ID)
	kick := alice.WaitMembership(t, room, bob.User.ID, event.MembershipLeave, seen)
	if kick.Sender != alice.User.ID {
		t.Errorf("bob's leave sent by %s, want alice's kick", kick.Sender)
	}
	bob.wait(t, seen, "bob out of the room", func() bool { return !bob.joined[room] })
	if bob.Joined(room) {
		t.Error("Joined still reports the room bob was kicked from")
	}
}

// IsTyping follows the typing notifications: true while the user types,
// false once the user stopped, whereas WaitTyped remembers that the user
// typed at all.
func TestIsTyping(t *testing.T) {
	hs := Dendrite(t)
	alice := NewPerson(t, hs.URL, hs.Register(t, "alice"))
	bob := NewPerson(t, hs.URL, hs.Register(t, "bob"))
	room := alice.CreateRoom(t, "Typing", bob.User.ID)
	bob.WaitInvite(t, alice.User.ID, seen)
	bob.Join(t, room)
	alice.WaitMembership(t, room, bob.User.ID, event.MembershipJoin, seen)

	if alice.IsTyping(room, bob.User.ID) {
		t.Fatal("bob typing before he typed")
	}
	bob.Typing(t, room, true)
	alice.WaitTyped(t, room, bob.User.ID, seen)
	if !alice.IsTyping(room, bob.User.ID) {
		t.Error("IsTyping false right after bob was seen typing")
	}
	bob.Typing(t, room, false)
	alice.wait(t, seen, "bob stopped typing", func() bool { return !alice.typing[room][bob.User.ID] })
	if alice.IsTyping(room, bob.User.ID) {
		t.Error("IsTyping true after bob stopped")
	}
	alice.WaitTyped(t, room, bob.User.ID, seen) // still remembered
}
