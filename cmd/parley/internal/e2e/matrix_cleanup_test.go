package e2e

import (
	"log/slog"
	"testing"

	"maunium.net/go/mautrix/id"

	"github.com/parley-chat/parley/adapters/matrix/matrixtest"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
)

// mxInInbox waits until the inbox holds a message with text.
func (st *mxStack) mxInInbox(text string) {
	st.t.Helper()
	servetest.PollUntil(st.t, mxWait, "the inbox to hold "+text, func() bool {
		for _, m := range st.inbox() {
			if m.Content == text {
				return true
			}
		}
		return false
	}, nil)
}

// TestMatrixRedactionByPower: a person's message is redacted at their next
// input only where the bot's power level allows it. In the room the bot
// created for "!new" (power 100) Ann's earlier message is redacted when
// she writes again; in the room she created and invited the bot to (power
// 0) it stays, and no redaction of it is even asked for — the proxy in
// front of Dendrite sees no refused redaction — and nothing about it is
// logged as a warning or an error. The bot's own transient messages (a
// !status answer, replaced by the next one) are redacted in both rooms.
func TestMatrixRedactionByPower(t *testing.T) {
	t.Parallel()
	st := newMXStack(t, mxOptions{proxy: true})
	lobby, _ := st.room("Lobby")
	powered, _ := st.mxNew(lobby, "Powered")

	first := st.ann.Send(t, powered, "first question")
	st.mxInInbox("first question")
	second := st.ann.Send(t, powered, "second question")
	servetest.PollUntil(t, mxWait, "Ann's first message in the bot's room redacted", func() bool {
		return mxRedacted(st.ann, powered, first)
	}, nil)

	mine := st.ann.Send(t, lobby, "lobby first")
	st.mxInInbox("lobby first")
	st.ann.Send(t, lobby, "lobby second")
	st.mxInInbox("lobby second")
	st.mxStatusTwice(lobby)
	st.mxStatusTwice(powered)
	st.idle()

	if mxRedacted(st.ann, lobby, mine) {
		t.Error("Ann's message was redacted in her own room, where the bot has no power")
	}
	if mxRedacted(st.ann, powered, second) {
		t.Error("Ann's latest message in the bot's room was redacted before she wrote again")
	}
	c := st.proxy.Counts()
	if c.Requests[matrixtest.KindRedaction] != c.Accepted[matrixtest.KindRedaction] {
		t.Errorf("%d redactions asked, %d accepted: the bot asked for a redaction the homeserver refused",
			c.Requests[matrixtest.KindRedaction], c.Accepted[matrixtest.KindRedaction])
	}
	t.Logf("redactions: %d asked, %d accepted", c.Requests[matrixtest.KindRedaction], c.Accepted[matrixtest.KindRedaction])
	for _, line := range mxLogged(st.log.String(), slog.LevelWarn, "redact", "delet", "cleanup") {
		t.Errorf("logged: %s", line)
	}
}

// mxStatusTwice has Ann ask "!status" twice in room and waits until the
// first answer is redacted by the bot when the second arrives.
func (st *mxStack) mxStatusTwice(room id.RoomID) {
	st.t.Helper()
	st.ann.Send(st.t, room, "!status")
	answer := st.mxShowing(st.ann, room, "turn(s) completed")
	st.ann.Send(st.t, room, "!status")
	servetest.PollUntil(st.t, mxWait, "the first !status answer redacted by the second", func() bool {
		return mxRedacted(st.ann, room, answer.ID)
	}, nil)
	st.mxShowing(st.ann, room, "turn(s) completed")
}
