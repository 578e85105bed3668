package e2e

// Slack's Events API over HTTP (slack.mode = "events"), end to end: the
// fake Slack POSTs signed requests to parley serve's listener at
// slack.events_path instead of using Socket Mode.

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/slack"
	"github.com/parley-chat/parley/adapters/slack/slacktest"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
)

// slackEventsSecret is the app's signing secret in these tests.
const slackEventsSecret = "e2e0signing0secret0000000000abcd"

// newSlackEventsStack starts parley serve in events mode, on a fake clock
// (call it inside synctest.Test), against a fake Slack and saves its Request URL there, which answers Slack's
// url_verification challenge. adjust, if any, changes how the fake
// delivers (its timeout, its retry delays).
func newSlackEventsStack(t *testing.T, opts slacktest.Options, adjust ...func(*slacktest.EventsAPI)) *slackStack {
	t.Helper()
	st := newSlackBubbleStackConfig(t, opts)
	slackConfig(&st.cfg).Mode = slack.ModeEvents
	slackConfig(&st.cfg).AppToken = "" // no Socket Mode
	slackConfig(&st.cfg).SigningSecret = slackEventsSecret
	st.start()
	url := "http://" + st.m.Addr() + slackConfig(&st.cfg).EventsPath
	// The fake's requests, like Slack's, come from elsewhere: a host of
	// their own, a connection each.
	fake := st.net.Host()
	cfg := slacktest.EventsAPI{URL: url, SigningSecret: slackEventsSecret, Client: &http.Client{
		Transport:     &http.Transport{DisableKeepAlives: true, DialContext: fake.DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	for _, f := range adjust {
		f(&cfg)
	}
	if err := st.srv.DeliverEvents(cfg); err != nil {
		t.Fatal(err)
	}
	return st
}

// slackRequests waits until the fake sent at least n requests of type
// typ and every one is answered or given up, and returns them.
func (st *slackStack) slackRequests(typ string, n int) []slacktest.Request {
	st.t.Helper()
	var out []slacktest.Request
	st.await("the "+typ+" requests answered", func() bool {
		out = out[:0]
		for _, r := range st.srv.Requests() {
			if r.Type != typ {
				continue
			}
			if r.Answered.IsZero() && r.Err == "" {
				return false
			}
			out = append(out, r)
		}
		return len(out) >= n
	})
	return out
}

// inboxWith counts the inbox messages whose content is text.
func (st *slackStack) inboxWith(text string) int {
	n := 0
	for _, m := range st.inbox() {
		if m.Content == text {
			n++
		}
	}
	return n
}

// TestSlackEventsPersonAndAgent: in events mode, parley answered the URL
// check; a top-level message arrives as a signed request, is acknowledged
// with 200 once durable, starts a session in its thread, the agent is
// notified, and its streamed output and yield end as one output message
// in the thread.
func TestSlackEventsPersonAndAgent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackEventsStack(t, slacktest.Options{Limits: true})
		if rs := st.slackRequests("url_verification", 1); len(rs) != 1 || rs[0].Status != http.StatusOK {
			t.Fatalf("url_verification requests %+v", rs)
		}
		thread, session, _ := st.session("Why is the build red?")
		var mine []slacktest.Request
		for _, r := range st.slackRequests("events_api", 1) {
			if strings.Contains(string(r.Body), "Why is the build red?") {
				mine = append(mine, r)
			}
		}
		if len(mine) != 1 || mine[0].Status != http.StatusOK || mine[0].RetryNum != 0 || mine[0].Late {
			t.Fatalf("the message's requests %+v, want one answered 200 in time", mine)
		}

		// Acknowledged only once durable: when Slack has its 200, the reply
		// is in the inbox already.
		st.srv.Post(st.ann, st.channel, thread, "It was green this morning")
		st.await("the reply acknowledged", func() bool {
			for _, r := range st.srv.Requests() {
				if strings.Contains(string(r.Body), "It was green this morning") && r.Status == http.StatusOK {
					return true
				}
			}
			return false
		})
		if n := st.inboxWith("It was green this morning"); n != 1 {
			t.Errorf("acknowledged with the reply %d times in the inbox, want once", n)
		}

		final := slackMarkdown(3000)
		for i := 1; i <= 5; i++ {
			st.output(session, final[:len(final)*i/5])
		}
		st.agent.call(t, "loop.yield_turn", map[string]any{"session_id": session}, nil)
		st.await("the whole output in the thread", func() bool {
			for _, m := range st.botReplies(thread) {
				if slackShown(m) == final {
					return true
				}
			}
			return false
		})
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		outputs := 0
		for _, m := range st.botReplies(thread) {
			if strings.HasPrefix(slackShown(m), "# Why TestRetry flakes") {
				outputs++
			}
		}
		if outputs != 1 {
			t.Errorf("%d output messages in the thread, want 1", outputs)
		}
		if s, ok := st.sessionAt(thread); !ok || string(s.ID) != session {
			t.Errorf("the thread's session is %v (%v), want %s", s.ID, ok, session)
		}
		if n := st.srv.RateLimited(); n > 0 {
			t.Errorf("%d calls refused with 429", n)
		}
	})
}

