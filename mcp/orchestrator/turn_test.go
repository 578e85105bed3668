package orchestrator

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp/agent"
)

// TestAnswerShownOnce: a person's message becomes a turn; the streamed text
// is the live output, the whole answer its final output, once, and the
// turn is yielded once; nothing is posted as a separate message; the
// watermark is saved.
func TestAnswerShownOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fc := newFakeClaude(func(ft *fakeTurn) {
			ft.Say("Hel", "lo ")
			ft.Pause(time.Second)
			ft.Say("there")
		})
		startOrchestrator(t, st, fc, nil)
		m := st.say(id, ann, "hi")
		settle(2 * time.Second)

		if got := fc.sent(string(id)); !slices.Equal(got, []string{"hi"}) {
			t.Fatalf("handed %q", got)
		}
		texts, finals := st.outputs(id)
		if !slices.Equal(finals, []string{"Hello \n\nthere"}) {
			t.Fatalf("final outputs %q (all %q)", finals, texts)
		}
		if texts[0] != "Hel" {
			t.Fatalf("the first output %q, want the first chunk at once", texts[0])
		}
		if n := len(st.events(id, core.EventTurnComplete)); n != 1 {
			t.Fatalf("%d turns completed", n)
		}
		if a := st.assistant(id); len(a) != 0 {
			t.Fatalf("posted %q: the answer must be shown once, in the output", a)
		}
		var s state
		if err := json.Unmarshal([]byte(st.state(id)), &s); err != nil {
			t.Fatal(err)
		}
		if s.Watermark != m.ID || !s.Started || len(s.Conversation) != 36 {
			t.Fatalf("state %+v, want watermark %s", s, m.ID)
		}
		if sess := st.session(id); sess.Status != core.StatusIdle {
			t.Fatalf("status %s", sess.Status)
		}
		if starts := fc.startsOf(string(id)); len(starts) != 1 || starts[0].resume || starts[0].conversation != s.Conversation {
			t.Fatalf("starts %+v", starts)
		}
	})
}

// TestOutputThrottled: the first text goes out at once, then at most one
// session.output per outputEvery, and the last text is not lost.
func TestOutputThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fc := newFakeClaude(func(ft *fakeTurn) {
			for i := range 50 {
				ft.emit(textDelta(i))
				ft.Pause(10 * time.Millisecond)
			}
			ft.Pause(time.Second)
		})
		startOrchestrator(t, st, fc, nil)
		st.say(id, ann, "count")
		settle(3 * time.Second)
		var outs []core.Event
		for _, e := range st.events(id, core.EventOutput) {
			if !e.Final {
				outs = append(outs, e)
			}
		}
		if len(outs) < 5 || len(outs) > 7 {
			t.Fatalf("%d outputs for 500ms of streaming, want about one per 100ms", len(outs))
		}
		if outs[0].Text != "0 " {
			t.Fatalf("first output %q", outs[0].Text)
		}
		for i := 1; i < len(outs); i++ {
			if gap := outs[i].Time.Sub(outs[i-1].Time); gap < outputEvery {
				t.Fatalf("outputs %d and %d only %v apart", i-1, i, gap)
			}
		}
		if last := outs[len(outs)-1].Text; !strings.HasSuffix(last, "49 ") {
			t.Fatalf("the newest text was not shown: %q", last)
		}
	})
}

// TestQueuedMessagesNextTurn: messages arriving while a turn runs are
// handed together as the next turn, in order, each with its author's
// name when several people wrote.
func TestQueuedMessagesNextTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fc := newFakeClaude(func(ft *fakeTurn) {
			ft.Pause(time.Second)
			ft.Say("done with " + ft.Text)
		})
		startOrchestrator(t, st, fc, nil)
		st.say(id, ann, "one")
		settle(100 * time.Millisecond)
		st.say(id, ann, "two")
		st.say(id, bob, "three")
		settle(3 * time.Second)
		want := []string{"one", "Ann: two\n\nBob: three"}
		if got := fc.sent(string(id)); !slices.Equal(got, want) {
			t.Fatalf("handed %q, want %q", got, want)
		}
		if n := len(st.events(id, core.EventTurnComplete)); n != 2 {
			t.Fatalf("%d turns completed, want 2", n)
		}
		if procs := fc.procsOf(string(id)); len(procs) != 1 {
			t.Fatalf("%d processes: one long-lived process takes every turn", len(procs))
		}
	})
}

// TestCancel: /cancel interrupts the running turn, whose output ends with
// a line saying so; a message queued before the cancel is dropped; the
// next message is a turn of its own.
func TestCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fc := newFakeClaude(func(ft *fakeTurn) {
			ft.Say("working on " + ft.Text)
			ft.Pause(time.Hour)
			ft.Say("finished")
		})
		startOrchestrator(t, st, fc, nil)
		st.say(id, ann, "long job")
		settle(time.Second)
		st.say(id, ann, "queued")
		st.control(id, core.Cancel)
		settle(time.Second)
		_, finals := st.outputs(id)
		if !slices.Equal(finals, []string{"working on long job\n\n" + cancelled}) {
			t.Fatalf("final outputs %q", finals)
		}
		if st.session(id).Status != core.StatusIdle {
			t.Fatalf("status %s after the cancel", st.session(id).Status)
		}
		st.say(id, ann, "next")
		settle(time.Second)
		if got := fc.sent(string(id)); !slices.Equal(got, []string{"long job", "next"}) {
			t.Fatalf("handed %q", got)
		}
		var s state
		_ = json.Unmarshal([]byte(st.state(id)), &s)
		msgs, err := st.store.Inbox(t.Context(), id, core.MessageID(s.Watermark), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 1 || msgs[0].Content != "next" {
			t.Fatalf("after the watermark: %+v", msgs)
		}
	})
}

// TestClose: /close stops the agent's process and forgets the session.
func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fc := newFakeClaude(nil)
		startOrchestrator(t, st, fc, nil)
		st.say(id, ann, "hi")
		settle(time.Second)
		procs := fc.procsOf(string(id))
		if len(procs) != 1 || procs[0].wasStopped() {
			t.Fatalf("processes %d", len(procs))
		}
		st.control(id, core.Close)
		settle(time.Second)
		if !procs[0].wasStopped() {
			t.Fatal("the process still runs after /close")
		}
	})
}

func textDelta(i int) agent.TextDelta {
	return agent.TextDelta{Block: 0, Text: strconv.Itoa(i) + " "}
}
