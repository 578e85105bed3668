package daemon_test

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// The output tests run in synctest bubbles (see newBubbleHarness): pacing,
// retry_after pauses and typing renewals are checked to the exact instant,
// and a minute of a group's budget takes milliseconds.

// newSession creates a session from the API; it reaches the fake platform
// lazily, on first delivery.
func (h *harness) newSession(title string) core.SessionID {
	h.t.Helper()
	return h.do(core.Command{Kind: core.CreateSession, Origin: core.OriginAPI, Title: title}).Session
}

func (h *harness) output(id core.SessionID, text string) {
	h.t.Helper()
	h.do(core.Command{Kind: core.OutputUpdate, Origin: core.OriginMCP, Session: id, Text: text})
}

// bindFirst gives the session its conversation on the fake platform before
// a test's timed part, and lets a minute pass so that every rate window is
// clear again. A session bound lazily by its first output has a race of its
// own: the status change that comes with that output reaches the platform
// (a rename and typing indicators, competing for the conversation's budget)
// only if the binding exists when the dispatcher routes it. Tests that time
// every operation of a conversation start from a bound session.
func (h *harness) bindFirst(id core.SessionID) core.Place {
	h.t.Helper()
	h.do(core.Command{Kind: core.AssistantPost, Origin: core.OriginMCP, Session: id, Text: "bound"})
	place := h.place(id)
	h.drain()
	time.Sleep(time.Minute)
	return place
}

func shown(fk *fake.Adapter, place core.Place, kind core.MessageKind) []fake.Message {
	var out []fake.Message
	for _, m := range fk.Messages(place) {
		if m.Kind == kind {
			out = append(out, m)
		}
	}
	return out
}

// 500 output updates in 5 s through an adapter allowed 1 operation a second:
// the output message is sent at once and then edited exactly once a second,
// each time showing the newest text, the last time exactly the final text.
func TestOutputStreamCoalescesWithinLimit(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		caps := telegramLike()
		caps.Limits = []core.Limit{{Scope: core.ScopeConversation, Rate: core.Rate{N: 1, Per: time.Second}}}
		h := newBubbleHarness(t, caps)
		id := h.newSession("stream")
		place := h.bindFirst(id)
		type update struct {
			at   time.Time
			text string
		}
		var updates []update
		var text string
		start := time.Now()
		for i := range 500 {
			text += fmt.Sprintf("l%d\n", i) // ends below the 4096 limit
			h.output(id, text)
			updates = append(updates, update{time.Now(), text})
			// Spread the updates over 5 s, as a streaming agent would:
			// every 10 ms, half a step off the whole seconds at which the
			// edits go out (an update at the very instant of an edit may
			// or may not make it in).
			if i == 0 {
				time.Sleep(5 * time.Millisecond)
			} else {
				time.Sleep(10 * time.Millisecond)
			}
		}
		h.drain()
		newest := func(at time.Time) string {
			var last string
			for _, u := range updates {
				if !u.at.After(at) {
					last = u.text
				}
			}
			return last
		}
		var ops []fake.Op
		for _, op := range opsAt(h.fk.Ops(), place, "send", "edit") {
			if !op.Time.Before(start) {
				ops = append(ops, op)
			}
		}
		if len(ops) != 6 {
			t.Errorf("%d platform operations for 500 updates in 5 s at 1/s, want 6 (at +0 s … +5 s)", len(ops))
		}
		for i, op := range ops {
			if want := time.Duration(i) * time.Second; op.Time.Sub(start) != want {
				t.Errorf("operation %d at +%s, want +%s", i, op.Time.Sub(start), want)
			}
			if want := newest(op.Time); op.Err != nil || op.Text != want {
				t.Errorf("operation %d at +%s showed %d bytes (err %v), want the newest text then, %d bytes",
					i, op.Time.Sub(start), len(op.Text), op.Err, len(want))
			}
		}
		if r := refused(h.fk.Ops()); len(r) > 0 {
			t.Errorf("platform refused %d operations: the outbox exceeded the limit", len(r))
		}
		if last := ops[len(ops)-1]; last.Text != text {
			t.Errorf("last operation %q, want the final text", last.Text[max(0, len(last.Text)-20):])
		}
		out := shown(h.fk, place, core.KindOutput)
		if len(out) != 1 || out[0].Text != text {
			t.Fatalf("topic shows %d output messages, want exactly one with the final text", len(out))
		}
	})
}