// TestSlackEventsRetried: Slack retries a request whose answer it did not
// see (lost on the way back) with X-Slack-Retry-Num; parley acknowledges
// the retry and appends nothing twice: one session, one message.
func TestSlackEventsRetried(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackEventsStack(t, slacktest.Options{})
		st.srv.LoseNextAnswer()
		thread, _, last := st.session("Deploy on Friday?")
		var attempts []slacktest.Request
		st.await("the retry answered", func() bool {
			attempts = attempts[:0]
			for _, r := range st.srv.Requests() {
				if strings.Contains(string(r.Body), "Deploy on Friday?") && !r.Answered.IsZero() {
					attempts = append(attempts, r)
				}
			}
			return len(attempts) == 2
		})
		if a := attempts[1]; a.RetryNum != 1 || a.RetryReason != "http_timeout" || a.Status != http.StatusOK || a.EventID != attempts[0].EventID {
			t.Errorf("the retry %+v, want retry 1 (http_timeout) of %s answered 200", a, attempts[0].EventID)
		}
		if !attempts[0].Lost || attempts[0].Status != http.StatusOK {
			t.Errorf("the first attempt %+v, want answered 200 and lost", attempts[0])
		}
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := st.inboxWith("Deploy on Friday?"); n != 1 {
			t.Errorf("the message is %d times in the inbox, want once", n)
		}
		if n := len(st.sessions()); n != 1 {
			t.Errorf("%d sessions, want 1", n)
		}

		// A reply in the thread, retried too, reaches the agent once.
		st.srv.LoseNextAnswer()
		st.srv.Post(st.ann, st.channel, thread, "On Monday then")
		r := st.heard(last)
		if len(r.Messages) != 1 || r.Messages[0].Content != "On Monday then" {
			t.Fatalf("the agent read %+v", r.Messages)
		}
		st.await("the reply's retry answered", func() bool {
			n := 0
			for _, r := range st.srv.Requests() {
				if strings.Contains(string(r.Body), "On Monday then") && r.Status == http.StatusOK {
					n++
				}
			}
			return n == 2
		})
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := st.inboxWith("On Monday then"); n != 1 {
			t.Errorf("the reply is %d times in the inbox, want once", n)
		}
	})
}

// TestSlackEventsRefused: requests not signed with the signing secret, or
// signed more than five minutes ago (a replay), are refused with 401 and
// append nothing — a forged message, a replay of a real one, an unsigned
// one.
func TestSlackEventsRefused(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackEventsStack(t, slacktest.Options{})
		thread, _, _ := st.session("A real question")
		before := len(st.inbox())
		var real slacktest.Request
		for _, r := range st.slackRequests("events_api", 1) {
			if strings.Contains(string(r.Body), "A real question") {
				real = r
			}
		}

		forged := st.srv.ForgedMessage(st.ann, st.channel, "", "Forged: wire the money")
		reply := st.srv.ForgedMessage(st.ann, st.channel, thread, "Forged reply")
		stale := time.Now().Add(-6 * time.Minute)
		for _, tc := range []struct {
			name string
			body []byte
			sig  slacktest.Signature
		}{
			{"wrong secret", forged, slacktest.Signature{Secret: "not-the-secret"}},
			{"unsigned", forged, slacktest.Signature{None: true}},
			{"stale timestamp", forged, slacktest.Signature{Secret: slackEventsSecret, At: stale}},
			{"from the future", reply, slacktest.Signature{Secret: slackEventsSecret, At: time.Now().Add(6 * time.Minute)}},
			{"a reply with a wrong secret", reply, slacktest.Signature{Secret: "not-the-secret"}},
			{"a replayed request", real.Body, slacktest.Signature{Secret: slackEventsSecret, At: stale}},
		} {
			r := st.srv.Send("events_api", tc.body, "application/json", tc.sig)
			if r.Status != http.StatusUnauthorized {
				t.Errorf("%s: answered %d (%s), want 401", tc.name, r.Status, r.Err)
			}
		}
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		if after := st.inbox(); len(after) != before {
			t.Errorf("the inbox grew from %d to %d messages: %+v", before, len(after), after[before:])
		}
		if n := len(st.sessions()); n != 1 {
			t.Errorf("%d sessions, want 1", n)
		}
		select {
		case <-st.agent.notes:
			t.Error("the agent was notified of a refused request")
		default:
		}
	})
}

