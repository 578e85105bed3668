package e2e

// Direct messages with the bot, end to end over Socket Mode: each
// top-level DM from an allowed person starts a session whose conversation
// is that message's thread in the DM, as in the channel.

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
	"github.com/parley-chat/parley/core"
)

// dmBotReplies are the bot's messages in a DM thread, the root excluded.
func (st *slackStack) dmBotReplies(dm, thread string) []slacktest.Message {
	var out []slacktest.Message
	for _, m := range st.srv.Replies(dm, thread) {
		if m.BotID != "" && m.TS != thread {
			out = append(out, m)
		}
	}
	return out
}

// dmSessionAt is the session bound on Slack at the DM thread.
func (st *slackStack) dmSessionAt(dm, thread string) (core.Session, bool) {
	st.t.Helper()
	for _, s := range st.sessions() {
		if b, ok := s.Bindings["slack"]; ok && b.Place == (core.Place{Chat: dm, Thread: thread}) {
			return s, true
		}
	}
	return core.Session{}, false
}

// TestSlackDirectMessages: Ann writes the bot a top-level DM, which starts
// a session in that message's thread; her reply in the thread goes to the
// same session; the agent's output and the turn's "Done" land in the DM
// thread, and nothing of the session goes to the channel.
func TestSlackDirectMessages(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackBubbleStack(t, slacktest.Options{Limits: true})
		dm := st.srv.OpenDM(st.ann)

		root := st.srv.Post(st.ann, dm, "", "Summarise yesterday's incidents")
		r := st.heard("")
		if len(r.Messages) != 1 || r.Messages[0].Content != "Summarise yesterday's incidents" {
			t.Fatalf("the agent read %+v", r.Messages)
		}
		session := r.Messages[0].SessionID
		s, ok := st.dmSessionAt(dm, root)
		if !ok || string(s.ID) != session {
			t.Fatalf("the DM thread's session is %q (%v), want %s", s.ID, ok, session)
		}
		if s.Title != "Summarise yesterday's incidents" {
			t.Errorf("the session is titled %q", s.Title)
		}

		st.srv.Post(st.ann, dm, root, "Only the production ones")
		r = st.heard(r.LastID)
		if len(r.Messages) != 1 || r.Messages[0].Content != "Only the production ones" || r.Messages[0].SessionID != session {
			t.Fatalf("the agent read %+v, want the reply in session %s", r.Messages, session)
		}
		if n := len(st.sessions()); n != 1 {
			t.Errorf("%d sessions, want 1", n)
		}

		const final = "Two incidents in production: **the queue** stalled twice."
		st.output(session, "Two incidents")
		st.output(session, final)
		st.agent.call(t, "loop.yield_turn", map[string]any{"session_id": session}, nil)
		st.await("the output and Done in the DM thread", func() bool {
			var out, done bool
			for _, m := range st.dmBotReplies(dm, root) {
				out = out || slackShown(m) == final
				done = done || strings.Contains(slackShown(m), "Done")
			}
			return out && done
		})
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		var outputs, dones int
		for _, m := range st.dmBotReplies(dm, root) {
			switch shown := slackShown(m); {
			case shown == final:
				outputs++
			case strings.Contains(shown, "Done"):
				dones++
			}
			if m.ThreadTS != root {
				t.Errorf("a bot message outside the DM thread: %+v", m)
			}
		}
		if outputs != 1 || dones != 1 {
			t.Errorf("%d output messages and %d Done in the DM thread, want one of each", outputs, dones)
		}
		for _, m := range st.srv.Messages(dm) {
			if m.BotID != "" {
				t.Errorf("the bot posted at the DM's top level: %q", slackShown(m))
			}
		}
		if ms := st.srv.Messages(st.channel); len(ms) != 0 {
			t.Errorf("the DM session showed in the channel: %+v", ms)
		}
		// A second top-level DM is a second session.
		second := st.srv.Post(st.ann, dm, "", "Another thing")
		r = st.heard(r.LastID)
		if len(r.Messages) != 1 || r.Messages[0].SessionID == session {
			t.Fatalf("the agent read %+v, want a new session", r.Messages)
		}
		if _, ok := st.dmSessionAt(dm, second); !ok {
			t.Error("no session in the second DM's thread")
		}
		if n := st.srv.RateLimited(); n > 0 {
			t.Errorf("%d calls refused with 429", n)
		}
	})
}