// An agent that stops mid-stream still has its last text shown when the
// pacing interval is up, without any further update to trigger it.
func TestStalledAgentLastOutputIsFlushed(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		caps := telegramLike()
		caps.Limits = []core.Limit{{Scope: core.ScopeConversation, Rate: core.Rate{N: 1, Per: time.Second}}}
		h := newBubbleHarness(t, caps)
		id := h.newSession("stall")
		place := h.bindFirst(id)
		start := time.Now()
		h.output(id, "one")
		time.Sleep(100 * time.Millisecond)
		h.output(id, "one two")
		time.Sleep(100 * time.Millisecond)
		h.output(id, "one two three") // and then nothing
		time.Sleep(5 * time.Second)
		synctest.Wait()
		var got []string
		for _, op := range opsAt(h.fk.Ops(), place, "send", "edit") {
			if !op.Time.Before(start) {
				got = append(got, fmt.Sprintf("%s %q at +%s", op.Method, op.Text, op.Time.Sub(start)))
			}
		}
		// The first text at once; the last one when the 1 s interval is up.
		want := []string{`send "one" at +0s`, `edit "one two three" at +1s`}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("operations %q, want %q", got, want)
		}
	})
}

// A 429 with retry_after=2s: nothing goes to that chat for exactly 2 s, then
// the latest text.
func TestRateLimitedChatWaitsRetryAfter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleHarness(t, telegramLike())
		id := h.newSession("429")
		h.output(id, "v1")
		place := h.place(id)
		h.drain()
		if out := shown(h.fk, place, core.KindOutput); len(out) != 1 || out[0].Text != "v1" {
			t.Fatalf("shows %+v, want one output message with v1", out)
		}
		time.Sleep(time.Second)
		h.fk.FailNext("edit", &core.RateLimitError{RetryAfter: 2 * time.Second})
		h.output(id, "v2")
		synctest.Wait()
		hit := time.Now()
		if r := refused(h.fk.Ops()); len(r) != 1 || !r[0].Time.Equal(hit) {
			t.Fatalf("refused operations %+v, want the edit to v2, now", r)
		}
		for i := 3; i <= 20; i++ {
			h.output(id, fmt.Sprintf("v%d", i))
		}
		h.drain()
		var after []string
		for _, op := range opsAt(h.fk.Ops(), place, "send", "edit") {
			if !op.Time.Before(hit) && op.Err == nil {
				after = append(after, fmt.Sprintf("%s %q at +%s", op.Method, op.Text, op.Time.Sub(hit)))
			}
		}
		if want := []string{`edit "v20" at +2s`}; fmt.Sprint(after) != fmt.Sprint(want) {
			t.Errorf("after the 429: %q, want %q", after, want)
		}
		out := shown(h.fk, place, core.KindOutput)
		if len(out) != 1 || out[0].Text != "v20" {
			t.Errorf("shows %+v, want one output message with v20", out)
		}
	})
}

// Five sessions streaming into one group allowed 20 operations a minute: the
// limit is never exceeded and every session's final text is delivered.
func TestSessionsShareGroupBudget(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		caps := telegramLike()
		caps.Limits = []core.Limit{
			{Scope: core.ScopeConversation, Rate: core.Rate{N: 1, Per: time.Second}},
			{Scope: core.ScopeGroup, Rate: core.Rate{N: 20, Per: time.Minute}},
			{Scope: core.ScopeAccount, Rate: core.Rate{N: 30, Per: time.Second}},
		}
		h := newBubbleHarness(t, caps)
		var ids []core.SessionID
		for i := range 5 {
			ids = append(ids, h.newSession(fmt.Sprintf("s%d", i)))
			h.bindFirst(ids[i])
		}
		final := map[core.SessionID]string{}
		start := time.Now()
		for step := range 20 {
			for _, id := range ids {
				final[id] = fmt.Sprintf("%s: %s", id, strings.Repeat("token ", step+1))
				h.output(id, final[id])
			}
			time.Sleep(50 * time.Millisecond) // the agents' pace
		}
		for _, id := range ids {
			h.do(core.Command{Kind: core.YieldTurn, Origin: core.OriginMCP, Session: id})
		}
		h.drain()
		// The fake platform enforces the limits with no slack: any
		// operation over budget would have been refused.
		if r := refused(h.fk.Ops()); len(r) > 0 {
			t.Errorf("platform refused %d operations: group budget exceeded", len(r))
		}
		var group []time.Time
		for _, op := range h.fk.Ops() {
			if op.Place.Chat == "group" && op.Err == nil && op.Method != "bind" {
				group = append(group, op.Time)
			}
		}
		for i := 20; i < len(group); i++ {
			if d := group[i].Sub(group[i-20]); d < time.Minute {
				t.Errorf("operations %d and %d in the group %s apart: 21 in a minute", i-20, i, d)
			}
		}
		for _, id := range ids {
			place := h.place(id)
			out := shown(h.fk, place, core.KindOutput)
			if len(out) != 1 || out[0].Text != final[id] {
				t.Errorf("session %s shows %+v, want its final text", id, out)
			}
			// The stream ended at +950 ms: the first edit, at +1 s (the
			// first send took the conversation's second), shows the end.
			for _, op := range opsAt(h.fk.Ops(), place, "send", "edit") {
				if op.Text == final[id] && op.Err == nil {
					if at := op.Time.Sub(start); at != time.Second {
						t.Errorf("session %s showed its final text at +%s, want +1s", id, at)
					}
					break
				}
			}
		}
	})
}

