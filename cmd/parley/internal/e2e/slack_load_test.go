package e2e

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
)

// slStack is a second Slack driver, for the load tests: a channel with
// Ann, the one person allowed in; the daemon's warnings and errors are
// shown when the test fails.
type slStack struct {
	*stack
	srv     *slacktest.Server
	channel string
	ann     slacktest.User
}

// newSLStack starts a stack against a fake Slack with opts, on a fake
// clock (call it inside synctest.Test; see bubbleNet).
func newSLStack(t *testing.T, opts slacktest.Options) *slStack {
	t.Helper()
	n := bubbleNet(t)
	opts.Listener = n.Host().Listen()
	srv := slacktest.NewServer(t, opts)
	st := &slStack{stack: newStack(t), srv: srv, channel: srv.NewChannel("sessions"), ann: srv.NewUser("Ann")}
	st.net = n
	slackSection(&st.cfg, srv, st.channel, st.ann)
	st.captureLog(slog.LevelWarn)
	st.start()
	return st
}

// await waits for the fake's state to satisfy cond.
func (st *slStack) await(timeout time.Duration, what string, cond func() bool) {
	st.t.Helper()
	st.srv.Await(st.t, timeout, what, cond)
}

// slRead has the agent read, from after, until it has seen every text in
// want; it returns each one's session and the new watermark. It polls
// chat_read_since, the stateless catch-up, rather than relying on
// notifications.
func slRead(t *testing.T, a *agent, after string, want ...string) (map[string]string, string) {
	t.Helper()
	sessions := map[string]string{}
	servetest.PollUntil(t, time.Minute, fmt.Sprintf("the agent to read %q", want), func() bool {
		var r readResult
		a.call(t, "chat_read_since", map[string]any{"after_id": after}, &r)
		if r.LastID != "" {
			after = r.LastID
		}
		for _, m := range r.Messages {
			if m.Author == "user" && slices.Contains(want, m.Content) {
				if _, dup := sessions[m.Content]; dup {
					t.Errorf("the agent read %q twice", m.Content)
				}
				sessions[m.Content] = m.SessionID
			}
		}
		return len(sessions) == len(want)
	}, nil)
	return sessions, after
}

// slMarkdown is what a message shows: the text of its markdown blocks
// (where parley puts the agent's markdown), else its text.
func slMarkdown(m slacktest.Message) string {
	var blocks []struct {
		Type string          `json:"type"`
		Text json.RawMessage `json:"text"`
	}
	_ = json.Unmarshal(m.Blocks, &blocks)
	var b strings.Builder
	found := false
	for _, bl := range blocks {
		var s string
		if bl.Type == "markdown" && json.Unmarshal(bl.Text, &s) == nil {
			b.WriteString(s)
			found = true
		}
	}
	if !found {
		return m.Text
	}
	return b.String()
}

// slBotReplies are the bot's messages in a thread, root excluded.
func slBotReplies(srv *slacktest.Server, channel, thread string) []slacktest.Message {
	var out []slacktest.Message
	for _, m := range srv.Replies(channel, thread) {
		if m.BotID == srv.BotID && m.TS != thread {
			out = append(out, m)
		}
	}
	return out
}

// slShowing are the bot's replies in a thread whose text contains s.
func slShowing(srv *slacktest.Server, channel, thread, s string) []slacktest.Message {
	var out []slacktest.Message
	for _, m := range slBotReplies(srv, channel, thread) {
		if strings.Contains(slMarkdown(m), s) {
			out = append(out, m)
		}
	}
	return out
}

// slIdenticalEdits lists the bot's edits that changed nothing, and counts
// the bot's edits it looked at: Slack sends an app a message_changed event
// for each edit of its messages, with the message before and after, and the
// fake records every envelope. Redeliveries of one event are counted once.
func slIdenticalEdits(srv *slacktest.Server) (identical []string, edits int) {
	type shown struct {
		Text   string          `json:"text"`
		Blocks json.RawMessage `json:"blocks"`
		BotID  string          `json:"bot_id"`
		TS     string          `json:"ts"`
	}
	seen := map[string]bool{}
	for _, env := range srv.Envelopes() {
		var p struct {
			EventID string `json:"event_id"`
			Event   struct {
				Subtype  string `json:"subtype"`
				Message  shown  `json:"message"`
				Previous shown  `json:"previous_message"`
			} `json:"event"`
		}
		if env.Type != "events_api" || json.Unmarshal(env.Payload, &p) != nil || p.Event.Subtype != "message_changed" || seen[p.EventID] {
			continue
		}
		seen[p.EventID] = true
		now, before := p.Event.Message, p.Event.Previous
		if now.BotID == "" {
			continue
		}
		edits++
		if now.Text == before.Text && string(now.Blocks) == string(before.Blocks) {
			identical = append(identical, fmt.Sprintf("message %s edited to what it showed: %.60q", now.TS, now.Text))
		}
	}
	return identical, edits
}

