package e2e

// Issue 9's end-to-end story on Slack, through parley serve's wiring and an
// MCP agent: a person writes at the channel's top level, the agent answers
// in the message's thread.

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
)

// slackMarkdown is about n characters of the markdown an agent writes:
// headings, lists, emphasis, links and code blocks.
func slackMarkdown(n int) string {
	var b strings.Builder
	b.WriteString("# Why TestRetry flakes\n\n")
	for i := 1; b.Len() < n; i++ {
		switch i % 6 {
		case 0:
			fmt.Fprintf(&b, "## Step %d\n\n", i)
		case 1, 2:
			fmt.Fprintf(&b, "- Step %d: checked the **retry loop** and the `clock`, see [the log](https://ci.example/run/%d).\n", i, i)
		case 3:
			fmt.Fprintf(&b, "\n```go\nfor attempt := range %d {\n\tif err := try(); err == nil {\n\t\tbreak\n\t}\n}\n```\n\n", i)
		default:
			fmt.Fprintf(&b, "Step %d: nothing odd in _this_ run; a < b && c > d holds.\n\n", i)
		}
	}
	return b.String()
}

// TestSlackPersonAndAgent: a top-level message from an allowed person
// starts a session in its thread; the agent is notified, reads it, streams
// 8,600 characters of markdown in many steps, posts an answer and yields.
// The thread shows one output message with the whole final text, the
// answer once, and nothing else from the bot: the answer is the turn's one
// notifying message (Slack has no silent posts, so the output message's
// first post notifies too; see the adapter's doc). Slack's limits are on
// and nothing is refused with 429, no chat.update re-sends what a message
// shows already, and every envelope is acknowledged in time.
func TestSlackPersonAndAgent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackBubbleStack(t, slacktest.Options{Limits: true, AssistantThreads: true})
		thread, session, _ := st.session("Why does TestRetry flake?")

		final := slackMarkdown(8600)
		// The agent streams in 43 steps; at every tenth it waits until the
		// thread shows that much, as a person watching would see it grow.
		const steps = 43
		for i := 1; i <= steps; i++ {
			text := final[:len(final)*i/steps]
			st.output(session, text)
			if i%10 == 0 {
				st.await(fmt.Sprintf("the output of step %d", i), func() bool {
					for _, m := range st.botReplies(thread) {
						if slackShown(m) == text {
							return true
						}
					}
					return false
				})
			}
		}
		const answer = "Found it: the retry loop reads the **wall clock**."
		st.agent.call(t, "chat.assistant.post", map[string]any{"session_id": session, "content": answer}, nil)
		st.agent.call(t, "loop.yield_turn", map[string]any{"session_id": session}, nil)

		st.await("the whole final output and the answer", func() bool {
			var out, ans bool
			for _, m := range st.botReplies(thread) {
				out = out || slackShown(m) == final
				ans = ans || slackShown(m) == answer
			}
			return out && ans
		})
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}

		var outputs, answers int
		for _, m := range st.botReplies(thread) {
			switch shown := slackShown(m); shown {
			case final:
				outputs++
				if m.Edits < 4 {
					t.Errorf("the output message was edited %d times: want it posted once and edited as the text grew", m.Edits)
				}
			case answer:
				answers++
			default:
				t.Errorf("the thread shows a message of the bot's besides the output and the answer: %q", shown)
			}
		}
		if outputs != 1 || answers != 1 {
			t.Errorf("%d output messages with the final text and %d answers, want one of each", outputs, answers)
		}
		if n := st.srv.RateLimited(); n > 0 {
			t.Errorf("%d calls were refused with 429: the outbox overran Slack's limits", n)
		}
		for _, m := range st.srv.Replies(st.channel, thread) {
			if m.Unchanged > 0 {
				t.Errorf("message %s was re-sent unchanged %d times (of %d edits)", m.TS, m.Unchanged, m.Edits)
			}
		}
		for _, c := range st.srv.Calls() {
			if c.Error != "" {
				t.Errorf("%s answered %s", c.Method, c.Error)
			}
		}
		// Every envelope was acknowledged in time: none came twice.
		st.acked("events_api")
		for _, e := range st.srv.Envelopes() {
			if e.RetryAttempt > 0 {
				t.Errorf("an envelope was redelivered (retry_attempt %d): its ack came later than Slack waits", e.RetryAttempt)
			}
		}
	})
}
