package e2e

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
)

// TestSlackToolActivity: on Slack, the turn's tool calls show in one
// progress reply, edited as they end; an approval is asked with Block Kit
// buttons, a stranger's click decides nothing and Ann's decides; the
// progress reply is deleted when the turn completes, the question stays.
func TestSlackToolActivity(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackBubbleStack(t, slacktest.Options{Limits: true})
		thread, session, _ := st.session("Tidy the repository")
		call := func(tool string, args map[string]any) {
			t.Helper()
			args["session_id"] = session
			st.agent.call(t, tool, args, nil)
		}
		call("ui.tool_call", map[string]any{"call_id": "c1", "tool": "git", "cmd": "git gc"})
		progress := st.showing(thread, "Tools: 0 of 1 done")

		decided := make(chan approvalDecision, 1)
		go func() {
			var d approvalDecision
			d.err = st.agent.callErr(blockingCall, "ui.request_approval", map[string]any{"session_id": session, "call_id": "c2", "tool": "git",
				"cmd": "git push --force"}, &d)
			decided <- d
		}()
		q := st.showing(thread, "Approve this tool call?")
		buttons := slackButtons(q)
		if len(buttons) != 3 || buttons[1].Label != "Deny and continue" {
			t.Fatalf("approval buttons %+v", buttons)
		}
		st.srv.Click(st.stranger, st.channel, q.TS, buttons[0].ActionID, buttons[0].Value)
		st.acked("interactive")
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		select {
		case d := <-decided:
			t.Fatalf("the stranger's click decided: %+v", d)
		default:
		}
		st.srv.Click(st.ann, st.channel, q.TS, buttons[1].ActionID, buttons[1].Value)
		select {
		case d := <-decided:
			if d.err != nil || d.Decision != "deny_continue" {
				t.Fatalf("ui.request_approval = %+v", d)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("ui.request_approval did not return")
		}
		call("ui.tool_output", map[string]any{"call_id": "c1", "stdout": "done", "exit_code": 0})
		st.await("the progress edited", func() bool {
			m, _ := st.srv.Message(st.channel, progress.TS)
			s := slackShown(m)
			return strings.Contains(s, "1 of 2 done") && strings.Contains(s, "denied")
		})
		call("session.output", map[string]any{"content": "Garbage collected; the push was denied."})
		call("loop.yield_turn", map[string]any{})
		st.await("the progress deleted", func() bool {
			m, _ := st.srv.Message(st.channel, progress.TS)
			return m.Deleted
		})
		st.showing(thread, "the push was denied")
		if m, _ := st.srv.Message(st.channel, q.TS); m.Deleted {
			t.Fatal("the question was deleted with the progress")
		}
	})
}
