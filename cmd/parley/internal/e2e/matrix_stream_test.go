package e2e

import (
	"fmt"
	"strings"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/parley-chat/parley/adapters/matrix/matrixtest"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
)

// mxNew has Ann type "!new title" in room; the bot creates a new room for
// the session and invites her, she joins, and the new room and its
// session are returned.
func (st *mxStack) mxNew(room id.RoomID, title string) (id.RoomID, core.SessionID) {
	st.t.Helper()
	st.ann.Send(st.t, room, "!new "+title)
	fresh := st.ann.WaitInvite(st.t, st.bot.ID, mxWait)
	st.ann.Join(st.t, fresh)
	// Until her sync shows the join, the invite looks pending: the next
	// !new must not take it for its own.
	servetest.PollUntil(st.t, mxWait, "Ann's join of the new room", func() bool { return st.ann.Joined(fresh) }, nil)
	var s core.Session
	servetest.PollUntil(st.t, mxWait, "the session of the new room", func() bool {
		var ok bool
		s, ok = st.sessionAt(fresh)
		return ok
	}, nil)
	if s.Title != title {
		st.t.Errorf("the new room's session is titled %q, want %q", s.Title, title)
	}
	return fresh, s.ID
}

// mxOutputs are the bot's messages in room that show streamed output (the
// output message and its continuations: m.notice events whose text has a
// step marker), oldest first.
func (st *mxStack) mxOutputs(p *matrixtest.Person, room id.RoomID) []*event.Event {
	var out []*event.Event
	for _, ev := range mxMessages(p, room, st.bot.ID) {
		if mxMsgType(ev) == event.MsgNotice && strings.Contains(p.Edited(room, ev.ID), "(step ") {
			out = append(out, ev)
		}
	}
	return out
}

// mxShownOutput is the streamed output room shows, across the output
// message and its continuations, without white space (see mxPlain).
func (st *mxStack) mxShownOutput(p *matrixtest.Person, room id.RoomID) string {
	var b strings.Builder
	for _, ev := range st.mxOutputs(p, room) {
		b.WriteString(mxSqueeze(p.Edited(room, ev.ID)))
	}
	return b.String()
}

