package e2e

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/parley-chat/parley/adapters/matrix/matrixtest"
)

// TestMatrixRoomNameByPower: in a room Ann created and invited the bot to,
// the bot's power level (0) is below what m.room.name needs (50): the
// status cannot show in the name, and the bot does not try — no refused
// state event at the homeserver, no warning or error in the log, as with
// redactions; it says once, in a notice, what power it needs. Once Ann
// gives the bot power 50, the name follows the status.
func TestMatrixRoomNameByPower(t *testing.T) {
	t.Parallel()
	st := newMXStack(t, mxOptions{proxy: true})
	room, session := st.room("Plans")
	st.ann.Send(t, room, "hello")
	st.mxInInbox("hello")
	st.agent.call(t, "chat.assistant.post", map[string]any{"session_id": string(session), "content": "hi"}, nil)
	st.agent.call(t, "loop.yield_turn", map[string]any{"session_id": string(session)}, nil)
	st.mxShowing(st.ann, room, "hi")
	st.idle()
	c := st.proxy.Counts()
	if c.Requests[matrixtest.KindState] != c.Accepted[matrixtest.KindState] {
		t.Errorf("%d state events asked, %d accepted: the bot asked for a room name it has no power to set",
			c.Requests[matrixtest.KindState], c.Accepted[matrixtest.KindState])
	}
	for _, line := range mxLogged(st.log.String(), slog.LevelWarn, "name", "rename", "forbidden") {
		t.Errorf("logged: %s", line)
	}

	st.mxShowing(st.ann, room, "give me power level 50")

	st.ann.SetPowerLevel(t, room, st.bot.ID, 50)
	st.ann.Send(t, room, "and now?")
	st.ann.WaitRoomName(t, room, func(n string) bool { return n == "⏳ Plans" }, mxWait)
	asked := 0
	for _, ev := range mxMessages(st.ann, room, st.bot.ID) {
		if strings.Contains(matrixtest.Text(ev), "give me power level") {
			asked++
		}
	}
	if asked != 1 {
		t.Errorf("the bot asked for power %d times, want once", asked)
	}
}