func TestOutputMessageLifecycle(t *testing.T) {
	t.Run("message gone: a new one is sent and remembered", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newBubbleHarness(t, telegramLike())
			id := h.newSession("gone")
			h.output(id, "v1")
			place := h.place(id)
			h.drain()
			first := shown(h.fk, place, core.KindOutput)[0]
			h.fk.Vanish(first.ID)
			h.output(id, "v2")
			h.drain()
			out := shown(h.fk, place, core.KindOutput)
			if len(out) != 1 || out[0].Text != "v2" || out[0].ID == first.ID {
				t.Fatalf("shows %+v, want a new output message with v2", out)
			}
			if got := h.session(id).Bindings["fake"].Output.Ref.ID; got != out[0].ID {
				t.Errorf("binding remembers %s, want %s", got, out[0].ID)
			}
		})
	})
	t.Run("identical payload is not sent again", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newBubbleHarness(t, telegramLike())
			id := h.newSession("same")
			h.output(id, "same")
			place := h.place(id)
			h.drain()
			h.output(id, "same")
			h.drain()
			if n := len(opsAt(h.fk.Ops(), place, "send", "edit")); n != 1 {
				t.Errorf("%d operations, want 1", n)
			}
		})
	})
	t.Run("restart mid-stream resumes editing the same message", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newBubbleHarness(t, telegramLike())
			id := h.newSession("restart")
			h.output(id, "before restart")
			place := h.place(id)
			h.drain()
			h.restart()
			h.drain()
			if n := len(opsAt(h.fk.Ops(), place, "send", "edit")); n != 1 {
				t.Errorf("restart re-sent the output: %d operations, want 1", n)
			}
			h.output(id, "after restart")
			h.drain()
			out := shown(h.fk, place, core.KindOutput)
			if len(out) != 1 || out[0].Text != "after restart" {
				t.Errorf("shows %+v, want the same message edited", out)
			}
		})
	})
	t.Run("thread gone: bound anew and retried once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newBubbleHarness(t, telegramLike())
			id := h.newSession("thread")
			h.output(id, "v1")
			old := h.place(id)
			h.drain()
			h.fk.DeleteThread(old)
			h.do(core.Command{Kind: core.AssistantPost, Origin: core.OriginMCP, Session: id, Text: "are you still there?"})
			h.drain()
			now := h.place(id)
			if now == old {
				t.Fatal("session was not bound anew")
			}
			if got := shown(h.fk, now, core.KindAssistant); len(got) != 1 {
				t.Errorf("new thread shows %+v, want the assistant message", got)
			}
		})
	})
	t.Run("too long: tail while streaming, whole when final", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			caps := telegramLike()
			caps.MaxLength = 200
			h := newBubbleHarness(t, caps)
			id := h.newSession("long")
			var b strings.Builder
			for i := range 60 {
				fmt.Fprintf(&b, "line %02d of a long answer\n", i)
				if i == 30 {
					b.WriteString("```go\n")
				}
			}
			b.WriteString("```\n")
			text := b.String()
			h.output(id, text)
			place := h.place(id)
			h.drain()
			live := shown(h.fk, place, core.KindOutput)[0].Text
			if !strings.HasPrefix(live, "…") || !strings.HasSuffix(strings.TrimSpace(live), "```") {
				t.Errorf("live view %q, want the tail after a marker", live)
			}
			h.do(core.Command{Kind: core.YieldTurn, Origin: core.OriginMCP, Session: id})
			h.drain()
			var parts []string
			for _, m := range h.fk.Messages(place) {
				if m.Kind == core.KindOutput || m.Kind == core.KindContinuation {
					if delivery.Measure(m.Text, core.UTF16) > 200 {
						t.Errorf("message of %d units exceeds the limit", delivery.Measure(m.Text, core.UTF16))
					}
					if strings.Count(m.Text, "```")%2 != 0 {
						t.Errorf("message with unbalanced code fences: %q", m.Text)
					}
					parts = append(parts, m.Text)
				}
			}
			if len(parts) < 5 {
				t.Fatalf("final delivered in %d parts, want the whole text in several", len(parts))
			}
			joined := strings.Join(parts, "\n")
			for i := range 60 {
				if !strings.Contains(joined, fmt.Sprintf("line %02d of", i)) {
					t.Errorf("line %d missing from the delivered final text", i)
				}
			}
		})
	})
	t.Run("very long final goes as a file", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			caps := telegramLike()
			caps.MaxLength, caps.FileThreshold = 200, 1000
			h := newBubbleHarness(t, caps)
			id := h.newSession("file")
			text := strings.Repeat("all work and no play\n", 100)
			h.output(id, text)
			h.do(core.Command{Kind: core.YieldTurn, Origin: core.OriginMCP, Session: id})
			place := h.place(id)
			h.drain()
			var got string
			for _, op := range opsAt(h.fk.Ops(), place, "file") {
				got = op.File
			}
			if got == "" {
				t.Fatal("no document sent")
			}
			if got != text {
				t.Errorf("document holds %d bytes, want the %d of the output", len(got), len(text))
			}
		})
	})
}

func TestTurnCompleteNotifiesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleHarness(t, telegramLike())
		id := h.newSession("notify")
		h.output(id, "working on it")
		h.output(id, "done: 42")
		h.do(core.Command{Kind: core.YieldTurn, Origin: core.OriginMCP, Session: id})
		place := h.place(id)
		h.drain()
		notifying := func() (texts []string) {
			for _, op := range opsAt(h.fk.Ops(), place, "send") {
				if !op.Silent && op.Err == nil {
					texts = append(texts, op.Text)
				}
			}
			return texts
		}
		if got := notifying(); len(got) != 1 {
			t.Errorf("notifying messages %q, want exactly one at turn completion", got)
		}

		// A turn whose answer came as an assistant message notified already.
		h.say(place, "and now?")
		h.do(core.Command{Kind: core.AssistantPost, Origin: core.OriginMCP, Session: id, Text: "here you go"})
		h.do(core.Command{Kind: core.YieldTurn, Origin: core.OriginMCP, Session: id})
		h.drain()
		if got := notifying(); len(got) != 2 || got[1] != "here you go" {
			t.Errorf("notifying messages %q, want the first turn's and the assistant message", got)
		}
	})
}

// The typing indicator shows while the agent works, renewed every 4.5 s,
// and stops with the turn.
func TestTypingWhileWorking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleHarness(t, telegramLike())
		place := core.Place{Chat: "dm", Thread: "typing"}
		h.say(place, "are you there?") // the session starts working
		start := time.Now()
		id := h.sessionAt(place)
		time.Sleep(10 * time.Second)
		h.do(core.Command{Kind: core.YieldTurn, Origin: core.OriginMCP, Session: id})
		h.drain()
		time.Sleep(20 * time.Second) // four more renewal intervals
		synctest.Wait()
		var at []time.Duration
		for _, op := range opsAt(h.fk.Ops(), place, "typing") {
			at = append(at, op.Time.Sub(start))
		}
		want := []time.Duration{0, 4500 * time.Millisecond, 9 * time.Second}
		if fmt.Sprint(at) != fmt.Sprint(want) {
			t.Errorf("typing indicators at %v, want %v: renewed while working, none after the turn at +10s", at, want)
		}
	})
}