// slResent lists the bot's replies in a thread that repeat an earlier one
// word for word.
func slResent(srv *slacktest.Server, channel, thread string) []string {
	seen := map[string]string{}
	var out []string
	for _, m := range slBotReplies(srv, channel, thread) {
		key := m.Text + "\x00" + string(m.Blocks)
		if first, dup := seen[key]; dup {
			out = append(out, fmt.Sprintf("message %s repeats %s: %.60q", m.TS, first, m.Text))
			continue
		}
		seen[key] = m.TS
	}
	return out
}

// slStream is the agent's markdown for a session after step i: the
// benchmarks' streamStep, under a heading that names the session.
func slStream(session, steps int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Session %d", session)
	for i := range steps {
		b.WriteString(streamStep(i))
	}
	return b.String()
}

// TestSlackFiveSessionsStreamIntoOneChannel: Ann opens five threads in the
// channel and an agent answers all five at once, streaming about 8.6k
// characters of markdown into each over 10 s, then posting an answer and
// yielding, through parley serve with Slack's limits on. The five share the
// channel's one message a second and the workspace's 50 edits a minute.
// Slack never answers 429; every thread ends with one output message,
// edited in place, showing its final text whole, and its answer once; no
// edit repeats what a message shows, no message is posted twice.
func TestSlackFiveSessionsStreamIntoOneChannel(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSLStack(t, slacktest.Options{Limits: true})
		const n, steps = 5, 100
		roots := make([]string, n)
		asks := make([]string, n)
		for k := range n {
			asks[k] = fmt.Sprintf("Task %d: explain the retry loop", k)
			roots[k] = st.srv.Post(st.ann, st.channel, "", asks[k])
		}
		sessions, _ := slRead(t, st.agent, "", asks...)

		answer := func(k int) string { return fmt.Sprintf("Answer %d: the loop reads the **wall clock**.", k) }
		ids := make([]string, n)
		for k := range n {
			ids[k] = sessions[asks[k]]
		}
		st.streamTurns(ids, steps, slStream, answer)

		st.await(3*time.Minute, "every thread's final text and answer", func() bool {
			for k := range n {
				if len(slShowing(st.srv, st.channel, roots[k], "wall clock")) == 0 {
					return false
				}
				out := slShowing(st.srv, st.channel, roots[k], "(step ")
				if len(out) == 0 || slMarkdown(out[len(out)-1]) != slStream(k, steps) {
					return false
				}
			}
			return true
		})
		st.idle()

		if got := st.srv.RateLimited(); got > 0 {
			t.Errorf("Slack answered 429 %d times: the outbox overran its limits", got)
		}
		for k := range n {
			out := slShowing(st.srv, st.channel, roots[k], "(step ")
			if len(out) != 1 {
				t.Errorf("thread %d has %d output messages, want one edited in place", k, len(out))
				continue
			}
			if out[0].Edits == 0 {
				t.Errorf("thread %d: the output message was never edited: it was posted once with the final text, so the stream was not shown", k)
			}
			if got := len(slShowing(st.srv, st.channel, roots[k], answer(k))); got != 1 {
				t.Errorf("thread %d shows its answer %d times, want once", k, got)
			}
			for _, r := range slResent(st.srv, st.channel, roots[k]) {
				t.Errorf("thread %d: %s", k, r)
			}
		}
		identical, edits := slIdenticalEdits(st.srv)
		for _, e := range identical {
			t.Error(e)
		}
		if edits < n {
			t.Errorf("Slack told of %d edits by the bot, want at least one per thread: the check of identical edits saw nothing", edits)
		}
		t.Logf("%d calls, %d edits by the bot", len(st.srv.Calls()), edits)
		if top := st.srv.Messages(st.channel); len(top) != n {
			t.Errorf("the channel has %d top-level messages, want Ann's %d: every bot message stays in its thread", len(top), n)
		}
	})
}
