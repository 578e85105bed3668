package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
)

func TestTelegramPrivateChatIsASession(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := fast(t, false)
		dm := st.srv.NewPrivateChat(ann)
		st.srv.SendText(dm, 0, ann, "hi from my phone")
		r := st.heard("")
		if len(r.Messages) != 1 {
			t.Fatalf("agent read %+v", r.Messages)
		}
		st.agent.call(t, "chat.assistant.post", map[string]any{"session_id": r.Messages[0].SessionID, "content": "hello, Ann"}, nil)
		st.await("the answer in the private chat", func() bool {
			for _, m := range botMessages(st.srv.Messages(dm, 0)) {
				if strings.Contains(m.Text, "hello, Ann") {
					return true
				}
			}
			return false
		})
		if len(st.srv.Topics(st.forum)) != 0 {
			t.Error("a private-chat session got a topic in the group too")
		}
	})
}

func TestTelegramTopicShowsStatusAndClosedSession(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := fast(t, false)
		if cmds := st.srv.Commands()[telegramtest.CommandScope{Type: "chat", Chat: st.forum}]; len(cmds) == 0 {
			t.Errorf("no commands registered for the group: %v", st.srv.Commands())
		}
		topic, session, _ := st.session("hello") // the agent is now working
		name := func() string {
			for _, tp := range st.srv.Topics(st.forum) {
				if tp.ID == topic {
					return tp.Name
				}
			}
			return ""
		}
		st.await("⏳ in the topic name", func() bool { return strings.HasPrefix(name(), "⏳ ") })
		st.agent.call(t, "loop.yield_turn", map[string]any{"session_id": session}, nil)
		st.await("💬 in the topic name", func() bool { return strings.HasPrefix(name(), "💬 ") })

		st.srv.SendText(st.forum, topic, ann, "/close")
		st.await("✅ in the topic name", func() bool { return strings.HasPrefix(name(), "✅ ") })
		st.srv.SendText(st.forum, topic, ann, "one more thing")
		st.showing(topic, "This session is closed")
	})
}

func TestTelegramWebhookMode(t *testing.T) {
	t.Parallel()
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	st := newTGStackOn(t, srv)
	listen := freeAddr(t)
	st.cfg.HTTP.Listen = listen
	telegramConfig(&st.cfg).Mode = "webhook"
	telegramConfig(&st.cfg).WebhookURL = "http://" + listen + "/telegram/webhook"
	telegramConfig(&st.cfg).WebhookSecret = "s3cret_token"
	st.start()
	topic := st.newTopic("hooked")
	st.srv.SendText(st.forum, topic, ann, "through the webhook")
	r := st.heard("")
	if len(r.Messages) != 1 || r.Messages[0].Content != "through the webhook" {
		t.Fatalf("agent read %+v", r.Messages)
	}
	if n := st.srv.Polling(); n != 0 {
		t.Errorf("%d getUpdates calls in webhook mode", n)
	}
	msgs, _ := st.m.Daemon().Store.Inbox(context.Background(), "", "", 0)
	if len(msgs) != 1 {
		t.Errorf("inbox has %d messages, want 1", len(msgs))
	}
}

