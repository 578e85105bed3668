package e2e

import (
	"testing"

	"maunium.net/go/mautrix/event"
)

// TestMatrixInvites: through parley serve against a real Dendrite, an
// allowed person's invite makes the bot join and the room a session titled
// by the room's name; a stranger's invite is declined — the bot leaves the room — and starts
// nothing: no session, nothing in the inbox, no word to the agent.
func TestMatrixInvites(t *testing.T) {
	t.Parallel()
	st := newMXStack(t, mxOptions{})
	room, session := st.room("Plans")
	s, _ := st.sessionAt(room)
	if s.Title != "Plans" {
		t.Errorf("the session of room Plans is titled %q, want the room's name", s.Title)
	}

	spam := st.eve.CreateRoom(t, "Spam", st.bot.ID)
	st.eve.WaitMembership(t, spam, st.bot.ID, event.MembershipLeave, mxWait)
	st.idle()
	if n := len(st.sessions()); n != 1 {
		t.Errorf("%d sessions after the stranger's invite, want only %s", n, session)
	}
	if _, ok := st.sessionAt(spam); ok {
		t.Error("the stranger's room became a session")
	}
	if n := len(st.inbox()); n != 0 {
		t.Errorf("%d messages in the inbox, want none: nobody wrote", n)
	}
	for _, ev := range st.eve.Events(spam) {
		if ev.Sender == st.bot.ID && ev.Type == event.EventMessage {
			t.Errorf("the bot said %q in the stranger's room", mxMsgType(ev))
		}
	}
	select {
	case n := <-st.agent.notes:
		t.Errorf("the agent was notified: %+v", n)
	default:
	}
}
