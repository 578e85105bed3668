package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/parley-chat/parley/adapters/matrix/matrixtest"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
)

// TestMatrixKilledMidStream: a child `parley serve` with the Matrix adapter
// (configured by PARLEY_MATRIX_* variables, against a real Dendrite behind
// a matrixtest.Proxy) is killed with SIGKILL while an agent streams its
// output into a session's room and while assistant messages wait: from the
// third answer on, the homeserver holds every message the bot sends (the
// proxy's HoldNext), so the third is in flight at the kill and the later
// ones wait behind it in the outbox, which runs one operation at a time
// per room (or, should the held send time out first, are held in flight
// too). Ann writes once just before the kill and once while parley is
// down. The homeserver completes the held sends after the kill, as one
// still busy with them would. After a restart the agent streams on: the
// output event posted before the kill is edited further (no second output
// message), and ends showing the whole final text; every assistant message
// arrives exactly once — a send cut off by the kill is retried under the
// same transaction id, and the restarted adapter finds the event the
// homeserver made for it — and both of Ann's messages reach the agent
// exactly once.
//
// The hold, not the machine's speed, is what keeps answers undelivered at
// the kill; the account's message budget (60 a minute in bursts of 10)
// paces the restarted daemon's catch-up.
func TestMatrixKilledMidStream(t *testing.T) {
	t.Parallel()
	st := newMXStackConfig(t, mxOptions{proxy: true})
	matrixConfig(&st.cfg).MessagesPerMinute, matrixConfig(&st.cfg).MessageBurst = 60, 10
	env := st.mxEnv()
	dir, listen := t.TempDir(), freeAddr(t)
	d := startDaemon(t, dir, listen, env...)
	a := subscribedAgent(t, listen)

	lobby := st.ann.CreateRoom(t, "Lobby", st.bot.ID)
	st.ann.WaitMembership(t, lobby, st.bot.ID, event.MembershipJoin, mxWait)
	st.ann.Send(t, lobby, "!new Stream")
	room := st.ann.WaitInvite(t, st.bot.ID, mxWait)
	st.ann.Join(t, room)
	st.ann.Send(t, room, "tell me everything")
	read, watermark := slRead(t, a, "", "tell me everything")
	session := core.SessionID(read["tell me everything"])

	const steps = 100
	final := slStream(0, steps)
	output := func(a *agent, i int) {
		t.Helper()
		a.call(t, "session.output", map[string]any{"session_id": string(session), "content": slStream(0, i)}, nil)
	}
	for i := 1; i <= 40; i++ {
		output(a, i)
	}
	before := st.mxShowing(st.ann, room, "(step 039)")
	editsBefore := len(mxEdits(st.ann, room, before.ID))

	// Two answers go out; the homeserver then holds the bot's messages
	// until after the kill, while the agent posts ten more and streams on.
	const n = 12
	answer := func(k int) string { return fmt.Sprintf("Queued answer %d of %d", k, n) }
	post := func(k int) {
		t.Helper()
		a.call(t, "chat.assistant.post", map[string]any{"session_id": string(session), "content": answer(k)}, nil)
	}
	delivered := func() int {
		c := 0
		for k := 1; k <= n; k++ {
			c += len(st.mxTexts(room, answer(k)))
		}
		return c
	}
	post(1)
	post(2)
	servetest.PollUntil(t, mxWait, "two answers delivered", func() bool { return delivered() >= 2 }, nil)
	// Every message from here on, not just the next: the third answer's
	// send, should it time out and be retried before the kill, is held
	// again rather than let through.
	st.proxy.HoldNext(matrixtest.KindMessage, -1)
	for k := 3; k <= n; k++ {
		post(k)
	}
	for i := 41; i <= 50; i++ {
		output(a, i)
	}
	servetest.PollUntil(t, mxWait, "the homeserver to hold the third answer", func() bool { return st.proxy.Held() > 0 }, nil)
	st.ann.Send(t, room, "one more thing")
	d.kill()
	atKill := delivered()
	t.Logf("killed with %d of %d answers delivered and %d sends held, the output edited %d times",
		atKill, n, st.proxy.Held(), len(mxEdits(st.ann, room, before.ID)))
	if atKill != 2 {
		t.Fatalf("%d of %d answers delivered at the kill, want the 2 sent before the homeserver held the rest", atKill, n)
	}
	// The homeserver finishes what the killed process asked.
	st.proxy.ClearFaults()
	st.proxy.ReleaseHeld()
	st.ann.Send(t, room, "are you still there?")

	d = startDaemon(t, dir, listen, env...)
	a = subscribedAgent(t, listen)
	slRead(t, a, watermark, "one more thing", "are you still there?")
	for i := 51; i <= steps; i++ {
		output(a, i)
	}
	a.call(t, "chat.assistant.post", map[string]any{"session_id": string(session), "content": "That is everything."}, nil)
	a.call(t, "loop.yield_turn", map[string]any{"session_id": string(session)}, nil)

	want := mxPlain(final)
	servetest.PollUntil(t, 3*time.Minute, "the final text and every answer after the restart", func() bool {
		if st.mxShownOutput(st.ann, room) != want || len(st.mxTexts(room, "That is everything.")) == 0 {
			return false
		}
		for k := 1; k <= n; k++ {
			if len(st.mxTexts(room, answer(k))) == 0 {
				return false
			}
		}
		return true
	}, nil)
	servetest.PollUntil(t, 2*time.Minute, "the restarted daemon's outbox to be idle", func() bool {
		return metric(t, listen, "parley_outbox_queue_depth")+metric(t, listen, "parley_outbox_in_flight") == 0
	}, nil)

	outs := st.mxOutputs(st.ann, room)
	if len(outs) != 1 || outs[0].ID != before.ID {
		var ids []string
		for _, ev := range outs {
			ids = append(ids, ev.ID.String())
		}
		t.Errorf("output messages %v, want only %s, the one posted before the kill, edited further", ids, before.ID)
	}
	if after := len(mxEdits(st.ann, room, before.ID)); after <= editsBefore {
		t.Errorf("the output message was edited %d times before the kill and %d in all: the restarted daemon did not edit it", editsBefore, after)
	}
	for k := 1; k <= n; k++ {
		if got := len(st.mxTexts(room, answer(k))); got != 1 {
			t.Errorf("%q shown %d times, want exactly once", answer(k), got)
		}
	}
	seen := map[string]bool{}
	for _, ev := range mxMessages(st.ann, room, st.bot.ID) {
		text := matrixtest.Text(ev)
		if mxRedacted(st.ann, room, ev.ID) {
			t.Logf("the bot redacted its copy %s of %.60q (a duplicate the homeserver made)", ev.ID, text)
			continue
		}
		if strings.HasPrefix(text, "📭") {
			// The presence notice goes out for each message that arrives
			// while no agent listens (here: before the agent reconnects
			// after the restart), each replacing the one before.
			continue
		}
		if seen[text] {
			t.Errorf("the bot posted %.60q twice", text)
		}
		seen[text] = true
	}
	var r readResult
	a.call(t, "chat_read_since", map[string]any{"after_id": watermark}, &r)
	count := r.said()
	for _, text := range []string{"one more thing", "are you still there?"} {
		if count[text] != 1 {
			t.Errorf("the agent has %q %d times, want once", text, count[text])
		}
	}
}

// mxTexts are the bot's messages in room whose text, as posted, is text.
func (st *mxStack) mxTexts(room id.RoomID, text string) []*event.Event {
	var out []*event.Event
	for _, ev := range st.ann.Events(room) {
		// A copy the bot redacted (a homeserver's duplicate of a send
		// retried while its first attempt was still in flight) shows as
		// "message deleted", not as the text.
		if ev.Sender == st.bot.ID && ev.Type == event.EventMessage && matrixtest.ReplaceOf(ev) == "" && matrixtest.Text(ev) == text && !mxRedacted(st.ann, room, ev.ID) {
			out = append(out, ev)
		}
	}
	return out
}
