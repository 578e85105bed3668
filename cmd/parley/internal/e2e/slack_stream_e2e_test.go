package e2e

// Issue 9's streamed output on Slack ([slack] stream = true), through
// parley serve's wiring and an MCP agent: the live output carried by
// chat.startStream / appendStream / stopStream where the workspace offers
// them, and by chat.update where it refuses them or after a restart.

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
)

// newSlackStreamStack starts parley serve with [slack] stream = true
// against a fake Slack with opts, on a fake clock (call it inside
// synctest.Test).
func newSlackStreamStack(t *testing.T, opts slacktest.Options) *slackStack {
	t.Helper()
	st := newSlackBubbleStackConfig(t, opts)
	slackConfig(&st.cfg).Stream = true
	st.start()
	return st
}

// slackStreamTurn has the agent stream final in steps into session (at
// every tenth step waiting until thread shows that much), post answer and
// yield, and waits until thread shows both.
func slackStreamTurn(st *slackStack, thread, session, final, answer string, steps int) {
	st.t.Helper()
	for i := 1; i <= steps; i++ {
		text := final[:len(final)*i/steps]
		st.output(session, text)
		if i%10 == 0 {
			st.await(fmt.Sprintf("the output of step %d", i), func() bool { return slackStreamShows(st, thread, text) })
		}
	}
	st.agent.call(st.t, "chat.assistant.post", map[string]any{"session_id": session, "content": answer}, nil)
	st.agent.call(st.t, "loop.yield_turn", map[string]any{"session_id": session}, nil)
	st.await("the whole final output and the answer", func() bool {
		return slackStreamShows(st, thread, final) && slackStreamShows(st, thread, answer)
	})
	if err := st.m.Daemon().WaitIdle(st.t.Context()); err != nil {
		st.t.Fatal(err)
	}
}

// slackStreamShows reports whether a bot reply in thread shows text,
// whether posted with blocks or streamed as markdown.
func slackStreamShows(st *slackStack, thread, text string) bool {
	for _, m := range st.botReplies(thread) {
		if slackShown(m) == text || slMarkdown(m) == text {
			return true
		}
	}
	return false
}

// slackStreamCheckThread checks that thread holds exactly one message with
// the final output and one with the answer, and nothing else of the bot's,
// and that Slack refused nothing with 429.
func slackStreamCheckThread(st *slackStack, thread, final, answer string) {
	st.t.Helper()
	var outputs, answers int
	for _, m := range st.botReplies(thread) {
		switch {
		case slackShown(m) == final || slMarkdown(m) == final:
			outputs++
		case slackShown(m) == answer:
			answers++
		default:
			st.t.Errorf("the thread shows a message of the bot's besides the output and the answer: %.80q", slackShown(m))
		}
	}
	if outputs != 1 || answers != 1 {
		st.t.Errorf("%d output messages with the final text and %d answers, want one of each", outputs, answers)
	}
	if n := st.srv.RateLimited(); n > 0 {
		st.t.Errorf("%d calls were refused with 429", n)
	}
}

// TestSlackStreamPersonAndAgent: with streaming on and offered, the agent's
// 8.6k characters of markdown, streamed in 43 steps, arrive whole in one
// output message that was started with chat.startStream and grown with
// chat.appendStream — never posted (the agent's 43 steps coalesce into an
// append a second at most) — and the answer that follows ends the stream;
// a final edit still queued then is chat.update's. Slack's limits are on and answer no 429.
func TestSlackStreamPersonAndAgent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackStreamStack(t, slacktest.Options{Limits: true, AssistantThreads: true, Streaming: true})
		thread, session, _ := st.session("Why does TestRetry flake?")
		final := slackMarkdown(8600)
		const answer = "Found it: the retry loop reads the **wall clock**."
		slackStreamTurn(st, thread, session, final, answer, 43)
		slackStreamCheckThread(st, thread, final, answer)

		starts, appends, stops := slackCalls(st.srv, "chat.startStream"), slackCalls(st.srv, "chat.appendStream"), slackCalls(st.srv, "chat.stopStream")
		if len(starts) != 1 || len(stops) != 1 || len(appends) < 2 {
			t.Errorf("%d starts, %d appends, %d stops: want the output started once, grown in several appends, stopped once",
				len(starts), len(appends), len(stops))
		}
		// While the output streams nothing is updated (Ann's root shows the
		// status as a reaction). The answer, sent first, ends the stream; a
		// final edit that comes after it is chat.update's, once.
		stopped := false
		updates := 0
		for _, c := range st.srv.Calls() {
			switch c.Method {
			case "chat.stopStream":
				stopped = true
			case "chat.update":
				if c.Error == "cant_update_message" {
					continue // the status's probe of Ann's root: not parley's to edit
				}
				updates++
				if !stopped {
					t.Errorf("chat.update while the output streamed: %+v", c)
				}
			}
		}
		if updates > 1 {
			t.Errorf("%d chat.update calls after the stream, want at most the final one", updates)
		}
		for _, c := range st.srv.Calls() {
			if c.Error != "" && !(c.Method == "chat.update" && c.Error == "cant_update_message") {
				t.Errorf("%s answered %s", c.Method, c.Error)
			}
		}
	})
}

// TestSlackStreamRefusedFallsBack: with streaming on but refused by the
// workspace, the first output costs one refused chat.startStream and is
// posted and edited with chat.update as without streaming; the refusal is
// remembered, so a second session's output asks no more. Each thread ends
// with one output message showing the whole text and no 429.
func TestSlackStreamRefusedFallsBack(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackStreamStack(t, slacktest.Options{Limits: true, AssistantThreads: true, StreamingRefusal: "access_denied"})
		final := slackMarkdown(8600)
		for k, ask := range []string{"Why does TestRetry flake?", "And TestBackoff?"} {
			thread := st.srv.Post(st.ann, st.channel, "", ask)
			session := ""
			servetest.PollUntil(t, time.Minute, "the session of "+ask, func() bool {
				s, ok := st.sessionAt(thread)
				session = string(s.ID)
				return ok
			}, nil)
			answer := fmt.Sprintf("Answer %d.", k+1)
			slackStreamTurn(st, thread, session, final, answer, 43)
			slackStreamCheckThread(st, thread, final, answer)
		}
		if n := len(slackCalls(st.srv, "chat.startStream")); n != 1 {
			t.Errorf("%d chat.startStream calls, want the one refused", n)
		}
		if len(slackCalls(st.srv, "chat.update")) < 4 {
			t.Error("the outputs were not edited with chat.update")
		}
	})
}

// TestSlackStreamRestartMidStream: parley restarts while an output streams
// (its open stream is known only in memory, as after kill -9); the agent
// goes on, and the same message is edited further — Slack's
// streaming_state_conflict tells that it still streams, and it is stopped
// and updated — never a second output message.
func TestSlackStreamRestartMidStream(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackStreamStack(t, slacktest.Options{Limits: true, AssistantThreads: true, Streaming: true})
		thread, session, _ := st.session("Why does TestRetry flake?")
		final := slackMarkdown(8600)
		half := final[:len(final)/2]
		st.output(session, half)
		st.await("the first half streamed", func() bool { return slackStreamShows(st, thread, half) })
		st.restart()
		const answer = "Found it."
		slackStreamTurn(st, thread, session, final, answer, 10)
		slackStreamCheckThread(st, thread, final, answer)
		if n := len(slackCalls(st.srv, "chat.startStream")); n != 1 {
			t.Errorf("%d chat.startStream calls, want 1: the restarted daemon must not start another output message", n)
		}
	})
}
