package daemon_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/core"
)

// Durable delivery, end to end through the daemon on a fake platform. These
// run in synctest bubbles: a 30-second outage or a minute of pacing takes
// milliseconds, and times are exact.

// crash stops the daemon the way kill -9 would for what was still queued:
// the outbox is dropped without draining, then the store is closed. (The
// process-level kill -9 is in the end-to-end tests, cmd/parley/internal/e2e.)
func (h *harness) crash() {
	h.t.Helper()
	h.d.Outbox.Close()
	h.stop()
	<-h.done
	if err := h.d.Close(); err != nil {
		h.t.Errorf("close: %v", err)
	}
	h.d = nil
}

func (h *harness) post(id core.SessionID, text string) {
	h.t.Helper()
	h.do(core.Command{Kind: core.AssistantPost, Origin: core.OriginMCP, Session: id, Text: text})
}

// texts counts the messages of kind shown at place by their text.
func texts(fk *fake.Adapter, place core.Place, kind core.MessageKind) map[string]int {
	out := map[string]int{}
	for _, m := range shown(fk, place, kind) {
		out[m.Text]++
	}
	return out
}

// slowChat allows one operation per conversation every ten seconds, so
// messages stay queued long enough to be caught by a crash.
func slowChat() core.Capabilities {
	caps := telegramLike()
	caps.Limits = []core.Limit{{Scope: core.ScopeConversation, Rate: core.Rate{N: 1, Per: 10 * time.Second}}}
	return caps
}

func TestQueuedAssistantMessagesSurviveCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleHarness(t, slowChat())
		id := h.newSession("crash")
		h.post(id, "m0")
		place := h.place(id)
		h.drain()                    // m0, then the new topic's status
		time.Sleep(10 * time.Second) // and the conversation's budget is free again
		for i := 1; i < 5; i++ {
			h.post(id, fmt.Sprint("m", i))
		}
		time.Sleep(15 * time.Second) // m1 at +0, m2 at +10; m3 and m4 still queued
		synctest.Wait()
		if n := len(shown(h.fk, place, core.KindAssistant)); n != 3 {
			t.Fatalf("%d messages shown before the crash, want 3", n)
		}
		h.crash()
		h.start()
		h.drain()
		got := texts(h.fk, place, core.KindAssistant)
		for i := range 5 {
			if n := got[fmt.Sprint("m", i)]; n != 1 {
				t.Errorf("m%d shown %d times, want exactly once: %v", i, n, got)
			}
		}
		if rows, _ := h.d.Store.Deliveries(t.Context(), 0, 0); len(rows) != 0 {
			t.Errorf("%d journal rows left after delivery, want 0: %+v", len(rows), rows)
		}
	})
}

// TestAnswerArrivesAfterOutage: an assistant message and a final output
// posted during a 30-second outage are retried, not given up on, and
// arrive once the platform is back.
func TestAnswerArrivesAfterOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleHarness(t, telegramLike(), func(o *daemon.Options) {
			o.MaxBackoff, o.Jitter = 8*time.Second, func() float64 { return 0 }
		})
		id := h.newSession("outage")
		h.post(id, "hello")
		place := h.place(id)
		h.drain()
		h.fk.SetDown(errors.New("502 Bad Gateway"))
		down := time.Now()
		h.post(id, "the answer")
		h.do(core.Command{Kind: core.OutputUpdate, Origin: core.OriginMCP, Session: id, Text: "final text", Final: true})
		h.do(core.Command{Kind: core.YieldTurn, Origin: core.OriginMCP, Session: id})
		time.Sleep(30 * time.Second)
		h.fk.SetDown(nil)
		h.drain()
		back := time.Since(down)
		if got := texts(h.fk, place, core.KindAssistant); got["the answer"] != 1 {
			t.Errorf("assistant messages %v, want the answer exactly once", got)
		}
		if got := texts(h.fk, place, core.KindOutput); got["final text"] != 1 {
			t.Errorf("outputs %v, want the final text once", got)
		}
		if s := h.d.Outbox.Stats(); s.Failed["fake"] != 0 || s.Retries["fake"] == 0 {
			t.Errorf("outbox stats %+v: want retries and nothing given up", s)
		}
		// Retries after 1, 2, 4, 8, 8 and 8 s: the first after the outage
		// is at +31 s.
		if back != 31*time.Second {
			t.Errorf("delivered %s after the outage began, want 31s: the first retry after it", back)
		}
	})
}

// TestReplaySkipsConfirmedParts: a long final output goes out as the
// output message and continuations, paced 10 s apart; a crash halfway
// leaves only the missing part to send after the restart.
func TestReplaySkipsConfirmedParts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		caps := slowChat()
		caps.MaxLength = 100
		caps.LengthUnit = core.Bytes
		h := newBubbleHarness(t, caps)
		id := h.newSession("parts")
		h.post(id, "bind")
		place := h.place(id)
		h.drain()                    // the message, then the topic's status
		time.Sleep(10 * time.Second) // and the conversation's budget is free again
		var paras []string
		for i := range 3 {
			paras = append(paras, fmt.Sprintf("part %d %s", i, strings.Repeat("x", 70)))
		}
		h.do(core.Command{Kind: core.OutputUpdate, Origin: core.OriginMCP, Session: id, Text: strings.Join(paras, "\n\n"), Final: true})
		time.Sleep(15 * time.Second) // the output at +0, the first continuation at +10
		synctest.Wait()
		if n := len(shown(h.fk, place, core.KindContinuation)); n != 1 {
			t.Fatalf("%d continuations before the crash, want 1", n)
		}
		h.crash()
		h.start()
		h.drain()
		if got := shown(h.fk, place, core.KindOutput); len(got) != 1 || !strings.HasPrefix(got[0].Text, "part 0") || got[0].Edits != 0 {
			t.Errorf("output messages %+v, want one showing part 0, never re-edited", got)
		}
		var cont []string
		for _, m := range shown(h.fk, place, core.KindContinuation) {
			cont = append(cont, m.Text)
		}
		if len(cont) != 2 || !strings.HasPrefix(cont[0], "part 1") || !strings.HasPrefix(cont[1], "part 2") {
			t.Errorf("continuations %q, want part 1 and part 2 once each", cont)
		}
	})
}

// TestTypingHonoursRetryAfter: after a 429 for the conversation, typing
// indicators do not go there until retry_after has elapsed.
func TestTypingHonoursRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleHarness(t, telegramLike())
		id := h.newSession("typing")
		h.post(id, "bind")
		place := h.place(id)
		h.drain()
		h.fk.FailNext("send", &core.RateLimitError{RetryAfter: 20 * time.Second})
		h.post(id, "refused once")
		synctest.Wait()
		limited := time.Now()
		h.say(place, "work please") // the session turns to working: typing starts
		time.Sleep(30 * time.Second)
		h.do(core.Command{Kind: core.YieldTurn, Origin: core.OriginMCP, Session: id})
		h.drain()
		var typing int
		for _, op := range opsAt(h.fk.Ops(), place, "typing", "send", "edit", "rename") {
			if op.Err == nil && op.Time.Before(limited.Add(20*time.Second)) && op.Time.After(limited) {
				t.Errorf("%s at +%s, inside the 20 s retry_after", op.Method, op.Time.Sub(limited))
			}
			if op.Method == "typing" {
				typing++
			}
		}
		if typing == 0 {
			t.Error("no typing indicator after the pause ended")
		}
	})
}
