package e2e

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
)

// TestSlackButtons: ui.ask shows the options as Block Kit buttons. A
// stranger's click answers nothing and posts nothing; an allowed person's
// click answers once, and the question then shows the answer without
// buttons, even when the person clicked twice before it changed.
func TestSlackButtons(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackBubbleStack(t, slacktest.Options{Limits: true})
		thread, session, _ := st.session("Ready to deploy?")
		answer := st.ask(session, "Deploy now?", "Yes", "No")
		q := st.showing(thread, "Deploy now?")
		buttons := slackButtons(q)
		if len(buttons) != 2 || buttons[0].Label != "Yes" || buttons[1].Label != "No" {
			t.Fatalf("the question shows buttons %+v, want Yes and No", buttons)
		}

		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		before := len(st.srv.Calls())
		st.srv.Click(st.stranger, st.channel, q.TS, buttons[1].ActionID, buttons[1].Value)
		st.acked("interactive")
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		for _, c := range st.srv.Calls()[before:] {
			if c.Method != "users.info" {
				t.Errorf("the stranger's click made parley call %s", c.Method)
			}
		}
		select {
		case a := <-answer:
			t.Fatalf("the stranger's click answered %q", a)
		default:
		}

		// Ann double-clicks: Slack sends both.
		st.srv.Click(st.ann, st.channel, q.TS, buttons[0].ActionID, buttons[0].Value)
		st.srv.Click(st.ann, st.channel, q.TS, buttons[0].ActionID, buttons[0].Value)
		select {
		case a := <-answer:
			if a != "Yes" {
				t.Errorf("ui.ask answered %q, want Yes", a)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("ui.ask did not return")
		}
		if n := st.acked("interactive"); n != 3 {
			t.Errorf("%d click envelopes, want 3 (each delivered once, in time)", n)
		}
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		st.await("the question showing the answer", func() bool {
			m, _ := st.srv.Message(st.channel, q.TS)
			return strings.Contains(slackShown(m), "chose *Yes*")
		})
		m, _ := st.srv.Message(st.channel, q.TS)
		if b := slackButtons(m); len(b) > 0 || !strings.Contains(slackShown(m), "Deploy now?") || m.Edits != 1 {
			t.Errorf("the answered question shows %q with buttons %+v after %d edits, want the question and the answer, no buttons, one edit",
				slackShown(m), b, m.Edits)
		}
		answers := 0
		for _, msg := range st.inbox() {
			if msg.Content == "Yes" || msg.Content == "No" {
				answers++
			}
		}
		if answers != 1 {
			t.Errorf("%d answers in the inbox, want 1", answers)
		}
		if n := st.srv.RateLimited(); n > 0 {
			t.Errorf("%d calls were refused with 429", n)
		}
	})
}