// TestSlackEventsSlashAndClick: /parley new and a button click arrive as
// form-encoded requests; /parley new posts a root for a new session, and
// an allowed person's click answers the agent's question while a
// stranger's does nothing.
func TestSlackEventsSlashAndClick(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackEventsStack(t, slacktest.Options{Limits: true})
		st.srv.Slash(st.ann, st.channel, "/parley", "new Release notes")
		root := st.topLevel("Release notes")
		var s core.Session
		servetest.PollUntil(t, 30*time.Second, "a session in the root's thread", func() bool {
			var ok bool
			s, ok = st.sessionAt(root.TS)
			return ok
		}, nil)
		if s.Title != "Release notes" {
			t.Errorf("the session is titled %q", s.Title)
		}
		if rs := st.slackRequests("slash_commands", 1); len(rs) != 1 || rs[0].Status != http.StatusOK || rs[0].Late {
			t.Errorf("the slash command's requests %+v, want one answered 200 in time", rs)
		}
		// /parley help answers with its reply as the body, only for Ann.
		st.srv.Slash(st.ann, st.channel, "/parley", "help")
		st.await("the help answered", func() bool {
			for _, r := range st.srv.Requests() {
				if strings.Contains(string(r.Answer), "ephemeral") && strings.Contains(string(r.Answer), "!cancel") {
					return true
				}
			}
			return false
		})

		st.srv.Post(st.ann, st.channel, root.TS, "Draft them")
		r := st.heard("")
		if len(r.Messages) != 1 || r.Messages[0].SessionID != string(s.ID) {
			t.Fatalf("the agent read %+v", r.Messages)
		}
		answer := st.ask(string(s.ID), "Include the fixes?", "Yes", "No")
		q := st.showing(root.TS, "Include the fixes?")
		buttons := slackButtons(q)
		if len(buttons) != 2 {
			t.Fatalf("buttons %+v", buttons)
		}
		st.srv.Click(st.stranger, st.channel, q.TS, buttons[1].ActionID, buttons[1].Value)
		if rs := st.slackRequests("interactive", 1); len(rs) != 1 || rs[0].Status != http.StatusOK {
			t.Fatalf("the stranger's click %+v, want answered 200", rs)
		}
		select {
		case a := <-answer:
			t.Fatalf("the stranger's click answered %q", a)
		default:
		}
		st.srv.Click(st.ann, st.channel, q.TS, buttons[0].ActionID, buttons[0].Value)
		select {
		case a := <-answer:
			if a != "Yes" {
				t.Errorf("ui.ask answered %q, want Yes", a)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("ui.ask did not return")
		}
		st.await("the question showing the answer", func() bool {
			m, _ := st.srv.Message(st.channel, q.TS)
			return strings.Contains(slackShown(m), "chose *Yes*")
		})
		for _, r := range st.slackRequests("interactive", 2) {
			if r.Status != http.StatusOK || r.RetryNum != 0 {
				t.Errorf("click request %+v", r)
			}
		}
		if len(st.srv.Envelopes()) != 0 {
			t.Errorf("Socket Mode envelopes in events mode: %d", len(st.srv.Envelopes()))
		}
	})
}

// TestSlackEventsRetriedWhileHandled: Slack does not wait for a late
// answer: it retries at its timeout while parley is still handling the
// first request (here users.info, asked for a person's name before the
// append, does not answer). The retries wait for the first in the
// conversation's lane, are recognised and acknowledged, and the reply is
// appended once.
func TestSlackEventsRetriedWhileHandled(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackEventsStack(t, slacktest.Options{}, func(c *slacktest.EventsAPI) {
			c.Timeout, c.RetryDelays = 300*time.Millisecond, []time.Duration{0, 0, 0}
		})
		thread, _, last := st.session("Who broke main?")
		// From now on users.info (Bob's name, not known yet) hangs; nothing
		// else is touched.
		st.srv.InjectFaults(slacktest.Faults{Every: 1, Kinds: []slacktest.Fault{slacktest.FaultHang}, Exempt: []string{
			"auth.test", "apps.connections.open", "conversations.info", "conversations.history", "conversations.replies",
			"chat.postMessage", "chat.update", "chat.delete", "chat.getPermalink", "reactions.add", "reactions.remove",
			"files.getUploadURLExternal", "files.completeUploadExternal", "files.info", "assistant.threads.setStatus",
		}})
		st.srv.Post(st.bob, st.channel, thread, "Not me")
		r := st.heard(last)
		if len(r.Messages) != 1 || r.Messages[0].Content != "Not me" {
			t.Fatalf("the agent read %+v", r.Messages)
		}
		// Every attempt comes within the hanging users.info call (1.5s), so
		// every answer is late and Slack retries three times.
		var attempts []slacktest.Request
		st.await("every attempt answered", func() bool {
			attempts = attempts[:0]
			for _, r := range st.srv.Requests() {
				if strings.Contains(string(r.Body), "Not me") {
					if r.Answered.IsZero() && r.Err == "" {
						return false
					}
					attempts = append(attempts, r)
				}
			}
			return len(attempts) == 4 // the first and Slack's three retries
		})
		if !attempts[0].Late || !attempts[1].Sent.Before(attempts[0].Answered) || attempts[1].RetryReason != "http_timeout" {
			t.Errorf("attempts %+v: want the first answered late, after its retry (http_timeout) was sent", attempts)
		}
		for _, a := range attempts {
			if a.Status != http.StatusOK {
				t.Errorf("attempt %d answered %d (%s), want 200", a.RetryNum, a.Status, a.Err)
			}
		}
		st.srv.InjectFaults(slacktest.Faults{})
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := st.inboxWith("Not me"); n != 1 {
			t.Errorf("the reply is %d times in the inbox, want once", n)
		}
		select {
		case <-st.agent.notes:
			t.Error("the agent was notified again")
		default:
		}
	})
}

