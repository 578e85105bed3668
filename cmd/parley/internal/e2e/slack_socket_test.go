package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
)

// slackExemptAllBut are the Web API methods parley calls, except the given ones:
// Faults.Exempt for injecting faults into those alone.
func slackExemptAllBut(methods ...string) []string {
	all := []string{
		"auth.test", "apps.connections.open", "conversations.info", "conversations.history", "conversations.replies",
		"users.info", "chat.postMessage", "chat.update", "chat.delete", "chat.getPermalink", "reactions.add",
		"reactions.remove", "files.getUploadURLExternal", "files.completeUploadExternal", "files.info",
		"chat.startStream", "chat.appendStream", "chat.stopStream", "assistant.threads.setStatus",
	}
	var out []string
	for _, m := range all {
		if !strings.Contains(strings.Join(methods, ","), m) {
			out = append(out, m)
		}
	}
	return out
}

// deliveries are the delivery attempts of the message event of ts, in
// order.
func (st *slackStack) deliveries(ts string) []slacktest.Envelope {
	var out []slacktest.Envelope
	for _, e := range st.srv.Envelopes() {
		if e.Type != "events_api" {
			continue
		}
		var p struct {
			Event struct {
				Type, Subtype, TS string
			}
		}
		if json.Unmarshal(e.Payload, &p) == nil && p.Event.Type == "message" && p.Event.Subtype == "" && p.Event.TS == ts {
			out = append(out, e)
		}
	}
	return out
}

// TestSlackRedeliveryIsDeduplicated: Slack redelivers an envelope not
// acknowledged in time, with a new envelope id and a higher retry_attempt.
// Here handling a message outlasts the ack deadline of one second (Bob's
// name is looked up first, and users.info does not answer until parley
// gives up on it after 1.5 s); the redelivery is acknowledged and the
// message reaches the inbox once, in one session.
func TestSlackRedeliveryIsDeduplicated(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackBubbleStack(t, slacktest.Options{AckTimeout: time.Second})
		st.srv.InjectFaults(slacktest.Faults{Every: 1, Kinds: []slacktest.Fault{slacktest.FaultHang}, Exempt: slackExemptAllBut("users.info")})
		ts := st.srv.Post(st.bob, st.channel, "", "Deploy the docs")
		r := st.heard("")
		st.srv.InjectFaults(slacktest.Faults{})
		if len(r.Messages) != 1 || r.Messages[0].Content != "Deploy the docs" {
			t.Fatalf("the agent read %+v", r.Messages)
		}
		st.await("an acknowledged delivery", func() bool {
			for _, e := range st.deliveries(ts) {
				if !e.Acked.IsZero() {
					return true
				}
			}
			return false
		})
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		ds := st.deliveries(ts)
		if len(ds) < 2 || ds[1].RetryAttempt != 1 || ds[1].ID == ds[0].ID {
			t.Fatalf("deliveries %+v: want the envelope redelivered with retry_attempt 1 and a new id", ds)
		}
		n := 0
		for _, m := range st.inbox() {
			if m.Content == "Deploy the docs" {
				n++
			}
		}
		if n != 1 || len(st.sessions()) != 1 {
			t.Errorf("%d inbox messages and %d sessions after %d deliveries, want one of each", n, len(st.sessions()), len(ds))
		}
		if replies := st.botReplies(ts); len(replies) > 0 {
			t.Errorf("parley posted %+v", replies)
		}
	})
}

// TestSlackReconnectLosesNothing: Slack asks parley to reconnect
// (disconnect, reason refresh_requested) and later a connection drops
// without warning; messages written before, during and after each arrive
// in the inbox exactly once, in order.
func TestSlackReconnectLosesNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackBubbleStack(t, slacktest.Options{})
		thread, _, _ := st.session("m0")
		var want []string
		post := func(text string) {
			want = append(want, text)
			st.srv.Post(st.ann, st.channel, thread, text)
		}
		connected := func(n int) {
			st.await("connection "+string(rune('0'+n)), func() bool { return st.srv.Connections() >= n })
		}

		post("m1")
		st.srv.Disconnect("refresh_requested")
		post("m2") // while parley reconnects
		connected(2)
		post("m3")

		post("m4")
		st.srv.DropConnection()
		post("m5")
		connected(3)
		post("m6")

		servetest.PollUntil(t, 30*time.Second, "every message in the inbox", func() bool { return len(st.inbox()) >= len(want)+1 }, nil)
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		// A message whose envelope was on the dropped connection comes again
		// once its ack deadline passed, possibly after later ones: each must
		// be there once, in whatever order.
		var got []string
		for _, m := range st.inbox() {
			got = append(got, m.Content)
		}
		slices.Sort(got)
		if strings.Join(got, "|") != "m0|"+strings.Join(want, "|") {
			t.Errorf("inbox %q, want m0 and %q, each once", got, want)
		}
		if t.Failed() {
			for _, e := range st.srv.Envelopes() {
				t.Logf("envelope %s retry %d sent %s acked %s: %s", e.Type, e.RetryAttempt, e.Sent.Format("05.000"), e.Acked.Format("05.000"), e.Payload)
			}
		}
	})
}