// TestTelegramWebhookRefusesForgedUpdates: user ids are not secret, so an
// update posted to the webhook "from" an allowed user without Telegram's
// secret token header, or with a wrong one, is refused and creates no topic
// and no session; the same update with the right token does.
func TestTelegramWebhookRefusesForgedUpdates(t *testing.T) {
	t.Parallel()
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	st := newTGStackOn(t, srv)
	listen := freeAddr(t)
	st.cfg.HTTP.Listen = listen
	telegramConfig(&st.cfg).Mode = "webhook"
	hook := "http://" + listen + "/telegram/webhook"
	telegramConfig(&st.cfg).WebhookURL = hook
	telegramConfig(&st.cfg).WebhookSecret = "s3cret_token"
	st.start()

	forge := func(id int, secret string) int {
		t.Helper()
		body := fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"date":%d,`+
			`"chat":{"id":%d,"type":"supergroup","title":"Team","is_forum":true},`+
			`"from":{"id":%d,"is_bot":false,"first_name":"Ann"},`+
			`"text":"/new forged","entities":[{"type":"bot_command","offset":0,"length":4}]}}`,
			900000+id, 900000+id, time.Now().Unix(), st.forum, ann.ID)
		req, err := http.NewRequest(http.MethodPost, hook, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if secret != "" {
			req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i, secret := range []string{"", "s3cret_tokem", "s3cret_token_", "s3cret"} {
		if code := forge(i, secret); code != http.StatusForbidden {
			t.Errorf("forged update with secret %q: HTTP %d, want 403", secret, code)
		}
	}
	sessions, err := st.m.Daemon().Store.Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) != 0 || len(srv.Topics(st.forum)) != 0 {
		t.Fatalf("forged updates made %d sessions and topics %+v", len(sessions), srv.Topics(st.forum))
	}
	// The same update with the right token is Telegram's: it works, so the
	// refusals above were for the token, not for a malformed update.
	if code := forge(9, "s3cret_token"); code != http.StatusOK {
		t.Fatalf("update with the right secret: HTTP %d, want 200", code)
	}
	st.await("the topic /new made", func() bool { return len(srv.Topics(st.forum)) == 1 })
}

func TestTelegramGeneralTopicStartsSessionsWhenConfigured(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newTGBubbleStackStopped(t, telegramtest.Options{})
		telegramConfig(&st.cfg).NewFromGeneral = true
		st.start()
		st.srv.SendText(st.forum, 0, ann, "Plan the release\nwhat is left?")
		r := st.heard("")
		if len(r.Messages) != 1 || !strings.HasPrefix(r.Messages[0].Content, "Plan the release") {
			t.Fatalf("agent read %+v", r.Messages)
		}
		topics := st.srv.Topics(st.forum)
		if len(topics) != 1 || !strings.Contains(topics[0].Name, "Plan the release") {
			t.Fatalf("topics %+v, want one named after the message", topics)
		}
		st.agent.call(t, "chat.assistant.post", map[string]any{"session_id": r.Messages[0].SessionID, "content": "on it"}, nil)
		st.showing(topics[0].ID, "on it")
	})
}

// TestTelegramRepliesAreSessionNotices: what the adapter says in a topic
// (/help, a refusal) is the session's notice, sent through the outbox and
// deleted by the cleanup ledger when the next notice comes; a closed
// session's topic is told the same way. Someone not on the allow-list gets
// no answer and cannot make the bot create a topic.
func TestTelegramRepliesAreSessionNotices(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := fast(t, false)
		topic := st.newTopic("work")
		before := len(st.srv.Topics(st.forum))
		st.srv.SendText(st.forum, 0, stranger, "/new sneaky")
		st.srv.SendText(st.forum, 0, stranger, "/help")
		st.srv.SendText(st.forum, 0, stranger, "hello?")
		st.srv.SendText(st.forum, topic, stranger, "/help")

		st.srv.SendText(st.forum, topic, ann, "/help")
		help := st.showing(topic, "/title NEW TITLE — rename this session")
		st.srv.SendText(st.forum, topic, ann, "/frobnicate")
		st.showing(topic, "⚠️ unknown command /frobnicate; send /help for the list")
		st.await("the help deleted by the next notice", func() bool {
			m, _ := st.srv.Message(st.forum, help.ID)
			return m.Deleted
		})

		st.srv.SendText(st.forum, topic, ann, "/close")
		st.srv.SendText(st.forum, topic, ann, "one more thing")
		closed := st.showing(topic, "✅ This session is closed. /new starts another one.")
		st.srv.SendText(st.forum, topic, ann, "/status")
		st.showing(topic, "closed")
		st.await("the refusal deleted by the next notice", func() bool {
			m, _ := st.srv.Message(st.forum, closed.ID)
			return m.Deleted
		})

		if n := len(st.srv.Topics(st.forum)); n != before {
			t.Errorf("%d topics, want %d: the stranger's /new made one", n, before)
		}
		if said := botMessages(st.srv.Messages(st.forum, 0)); len(said) > 0 {
			t.Errorf("the stranger was answered in the General topic: %q", said[0].Text)
		}
		for _, m := range botMessages(st.srv.Messages(st.forum, topic)) {
			if strings.Contains(m.Text, "parley commands") {
				t.Errorf("a help message is still shown: %q (the stranger's /help answered?)", m.Text)
			}
		}
	})
}
