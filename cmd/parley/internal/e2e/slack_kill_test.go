package e2e

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
)

// TestSlackKilledMidStream: `parley serve` with the Slack adapter (Socket
// Mode) is killed (crash: as SIGKILL, on the fake clock) while an agent streams its output into a thread and while
// assistant messages wait for the channel's budget (chat.postMessage: one a
// second per channel). Ann writes once just before the kill and once while
// parley is down. After a restart the agent streams on: the output
// message posted before the kill is edited further (no second one is
// posted) and ends showing the whole final text, every assistant message
// arrives exactly once, and both of Ann's messages reach the agent exactly
// once — the first redelivered by Slack if parley died before acking it,
// the second queued by Slack until a socket connected.
func TestSlackKilledMidStream(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		net := bubbleNet(t)
		srv := slacktest.NewServer(t, slacktest.Options{Limits: true, Listener: net.Host().Listen()})
		channel := srv.NewChannel("sessions")
		ann := srv.NewUser("Ann")
		st := newStack(t)
		st.net, st.noAgent = net, true
		slackSection(&st.cfg, srv, channel, ann)
		st.captureLog(slog.LevelInfo)
		st.start()
		a := connectAgentVia(t, st.client(), st.m.Addr())

		root := srv.Post(ann, channel, "", "tell me everything")
		read, watermark := slRead(t, a, "", "tell me everything")
		session := read["tell me everything"]
		output := func(a *agent, steps int) {
			t.Helper()
			a.call(t, "session.output", map[string]any{"session_id": session, "content": slStream(0, steps)}, nil)
		}

		// The stream starts and its output message shows.
		for i := 1; i <= 20; i++ {
			output(a, i)
		}
		var before slacktest.Message
		srv.Await(t, time.Minute, "the output message to show step 19", func() bool {
			out := slShowing(srv, channel, root, "(step ")
			if len(out) == 1 && strings.Contains(slMarkdown(out[0]), "(step 019)") {
				before = out[0]
				return true
			}
			return false
		})

		// More answers than the channel lets out at once, and the stream goes
		// on meanwhile.
		const n = 8
		answer := func(k int) string { return fmt.Sprintf("Queued answer %d of %d", k, n) }
		for k := 1; k <= n; k++ {
			a.call(t, "chat.assistant.post", map[string]any{"session_id": session, "content": answer(k)}, nil)
		}
		for i := 21; i <= 30; i++ {
			output(a, i)
		}
		delivered := func() int {
			c := 0
			for k := 1; k <= n; k++ {
				c += len(slShowing(srv, channel, root, answer(k)))
			}
			return c
		}
		srv.Await(t, time.Minute, "two answers delivered", func() bool { return delivered() >= 2 })

		// When to kill. A send killed between Slack's answer and parley's
		// confirmation of it is sent again after the restart — chat.postMessage
		// takes no idempotency key — so the kill must come when no call can be
		// in flight. The channel's budget cannot provide that moment: it
		// renews every second, so the next send is never far (Telegram's
		// group budget, spent, leaves most of a minute). A 429 does: Slack
		// refuses the next message of the burst with Retry-After: 60 (as it
		// does when its approximate limits disagree with the client's), which
		// has no effect, and the outbox stops everything bound for the channel
		// for a minute. Once the 429 was answered and nothing is in flight,
		// nothing can start before the kill; the answers still queued are held
		// back by the pacing and the pause together.
		srv.FailNext("chat.postMessage", slacktest.Error{Code: "ratelimited", Status: 429, RetryAfter: time.Minute})
		srv.Await(t, time.Minute, "Slack's 429", func() bool {
			for _, c := range srv.Calls() {
				if c.Method == "chat.postMessage" && c.Error == "ratelimited" {
					return true
				}
			}
			return false
		})
		servetest.PollUntil(t, time.Minute, "nothing in flight", func() bool {
			return st.metric("parley_outbox_in_flight") == 0
		}, nil)
		// Ann writes, and parley dies before (most likely) acknowledging it.
		srv.Post(ann, channel, root, "one more thing")
		st.crash()
		_ = a.Close()
		atKill := delivered()
		if n-atKill < 3 {
			t.Fatalf("only %d of %d answers were still queued at the kill: the test needs the channel's pacing to hold them back", n-atKill, n)
		}
		t.Logf("killed with %d of %d answers delivered", atKill, n)
		srv.Post(ann, channel, root, "are you still there?")

		st.start()
		a = connectAgentVia(t, st.client(), st.m.Addr())
		slRead(t, a, watermark, "one more thing", "are you still there?")
		for i := 31; i <= 60; i++ {
			output(a, i)
		}
		a.call(t, "chat.assistant.post", map[string]any{"session_id": session, "content": "That is everything."}, nil)
		a.call(t, "loop.yield_turn", map[string]any{"session_id": session}, nil)

		final := slStream(0, 60)
		all := func() bool {
			out := slShowing(srv, channel, root, "(step ")
			if len(out) == 0 || slMarkdown(out[len(out)-1]) != final || len(slShowing(srv, channel, root, "That is everything.")) == 0 {
				return false
			}
			for k := 1; k <= n; k++ {
				if len(slShowing(srv, channel, root, answer(k))) == 0 {
					return false
				}
			}
			return true
		}
		srv.Await(t, 3*time.Minute, "the final text and every answer after the restart", all)
		servetest.PollUntil(t, 2*time.Minute, "the restarted daemon's outbox to be idle", func() bool {
			return st.metric("parley_outbox_queue_depth")+st.metric("parley_outbox_in_flight") == 0
		}, nil)

		out := slShowing(srv, channel, root, "(step ")
		if len(out) != 1 || out[0].TS != before.TS {
			var ts []string
			for _, m := range out {
				ts = append(ts, m.TS)
			}
			t.Errorf("output messages %v, want only %s, the one posted before the kill, edited further", ts, before.TS)
		} else if t.Logf("the output message %s: %d edits before the kill, %d in all", before.TS, before.Edits, out[0].Edits); out[0].Edits <= before.Edits {
			t.Errorf("the output message was edited %d times before the kill and %d in all: the restarted daemon did not edit it", before.Edits, out[0].Edits)
		}
		for k := 1; k <= n; k++ {
			if got := len(slShowing(srv, channel, root, answer(k))); got != 1 {
				t.Errorf("%q shown %d times, want exactly once", answer(k), got)
			}
		}
		for _, r := range slResent(srv, channel, root) {
			t.Error(r)
		}
		identical, _ := slIdenticalEdits(srv)
		for _, e := range identical {
			t.Error(e)
		}
		if got := srv.RateLimited(); got > 0 {
			t.Errorf("Slack's limits refused %d calls (beside the one 429 the test asked for)", got)
		}
		// Ann's messages reached the agent once each, however Slack delivered
		// them; read again now that every redelivery is long over.
		var r readResult
		a.call(t, "chat_read_since", map[string]any{"after_id": watermark}, &r)
		count := r.said()
		for _, text := range []string{"one more thing", "are you still there?"} {
			if count[text] != 1 {
				t.Errorf("the agent has %q %d times, want once", text, count[text])
			}
		}
		for _, e := range srv.Envelopes() {
			if strings.Contains(string(e.Payload), "one more thing") && e.RetryAttempt > 0 {
				t.Logf("%q was redelivered (retry_attempt %d): parley died before acknowledging it", "one more thing", e.RetryAttempt)
			}
		}
	})
}