// TestMatrixPersonAndAgent is issue 10's end-to-end story through parley
// serve against a real Dendrite. Ann types "!new Flaky test" in a room she
// shares with the bot: the bot creates a new room for the session and
// invites her. She asks a question there; the agent is notified over MCP,
// reads it, streams about 8.6k characters of markdown in 43 steps, posts
// an answer and yields. The room shows one output message, posted once and
// then only edited with m.replace while the agent streams, whose text
// (with its continuations, if the final text needs them) is the whole
// final text; the answer once, the turn's one notifying message; the room
// name follows the status (⏳ while working, 💬 after) and the bot is seen
// typing while the agent works; !status answers
// with the turn count; every event stays within 64 KiB.
func TestMatrixPersonAndAgent(t *testing.T) {
	t.Parallel()
	st := newMXStack(t, mxOptions{})
	lobby, _ := st.room("Lobby")
	room, session := st.mxNew(lobby, "Flaky test")
	if room == lobby {
		t.Fatal("!new put the session in the room it was typed in")
	}
	if name := st.ann.WaitRoomName(t, room, func(n string) bool { return n != "" }, mxWait); name != "💬 Flaky test" {
		t.Errorf("the new room is named %q, want %q", name, "💬 Flaky test")
	}

	const question = "Why does TestRetry flake?"
	st.ann.Send(t, room, question)
	r := st.heard("")
	if len(r.Messages) != 1 || r.Messages[0].Content != question || r.Messages[0].SessionID != string(session) {
		t.Fatalf("the agent read %+v, want %q in session %s", r.Messages, question, session)
	}
	st.ann.WaitRoomName(t, room, func(n string) bool { return n == "⏳ Flaky test" }, mxWait)
	st.ann.WaitTyped(t, room, st.bot.ID, mxWait)

	final := slStream(0, 100)
	const steps = 43
	for i := 1; i <= steps; i++ {
		st.output(string(session), final[:len(final)*i/steps])
		if i%10 == 0 {
			// As a person watching would see it grow: the newest complete
			// step shows in the room.
			done := strings.Count(final[:len(final)*i/steps], "(step ") - 1
			st.mxShowing(st.ann, room, fmt.Sprintf("(step %03d)", done))
		}
	}
	// While streaming, the bot posted one message, the output, and
	// edited it.
	var streaming []string
	for _, ev := range mxMessages(st.ann, room, st.bot.ID) {
		streaming = append(streaming, fmt.Sprintf("%s %.40q", mxMsgType(ev), matrixtest.Text(ev)))
	}
	if len(streaming) != 1 {
		t.Errorf("while streaming the bot posted %d messages %q, want only the output message, edited", len(streaming), streaming)
	}

	const answer = "Found it: the retry loop reads the **wall clock**."
	st.agent.call(t, "chat.assistant.post", map[string]any{"session_id": string(session), "content": answer}, nil)
	st.agent.call(t, "loop.yield_turn", map[string]any{"session_id": string(session)}, nil)

	want := mxPlain(final)
	servetest.PollUntil(t, mxWait, "the whole final text and the answer", func() bool {
		return st.mxShownOutput(st.ann, room) == want && len(st.mxNotifying(room)) == 1
	}, nil)
	st.ann.WaitRoomName(t, room, func(n string) bool { return n == "💬 Flaky test" }, mxWait)
	st.idle()

	outputs := st.mxOutputs(st.ann, room)
	out := outputs[0]
	edits := mxEdits(st.ann, room, out.ID)
	if len(edits) < 3 {
		t.Errorf("the output message was edited %d times: want it posted once and edited as the text grew", len(edits))
	}
	for _, e := range edits {
		c := e.Content.Parsed.(*event.MessageEventContent)
		if e.Sender != st.bot.ID || c.NewContent == nil || c.NewContent.Format != event.FormatHTML || c.NewContent.FormattedBody == "" || c.Body == "" {
			t.Errorf("edit %s: sender %s, m.new_content %+v, fallback body %.20q: want the bot's m.replace with an HTML formatted body and a fallback", e.ID, e.Sender, c.NewContent, c.Body)
			break
		}
	}
	t.Logf("the output: %d message(s), the first edited %d times", len(outputs), len(edits))
	if notifying := st.mxNotifying(room); len(notifying) != 1 || matrixtest.Text(notifying[0]) != "Found it: the retry loop reads the wall clock." {
		var texts []string
		for _, ev := range notifying {
			texts = append(texts, matrixtest.Text(ev))
		}
		t.Errorf("the turn's notifying messages are %q, want only the answer", texts)
	}
	for _, ev := range mxMessages(st.ann, room, st.bot.ID) {
		if mxMsgType(ev) == event.MsgNotice && !strings.Contains(st.ann.Edited(room, ev.ID), "(step ") {
			t.Errorf("the bot posted a notice besides the output: %.80q", st.ann.Edited(room, ev.ID))
		}
	}
	for _, ev := range st.ann.Events(room) {
		if ev.Sender == st.bot.ID && len(ev.Content.VeryRaw) > 64<<10 {
			t.Errorf("event %s has %d bytes of content, over 64 KiB", ev.ID, len(ev.Content.VeryRaw))
		}
	}
	var all readResult
	st.agent.call(t, "chat_read_since", map[string]any{}, &all)
	n := 0
	for _, m := range all.Messages {
		if m.Content == question {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the question is in the inbox %d times, want once", n)
	}

	st.ann.Send(t, room, "!status")
	st.mxShowing(st.ann, room, "Flaky test — idle, 1 turn(s) completed")
}

// mxNotifying are the bot's notifying messages in room: m.text messages
// (notices do not notify, nor do edits), whatever their state.
func (st *mxStack) mxNotifying(room id.RoomID) []*event.Event {
	var out []*event.Event
	for _, ev := range mxMessages(st.ann, room, st.bot.ID) {
		if mxMsgType(ev) == event.MsgText {
			out = append(out, ev)
		}
	}
	return out
}