// TestSlackEventsRetryAfterRestart: parley stored a reply and answered,
// but the answer was lost; parley restarts; Slack's retry (to the same
// Request URL, refused while parley was down) reaches the new process,
// which recognises the stored reply by its channel and ts: acknowledged,
// not appended again.
func TestSlackEventsRetryAfterRestart(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackEventsStack(t, slacktest.Options{}, func(c *slacktest.EventsAPI) {
			c.RetryDelays = []time.Duration{0, 2 * time.Second, 5 * time.Second}
		})
		thread, _, last := st.session("Release today?")
		st.srv.LoseNextAnswer()
		st.srv.Post(st.ann, st.channel, thread, "Ship it")
		if r := st.heard(last); len(r.Messages) != 1 || r.Messages[0].Content != "Ship it" {
			t.Fatalf("the agent read %+v", r.Messages)
		}
		st.await("the lost answer", func() bool {
			for _, r := range st.srv.Requests() {
				if strings.Contains(string(r.Body), "Ship it") && r.Lost {
					return true
				}
			}
			return false
		})

		// The same data and the same address, so the same Request URL.
		addr := st.m.Addr()
		st.stop()
		st.cfg.HTTP.Listen = addr
		st.start()

		var retry slacktest.Request
		st.await("a retry answered by the new process", func() bool {
			for _, r := range st.srv.Requests() {
				if strings.Contains(string(r.Body), "Ship it") && r.RetryNum > 0 && r.Status == http.StatusOK {
					retry = r
					return true
				}
			}
			return false
		})
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := st.inboxWith("Ship it"); n != 1 {
			t.Errorf("the reply is %d times in the inbox after retry %d (%s), want once", n, retry.RetryNum, retry.RetryReason)
		}
		if n := len(st.sessions()); n != 1 {
			t.Errorf("%d sessions, want 1", n)
		}
	})
}

// TestSlackEventsDirectMessage: in events mode too, an allowed person's
// DM starts a session in its thread, and a stranger's is acknowledged
// (200, so Slack does not retry it) and starts nothing.
func TestSlackEventsDirectMessage(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackEventsStack(t, slacktest.Options{})
		strangerDM := st.srv.OpenDM(st.stranger)
		st.srv.Post(st.stranger, strangerDM, "", "Let me in")
		dm := st.srv.OpenDM(st.ann)
		root := st.srv.Post(st.ann, dm, "", "Plan my week")
		r := st.heard("")
		if len(r.Messages) != 1 || r.Messages[0].Content != "Plan my week" {
			t.Fatalf("the agent read %+v", r.Messages)
		}
		if s, ok := st.dmSessionAt(dm, root); !ok || string(s.ID) != r.Messages[0].SessionID {
			t.Errorf("the DM thread's session %q (%v), want %s", s.ID, ok, r.Messages[0].SessionID)
		}
		for _, req := range st.slackRequests("events_api", 2) {
			if req.Status != http.StatusOK || req.RetryNum != 0 {
				t.Errorf("request %+v, want answered 200 at once", req)
			}
		}
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := len(st.sessions()); n != 1 {
			t.Errorf("%d sessions, want 1", n)
		}
		if n := st.inboxWith("Let me in"); n != 0 {
			t.Errorf("the stranger's DM is in the inbox")
		}
		for _, m := range st.srv.Messages(strangerDM) {
			if m.BotID != "" {
				t.Errorf("the bot answered the stranger: %q", slackShown(m))
			}
		}
	})
}