// TestSlackDirectMessageStranger: a person not allowed who writes the bot
// a DM starts nothing and gets no reply; the envelope is acknowledged all
// the same, so Slack does not send it again.
func TestSlackDirectMessageStranger(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackBubbleStack(t, slacktest.Options{})
		dm := st.srv.OpenDM(st.stranger)
		before := len(st.srv.Calls())
		ts := st.srv.Post(st.stranger, dm, "", "Let me in")
		st.srv.Post(st.stranger, dm, ts, "Please?")
		// Envelopes wait while Socket Mode is still connecting.
		st.await("both envelopes acknowledged", func() bool {
			n := 0
			for _, e := range st.srv.Envelopes() {
				if e.Type == "events_api" && !e.Acked.IsZero() {
					n++
				}
			}
			return n == 2
		})
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		for _, e := range st.srv.Envelopes() {
			if e.RetryAttempt > 0 {
				t.Errorf("an envelope was redelivered: %+v", e)
			}
		}
		if n := len(st.sessions()); n != 0 {
			t.Errorf("%d sessions, want none", n)
		}
		if n := len(st.inbox()); n != 0 {
			t.Errorf("%d inbox messages, want none", n)
		}
		for _, m := range st.srv.Replies(dm, ts) {
			if m.BotID != "" {
				t.Errorf("the bot answered the stranger: %q", slackShown(m))
			}
		}
		for _, c := range st.srv.Calls()[before:] {
			t.Errorf("the stranger's DM made parley call %s", c.Method)
		}
		select {
		case <-st.agent.notes:
			t.Error("the agent was notified of the stranger's DM")
		default:
		}
	})
}

// TestSlackDirectMessageSlashAndButtons: /parley new in a DM starts a
// session under a root the bot posts in the DM, and a question asked there
// is answered by a click in the DM thread.
func TestSlackDirectMessageSlashAndButtons(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackBubbleStack(t, slacktest.Options{Limits: true})
		dm := st.srv.OpenDM(st.bob)
		st.srv.Slash(st.bob, dm, "/parley", "new Weekly report")
		var root slacktest.Message
		st.await("a root in the DM", func() bool {
			for _, m := range st.srv.Messages(dm) {
				if m.BotID != "" && strings.Contains(slackShown(m), "Weekly report") {
					root = m
					return true
				}
			}
			return false
		})
		var s core.Session
		st.await("the DM root's session", func() bool {
			var ok bool
			s, ok = st.dmSessionAt(dm, root.TS)
			return ok
		})
		if s.Title != "Weekly report" {
			t.Errorf("the session is titled %q", s.Title)
		}

		st.srv.Post(st.bob, dm, root.TS, "Start with the numbers")
		r := st.heard("")
		if len(r.Messages) != 1 || r.Messages[0].SessionID != string(s.ID) {
			t.Fatalf("the agent read %+v, want Bob's reply in %s", r.Messages, s.ID)
		}
		answer := st.ask(string(s.ID), "Include the charts?", "Yes", "No")
		var q slacktest.Message
		st.await("the question in the DM thread", func() bool {
			for _, m := range st.dmBotReplies(dm, root.TS) {
				if strings.Contains(slackShown(m), "Include the charts?") {
					q = m
					return true
				}
			}
			return false
		})
		buttons := slackButtons(q)
		if len(buttons) != 2 {
			t.Fatalf("buttons %+v", buttons)
		}
		st.srv.Click(st.bob, dm, q.TS, buttons[1].ActionID, buttons[1].Value)
		select {
		case a := <-answer:
			if a != "No" {
				t.Errorf("ui.ask answered %q, want No", a)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("ui.ask did not return")
		}
		st.await("the question showing the answer", func() bool {
			m, _ := st.srv.Message(dm, q.TS)
			return strings.Contains(slackShown(m), "chose *No*") && len(slackButtons(m)) == 0
		})
		if ms := st.srv.Messages(st.channel); len(ms) != 0 {
			t.Errorf("the DM session showed in the channel: %+v", ms)
		}
	})
}
