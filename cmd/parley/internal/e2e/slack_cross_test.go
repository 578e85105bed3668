package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
)

// TestSlackTelegramAndWebShareASession: one session reached from Telegram,
// Slack and the web page, through parley serve with both fakes.
//
// Ann starts it in a Telegram topic; the agent's answer goes there only,
// and Slack shows nothing. Input without a platform — POST /api/chat, then
// an agent's chat.human.post — is shown everywhere, and its first delivery
// to Slack posts the session's root in the channel; the answers to it still
// go to Telegram, where Ann last wrote (only a person's platform becomes a
// session's last input origin: core.Origin.IsUI). Then each answer goes
// where Ann last wrote: the Slack thread, the web page, Telegram. A second
// session, started by POST /api/chat, has no person's platform at all: its
// answer is broadcast, and Slack and Telegram each make it a thread.
func TestSlackTelegramAndWebShareASession(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newTGBubbleStackStopped(t, telegramtest.Options{RichMessages: true})
		tg := st.srv
		sl := slacktest.NewServer(t, slacktest.Options{Listener: st.net.Host().Listen()})
		channel := sl.NewChannel("sessions")
		slAnn := sl.NewUser("Ann")
		slackSection(&st.cfg, sl, channel, slAnn)
		st.captureLog(slog.LevelWarn)
		st.start()
		listen := st.m.Addr()

		topic := st.newTopic("Cross")
		tg.SendText(st.forum, topic, ann, "from telegram")
		read, after := slRead(t, st.agent, "", "from telegram")
		session := read["from telegram"]
		answer := func(session, reply string) {
			t.Helper()
			st.agent.call(t, "chat.assistant.post", map[string]any{"session_id": session, "content": reply}, nil)
		}
		// ask has the agent read what someone wrote and answer it.
		ask := func(input, reply string) {
			t.Helper()
			_, after = slRead(t, st.agent, after, input)
			answer(session, reply)
		}
		onTelegram := func(s string) int { return len(slTGShowing(tg, st.forum, topic, s)) }
		var root string // the Slack thread's root, once there is one
		onSlack := func(s string) int {
			if root == "" {
				return 0
			}
			return len(slShowing(sl, channel, root, s))
		}
		idle := func() {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := st.m.Daemon().WaitIdle(ctx); err != nil {
				t.Fatalf("waiting for the daemon to be idle: %v", err)
			}
		}
		t.Cleanup(func() {
			if t.Failed() {
				for _, m := range tg.Messages(st.forum, topic) {
					t.Logf("Telegram topic: bot=%v %q", m.FromBot, m.Text)
				}
				if root != "" {
					for _, m := range sl.Replies(channel, root) {
						t.Logf("Slack thread: bot=%v %q", m.BotID != "", slMarkdown(m))
					}
				}
			}
		})

		answer(session, "Reply A")
		st.await("Reply A on Telegram", func() bool { return onTelegram("Reply A") == 1 })
		idle()
		if top := sl.Messages(channel); len(top) != 0 {
			t.Fatalf("the Slack channel shows %d messages before anything was broadcast, want none", len(top))
		}

		// Input without a platform is shown everywhere; Slack gets the thread
		// for it.
		postChatVia(t, st.client(), listen, session, "from the api")
		sl.Await(t, time.Minute, "the session's root in the Slack channel", func() bool {
			if top := sl.Messages(channel); len(top) > 0 {
				root = top[0].TS
			}
			return root != ""
		})
		if top := sl.Messages(channel); len(top) != 1 || top[0].BotID != sl.BotID {
			t.Fatalf("the Slack channel shows %+v, want one root posted by the bot", top)
		}
		ask("from the api", "Reply B")
		st.agent.call(t, "chat.human.post", map[string]any{"session_id": session, "content": "from an agent"}, nil)
		ask("from an agent", "Reply C")
		for _, s := range []string{"from the api", "from an agent"} {
			sl.Await(t, time.Minute, s+" in the Slack thread", func() bool { return onSlack(s) == 1 })
			st.await(s+" on Telegram", func() bool { return onTelegram(s) == 1 })
		}
		st.await("Reply C on Telegram", func() bool { return onTelegram("Reply C") == 1 })
		idle()

		// Each answer goes where Ann last wrote.
		sl.Post(slAnn, channel, root, "from slack")
		ask("from slack", "Reply D")
		sl.Await(t, time.Minute, "Reply D in the Slack thread", func() bool { return onSlack("Reply D") == 1 })
		idle()
		slWebPost(t, st.client(), listen, session, "from the web")
		ask("from the web", "Reply E")
		idle()
		tg.SendText(st.forum, topic, ann, "from telegram again")
		ask("from telegram again", "Reply F")
		st.await("Reply F on Telegram", func() bool { return onTelegram("Reply F") == 1 })
		idle()

		for _, c := range []struct {
			reply           string
			telegram, slack int
		}{
			{"Reply A", 1, 0}, {"Reply B", 1, 0}, {"Reply C", 1, 0}, {"Reply D", 0, 1}, {"Reply E", 0, 0}, {"Reply F", 1, 0},
		} {
			if got := onTelegram(c.reply); got != c.telegram {
				t.Errorf("Telegram shows %q %d times, want %d", c.reply, got, c.telegram)
			}
			if got := onSlack(c.reply); got != c.slack {
				t.Errorf("Slack shows %q %d times, want %d", c.reply, got, c.slack)
			}
		}
		// Reply E went to the page alone: the page shows it from the event
		// log, and the outbox made no operation for it (the web adapter
		// follows events itself), here or anywhere in the test.
		shown := 0
		for _, it := range webStateVia(t, st.client(), listen, session).State.Items {
			if strings.Contains(it.Content, "Reply E") {
				shown++
			}
		}
		if shown != 1 {
			t.Errorf("the web page shows Reply E %d times, want once", shown)
		}
		if ops := st.m.Daemon().Outbox.Stats().Ops["web"]; len(ops) != 0 {
			t.Errorf("the outbox made operations for the web page: %v", ops)
		}
		if top := sl.Messages(channel); len(top) != 1 {
			t.Errorf("the Slack channel shows %d top-level messages, want the session's one root", len(top))
		}
		if n := len(tg.Topics(st.forum)); n != 1 {
			t.Errorf("the forum has %d topics, want the session's one", n)
		}

		// A session no person wrote in: its answer goes everywhere.
		other := postChatVia(t, st.client(), listen, "", "a session from the api")
		_, after = slRead(t, st.agent, after, "a session from the api")
		answer(other, "Reply G")
		var otherRoot string
		var otherTopic int
		sl.Await(t, time.Minute, "Reply G in a new Slack thread", func() bool {
			top := sl.Messages(channel)
			if len(top) < 2 {
				return false
			}
			otherRoot = top[1].TS
			return len(slShowing(sl, channel, otherRoot, "Reply G")) == 1
		})
		st.await("Reply G in a new Telegram topic", func() bool {
			topics := tg.Topics(st.forum)
			if len(topics) < 2 {
				return false
			}
			otherTopic = topics[1].ID
			return len(slTGShowing(tg, st.forum, otherTopic, "Reply G")) == 1
		})
		idle()
		if top := sl.Messages(channel); len(top) != 2 || top[1].BotID != sl.BotID {
			t.Errorf("the Slack channel shows %d top-level messages, want the first session's root and the second's, both the bot's", len(top))
		}
		if got := slShowing(sl, channel, otherRoot, "a session from the api"); len(got) != 1 {
			t.Errorf("the second session's Slack thread shows its input %d times, want once", len(got))
		}
		if got := onSlack("Reply G") + onTelegram("Reply G"); got != 0 {
			t.Errorf("the first session's thread and topic show the second session's answer %d times", got)
		}
	})
}

// slTGShowing are the bot's messages in a Telegram topic whose text
// contains s.
func slTGShowing(srv *telegramtest.Server, chat int64, topic int, s string) []telegramtest.Message {
	var out []telegramtest.Message
	for _, m := range botMessages(srv.Messages(chat, topic)) {
		if strings.Contains(m.Text, s) {
			out = append(out, m)
		}
	}
	return out
}

// slWebPost is Ann typing on the web page: POST
// /api/sessions/{id}/messages, origin web.
func slWebPost(t *testing.T, client *http.Client, listen, session, text string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"text": text})
	resp, err := client.Post("http://"+listen+"/api/sessions/"+session+"/messages", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /api/sessions/%s/messages: %s", session, resp.Status)
	}
}
