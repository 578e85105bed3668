package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
)

// TestSlackSlashNewAndThreadCommands: /parley new posts a root for a new
// session, acknowledged without a reply of its own; in the session's
// thread, commands typed as text (!title, !status, !cancel) act on it and
// are not passed to the agent as messages.
func TestSlackSlashNewAndThreadCommands(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackBubbleStack(t, slacktest.Options{Limits: true})
		st.srv.Slash(st.ann, st.channel, "/parley", "new Deploy the docs")
		root := st.topLevel("Deploy the docs")
		var s core.Session
		servetest.PollUntil(t, 30*time.Second, "a session in the root's thread", func() bool {
			var ok bool
			s, ok = st.sessionAt(root.TS)
			return ok
		}, nil)
		if s.Title != "Deploy the docs" {
			t.Errorf("the session in the root's thread is titled %q", s.Title)
		}
		st.await("the slash command acknowledged", func() bool {
			for _, e := range st.srv.Envelopes() {
				if e.Type == "slash_commands" && !e.Acked.IsZero() {
					return true
				}
			}
			return false
		})
		for _, e := range st.srv.Envelopes() {
			if e.Type == "slash_commands" && (e.RetryAttempt > 0 || len(e.AckPayload) > 0) {
				t.Errorf("slash command envelope %+v: want one delivery, acknowledged without a reply (the root says it all)", e)
			}
		}

		st.srv.Post(st.ann, st.channel, root.TS, "Use the new theme")
		r := st.heard("")
		if len(r.Messages) != 1 || r.Messages[0].SessionID != string(s.ID) || r.Messages[0].Content != "Use the new theme" {
			t.Fatalf("the agent read %+v, want the reply in session %s", r.Messages, s.ID)
		}
		last := r.LastID

		st.srv.Post(st.ann, st.channel, root.TS, "!title Docs deploy")
		st.await("the root showing the new title", func() bool {
			m, _ := st.srv.Message(st.channel, root.TS)
			return strings.Contains(slackShown(m), "Docs deploy")
		})
		st.srv.Post(st.ann, st.channel, root.TS, "!status")
		st.showing(root.TS, "Docs deploy — ")

		st.srv.Post(st.ann, st.channel, root.TS, "!cancel")
		r = st.heard(last)
		if len(r.Messages) != 1 || r.Messages[0].Content != "cancel" {
			t.Fatalf("after !cancel the agent read %+v, want the cancel request", r.Messages)
		}
		// The thread acknowledges the request: core shows the control
		// message's content, "cancel" (its "⏹ Cancel requested" is only for a
		// cancel event without a message).
		st.await("the cancel acknowledged in the thread", func() bool {
			for _, m := range st.botReplies(root.TS) {
				if strings.Contains(strings.ToLower(slackShown(m)), "cancel") {
					return true
				}
			}
			return false
		})
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		for _, m := range st.inbox() {
			if strings.HasPrefix(m.Content, "!") {
				t.Errorf("a command reached the inbox as a message: %q", m.Content)
			}
		}
		if s, _ := st.sessionAt(root.TS); s.Title != "Docs deploy" {
			t.Errorf("the session is titled %q after !title", s.Title)
		}
		if n := st.srv.RateLimited(); n > 0 {
			t.Errorf("%d calls were refused with 429", n)
		}
	})
}

// TestSlackSlashHelpAndElsewhere: /parley help and a session command at
// the channel's level are answered with the acknowledgement, seen only by
// the person who typed it; nothing is posted in the channel.
func TestSlackSlashHelpAndElsewhere(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackBubbleStack(t, slacktest.Options{})
		replies := map[string]string{}
		for _, text := range []string{"help", "cancel"} {
			st.srv.Slash(st.ann, st.channel, "/parley", text)
		}
		st.await("both slash commands acknowledged", func() bool {
			for _, e := range st.srv.Envelopes() {
				if e.Type != "slash_commands" || e.Acked.IsZero() {
					continue
				}
				var cmd struct{ Text string }
				var reply struct {
					ResponseType string `json:"response_type"`
					Text         string
				}
				_ = json.Unmarshal(e.Payload, &cmd)
				_ = json.Unmarshal(e.AckPayload, &reply)
				if reply.ResponseType == "ephemeral" {
					replies[cmd.Text] = reply.Text
				}
			}
			return len(replies) == 2
		})
		if !strings.Contains(replies["help"], "!title") {
			t.Errorf("/parley help answered %q, want the thread commands listed", replies["help"])
		}
		if !strings.Contains(replies["cancel"], "!cancel") || !strings.Contains(replies["cancel"], "thread") {
			t.Errorf("/parley cancel answered %q, want to be told to type !cancel in the session's thread", replies["cancel"])
		}
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		if msgs := st.srv.Messages(st.channel); len(msgs) > 0 {
			t.Errorf("the channel shows %+v, want nothing", msgs)
		}
	})
}
