package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
	"github.com/parley-chat/parley/core"
)

// TestSlackFiles: a file shared in a session's thread reaches the agent as
// an attachment, fetched with the bot token (the fake serves files to it
// only) and stored under the data directory with a sanitised name; a file
// over the size limit is refused with a notice in the thread and reaches
// nobody.
func TestSlackFiles(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackBubbleStack(t, slacktest.Options{Limits: true})
		thread, _, last := st.session("Here is my shell setup")
		st.srv.PostFile(st.ann, st.channel, thread, "../../.bashrc", "text/plain", []byte("echo pwned"))
		r := st.heard(last)
		if len(r.Messages) != 1 {
			t.Fatalf("the agent read %+v, want the file's message", r.Messages)
		}
		msgs := st.inbox()
		got := msgs[len(msgs)-1]
		if len(got.Attachments) != 1 {
			t.Fatalf("the file's message has attachments %+v", got.Attachments)
		}
		att := got.Attachments[0]
		rel, err := filepath.Rel(st.cfg.DataDir, att.Path)
		if err != nil || strings.HasPrefix(rel, "..") || strings.HasPrefix(att.Name, ".") || strings.ContainsAny(att.Name, `/\`) {
			t.Errorf("file stored at %s as %q: outside the data directory, hidden or with a path", att.Path, att.Name)
		}
		if b, _ := os.ReadFile(att.Path); string(b) != "echo pwned" || att.Size != 10 || att.Mime != "text/plain" {
			t.Errorf("stored %q (%d bytes, %s)", b, att.Size, att.Mime)
		}
		st.showing(thread, "Received bashrc")

		huge := make([]byte, 50<<20+1)
		st.srv.PostFile(st.ann, st.channel, thread, "disk.img", "application/octet-stream", huge)
		st.showing(thread, "parley takes files up to 50 MB")
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := len(st.inbox()); n != len(msgs) {
			t.Errorf("the inbox grew from %d to %d messages with the refused file", len(msgs), n)
		}
		if n := st.srv.RateLimited(); n > 0 {
			t.Errorf("%d calls were refused with 429", n)
		}
	})
}

// TestSlackStrangerIsIgnored: someone not on the allow-list writes at the
// channel's top level, in a session's thread, to the bot directly, shares
// a file and runs /parley new: nothing reaches the inbox, no session
// starts, and parley says nothing, while every envelope is acknowledged.
func TestSlackStrangerIsIgnored(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackBubbleStack(t, slacktest.Options{})
		thread, _, _ := st.session("Our session")
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		sessions, inbox, calls := len(st.sessions()), len(st.inbox()), len(st.srv.Calls())
		replies := len(st.srv.Replies(st.channel, thread))

		st.srv.Post(st.stranger, st.channel, "", "let me in")
		st.srv.Post(st.stranger, st.channel, thread, "me too")
		dm := st.srv.OpenDM(st.stranger)
		st.srv.Post(st.stranger, dm, "", "psst")
		st.srv.PostFile(st.stranger, st.channel, thread, "x.sh", "text/plain", []byte("rm -rf /"))
		st.srv.Slash(st.stranger, st.channel, "/parley", "new Mine")
		st.acked("events_api")
		st.acked("slash_commands")
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := len(st.sessions()); n != sessions {
			t.Errorf("%d sessions, want %d", n, sessions)
		}
		if n := len(st.inbox()); n != inbox {
			t.Errorf("%d inbox messages, want %d", n, inbox)
		}
		for _, c := range st.srv.Calls()[calls:] {
			t.Errorf("parley called %s for a stranger", c.Method)
		}
		if n := len(st.srv.Replies(st.channel, thread)); n != replies+2 {
			t.Errorf("the thread has %d messages, want the %d before and the stranger's 2", n, replies)
		}
		for _, e := range st.srv.Envelopes() {
			if e.Type == "slash_commands" && len(e.AckPayload) > 0 {
				t.Errorf("the stranger's slash command was answered %s", e.AckPayload)
			}
		}
		select {
		case n := <-st.agent.notes:
			t.Errorf("the agent was notified: %+v", n)
		default:
		}
	})
}

// TestSlackEditsDeletionsJoinsAndBots: as the adapter documents, a
// person's edit is not sent again and a deletion does not take a message
// back from the agent; joins and bot messages (parley's own included) are
// not input.
func TestSlackEditsDeletionsJoinsAndBots(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackBubbleStack(t, slacktest.Options{})
		thread, session, last := st.session("Fix the flaky test")
		reply := st.srv.Post(st.ann, st.channel, thread, "It fails on Mondays")
		r := st.heard(last)
		last = r.LastID

		st.srv.Edit(st.ann, st.channel, thread, "Fix the flaky test, please")
		st.srv.Delete(st.channel, reply)
		st.srv.Join(st.bob, st.channel)
		// The agent's answer is a bot message Slack sends parley back.
		st.agent.call(t, "chat.assistant.post", map[string]any{"session_id": session, "content": "On it."}, nil)
		st.showing(thread, "On it.")
		st.acked("events_api")
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}

		st.srv.Post(st.ann, st.channel, thread, "Any news?")
		r = st.heard(last)
		var heard []string
		for _, m := range r.Messages {
			if m.Author == "user" {
				heard = append(heard, m.Content)
			}
		}
		if len(heard) != 1 || heard[0] != "Any news?" {
			t.Errorf("after the edit, deletion, join and answer the agent read %q from people, want only the next message", heard)
		}
		var got []string
		for _, m := range st.inbox() {
			if m.Role == core.RoleUser {
				got = append(got, m.Content)
			}
		}
		if want := "Fix the flaky test|It fails on Mondays|Any news?"; strings.Join(got, "|") != want {
			t.Errorf("people's messages in the inbox: %q, want %q", got, want)
		}
		if n := len(st.sessions()); n != 1 {
			t.Errorf("%d sessions, want 1 (a join or a bot message started one)", n)
		}
	})
}
