package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/serve"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/uistate"
)

// try calls a tool and returns its text and whether it is an error result.
func (a *agent) try(t *testing.T, tool string, args map[string]any) (string, bool) {
	t.Helper()
	text, isErr, err := a.callText(30*time.Second, tool, args)
	if err != nil {
		t.Errorf("%s: %v", tool, err)
	}
	return text, isErr
}

// askInBackground has the agent call ui.ask with a timeout; the tool's
// text and error flag arrive on the channel.
func askInBackground(t *testing.T, a *agent, session, question string, timeout float64, options ...string) <-chan string {
	out := make(chan string, 1)
	go func() {
		text, isErr := a.try(t, "ui.ask", map[string]any{"session_id": session, "question": question, "options": options, "timeout_s": timeout})
		if !isErr {
			text = "answered: " + text
		}
		out <- text
	}()
	return out
}

func awaitText(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(60 * time.Second):
		t.Fatal("ui.ask did not return")
		return ""
	}
}

// webState is GET /api/sessions/{id}/state of a running parley serve.
func webState(t *testing.T, addr, session string) uistate.UISnapshot {
	t.Helper()
	return webStateVia(t, http.DefaultClient, addr, session)
}

// webStateVia is webState through client (a stack's on the fake clock).
func webStateVia(t *testing.T, client *http.Client, addr, session string) uistate.UISnapshot {
	t.Helper()
	resp, err := client.Get("http://" + addr + "/api/sessions/" + session + "/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var snap uistate.UISnapshot
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&snap) != nil {
		t.Fatalf("state of %s: %s", session, resp.Status)
	}
	return snap
}

// questionItem is the question item of a state, by its text.
func questionItem(t *testing.T, s uistate.UISnapshot, text string) uistate.UIItem {
	t.Helper()
	for _, it := range s.State.Items {
		if it.Type == uistate.UIItemQuestion && it.Content == text {
			return it
		}
	}
	t.Fatalf("no question %q in %+v", text, s.State.Items)
	return uistate.UIItem{}
}

// people are the inbox messages people wrote, all sessions.
func people(t *testing.T, m *serve.Main) []string {
	t.Helper()
	msgs, err := m.Daemon().Store.Inbox(context.Background(), "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, msg := range msgs {
		if msg.Role == core.RoleUser {
			out = append(out, msg.Content)
		}
	}
	return out
}

// TestTelegramQuestionExpires: a ui.ask nobody answers in time is
// withdrawn: its buttons are gone from the topic, the message says it
// expired, the page's state shows it closed, and Ann's late click gets "no
// longer open" and reaches nothing.
func TestTelegramQuestionExpires(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newTGBubbleStack(t, false)
		topic := st.newTopic("Deploy")
		st.srv.SendText(st.forum, topic, ann, "ship it")
		session := st.heard("").Messages[0].SessionID

		result := askInBackground(t, st.agent, session, "Roll back first?", 1, "yes", "no")
		var q telegramtest.Message
		st.await("the question with buttons", func() bool {
			for _, m := range botMessages(st.srv.Messages(st.forum, topic)) {
				if strings.Contains(m.Text, "Roll back first?") && len(m.Buttons) > 0 {
					q = m
					return true
				}
			}
			return false
		})
		data := q.Buttons[0][0].CallbackData
		if got := awaitText(t, result); !strings.Contains(got, "the question was withdrawn") {
			t.Fatalf("ui.ask returned %q", got)
		}
		st.await("the question's buttons gone", func() bool {
			m, _ := st.srv.Message(st.forum, q.ID)
			return len(m.Buttons) == 0 && strings.Contains(m.Text, "expired")
		})
		if it := questionItem(t, webStateVia(t, st.client(), st.m.Addr(), session), "Roll back first?"); it.Closed != core.QuestionExpired || it.Answer != nil {
			t.Fatalf("the page's question item: %+v", it)
		}

		before := people(t, st.m)
		click := st.srv.Click(st.forum, q.ID, ann, data)
		st.await("the late click answered", func() bool { return len(st.srv.CallbackAnswers(click)) > 0 })
		if a := st.srv.CallbackAnswers(click); a[0].Text != "This question is no longer open." {
			t.Fatalf("the late click was answered %+v", a)
		}
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		if after := people(t, st.m); len(after) != len(before) {
			t.Fatalf("the late click reached the inbox: %q, was %q", after, before)
		}
		if it := questionItem(t, webStateVia(t, st.client(), st.m.Addr(), session), "Roll back first?"); it.Answer != nil {
			t.Fatalf("the late click answered the page's question: %+v", it)
		}
	})
}

// TestSlackQuestionExpires: the same on Slack, where the question's
// buttons are Block Kit actions and a late click edits the question to say
// it is no longer open.
func TestSlackQuestionExpires(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newSlackBubbleStack(t, slacktest.Options{Limits: true})
		thread, session, _ := st.session("Ready to deploy?")
		result := askInBackground(t, st.agent, session, "Deploy now?", 1, "Yes", "No")
		q := st.showing(thread, "Deploy now?")
		buttons := slackButtons(q)
		if len(buttons) != 2 {
			t.Fatalf("the question shows buttons %+v", buttons)
		}
		if got := awaitText(t, result); !strings.Contains(got, "the question was withdrawn") {
			t.Fatalf("ui.ask returned %q", got)
		}
		st.await("the question's buttons gone", func() bool {
			m, _ := st.srv.Message(st.channel, q.TS)
			return len(slackButtons(m)) == 0 && strings.Contains(slackShown(m), "expired")
		})

		before := people(t, st.m)
		st.srv.Click(st.ann, st.channel, q.TS, buttons[0].ActionID, buttons[0].Value)
		st.acked("interactive")
		st.await("the late click told the question is no longer open", func() bool {
			m, _ := st.srv.Message(st.channel, q.TS)
			return strings.Contains(slackShown(m), "no longer open")
		})
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		if after := people(t, st.m); len(after) != len(before) {
			t.Fatalf("the late click reached the inbox: %q, was %q", after, before)
		}
		if it := questionItem(t, webStateVia(t, st.client(), st.m.Addr(), session), "Deploy now?"); it.Closed != core.QuestionExpired || it.Answer != nil {
			t.Fatalf("the page's question item: %+v", it)
		}
	})
}

// TestMatrixQuestionExpires: on Matrix, against a real homeserver, the
// expired question is edited to say so (its numbered options gone), and
// Ann's late reply and reaction reach nothing.
func TestMatrixQuestionExpires(t *testing.T) {
	t.Parallel()
	st := newMXStack(t, mxOptions{})
	lobby, _ := st.room("Lobby")
	room, session := st.mxNew(lobby, "Deploy")
	result := askInBackground(t, st.agent, string(session), "Ship it now?", 1, "Yes", "No")
	q := st.mxShowing(st.ann, room, "Ship it now?")
	if got := awaitText(t, result); !strings.Contains(got, "the question was withdrawn") {
		t.Fatalf("ui.ask returned %q", got)
	}
	servetest.PollUntil(t, mxWait, "the question edited to say it expired", func() bool {
		text := st.ann.Edited(room, q.ID)
		return strings.Contains(text, "expired") && !strings.Contains(text, "1️⃣")
	}, nil)
	st.idle()
	before := people(t, st.m)
	st.ann.Reply(t, room, q.ID, "1")
	st.ann.React(t, room, q.ID, "2️⃣")
	st.idle()
	if after := people(t, st.m); len(after) != len(before) {
		t.Fatalf("a late answer reached the inbox: %q", after[len(before):])
	}
}
