package e2e

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/parley-chat/parley/adapters/matrix/matrixtest"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
)

// TestMatrixFiveSessionsUnderRateLimit: Ann opens five sessions with !new
// and an agent answers all five at once, streaming about 8.6k characters
// of markdown into each over 10 s, then posting an answer and yielding,
// through parley serve and a matrixtest.Proxy in front of Dendrite that
// limits the bot's account as Synapse does by default (0.2 events a second,
// bursts of 10; parley's default budget is the same). The five rooms share
// that one budget, which their creation mostly spends before the stream
// starts. Every room ends with one output message (and its continuations,
// if any) showing its final text whole, its answer once, and its name
// back to idle; no message of the bot is posted twice; parley learns the
// homeserver's budget with the M_LIMIT_EXCEEDED of one instant and keeps
// to it from then on.
func TestMatrixFiveSessionsUnderRateLimit(t *testing.T) {
	t.Parallel()
	st := newMXStackConfig(t, mxOptions{proxy: true})
	st.proxy.SetMessageLimit(0.2, 10)
	st.start()
	lobby, _ := st.room("Lobby")
	const n, steps = 5, 100
	rooms := make([]id.RoomID, n)
	sessions := make([]core.SessionID, n)
	for k := range n {
		rooms[k], sessions[k] = st.mxNew(lobby, fmt.Sprintf("Task %d", k))
	}
	asks := make([]string, n)
	for k := range n {
		asks[k] = fmt.Sprintf("Task %d: explain the retry loop", k)
		st.ann.Send(t, rooms[k], asks[k])
	}
	read, _ := slRead(t, st.agent, "", asks...)
	for k := range n {
		if got := core.SessionID(read[asks[k]]); got != sessions[k] {
			t.Fatalf("%q reached session %s, want %s, the session of its room", asks[k], got, sessions[k])
		}
	}

	answer := func(k int) string { return fmt.Sprintf("Answer %d: the loop reads the wall clock.", k) }
	ids := make([]string, n)
	for k := range n {
		ids[k] = string(sessions[k])
	}
	st.streamTurns(ids, steps, slStream, answer)
	finished := time.Now()

	servetest.PollUntil(t, 8*time.Minute, "every room's final text and answer", func() bool {
		for k := range n {
			if st.mxShownOutput(st.ann, rooms[k]) != mxPlain(slStream(k, steps)) || len(st.mxTexts(rooms[k], answer(k))) == 0 {
				return false
			}
		}
		return true
	}, nil)
	t.Logf("every final text shown %v after the agents finished", time.Since(finished).Round(time.Second))
	st.idle()

	for k := range n {
		// The budget is spent on the rooms' creation and names before
		// the stream starts, so an output message may be posted only
		// when its text is final; what matters is that it is one.
		outs := st.mxOutputs(st.ann, rooms[k])
		t.Logf("room %d: %d output message(s), the first edited %d times", k, len(outs), len(mxEdits(st.ann, rooms[k], outs[0].ID)))
		// The daemon idle means the rename was made, not that Ann's
		// sync has brought it yet.
		want := fmt.Sprintf("💬 Task %d", k)
		st.ann.WaitRoomName(t, rooms[k], func(name string) bool { return name == want }, mxWait)
		if got := len(st.mxTexts(rooms[k], answer(k))); got != 1 {
			t.Errorf("room %d shows its answer %d times, want once", k, got)
		}
		seen := map[string]bool{}
		for _, ev := range mxMessages(st.ann, rooms[k], st.bot.ID) {
			text := matrixtest.Text(ev)
			if seen[text] {
				t.Errorf("room %d: the bot posted %.60q twice", k, text)
			}
			seen[text] = true
		}
	}
	c := st.proxy.Counts()
	t.Logf("requests by kind %v, accepted %v, M_LIMIT_EXCEEDED %d", c.Requests, c.Accepted, c.Limited)
	// parley learns the homeserver's budget: it grows until the first
	// M_LIMIT_EXCEEDED, which the calls then in flight (at most one a
	// room) share, and keeps to it from then on.
	lowered := mxLogged(st.log.String(), slog.LevelInfo, "rate budget lowered")
	if len(lowered) > 1 || c.Limited > n {
		t.Errorf("the homeserver answered M_LIMIT_EXCEEDED %d times, and parley lowered its budget %d times: it should take one lowering, at most one refusal a room",
			c.Limited, len(lowered))
	}
}
