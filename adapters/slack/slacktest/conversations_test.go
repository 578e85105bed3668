package slacktest_test

import (
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
)

func TestConversations(t *testing.T) {
	srv, api, ch, ann := setup(t, slacktest.Options{})
	outside := srv.NewChannelWithoutBot("elsewhere")
	dm := srv.OpenDM(ann)
	root := srv.Post(ann, ch, "", "root")
	r1 := srv.Post(ann, ch, root, "one")
	r2 := post(t, api, ch, slack.MsgOptionText("two", false), slack.MsgOptionTS(root))
	other := srv.Post(ann, ch, "", "other")

	t.Run("info", func(t *testing.T) {
		for _, tt := range []struct {
			id       string
			member   bool
			im       bool
			wantName string
		}{{ch, true, false, "parley"}, {outside, false, false, "elsewhere"}, {dm, true, true, ""}} {
			c, err := api.GetConversationInfoContext(ctx(t), &slack.GetConversationInfoInput{ChannelID: tt.id})
			if err != nil {
				t.Fatal(err)
			}
			if c.ID != tt.id || c.IsMember != tt.member && !tt.im || c.IsIM != tt.im || c.Name != tt.wantName {
				t.Errorf("conversations.info(%s) = %+v", tt.id, c)
			}
			if tt.im && c.User != ann.ID {
				t.Errorf("DM user = %q", c.User)
			}
		}
		_, err := api.GetConversationInfoContext(ctx(t), &slack.GetConversationInfoInput{ChannelID: "C404"})
		wantCode(t, err, "channel_not_found")
	})
	t.Run("history", func(t *testing.T) {
		h, err := api.GetConversationHistoryContext(ctx(t), &slack.GetConversationHistoryParameters{ChannelID: ch})
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Messages) != 2 || h.Messages[0].Timestamp != other || h.Messages[1].Timestamp != root {
			t.Fatalf("history = %+v, want other and root, newest first", h.Messages)
		}
		if m := h.Messages[1]; m.ReplyCount != 2 || m.LatestReply != r2 || m.ThreadTimestamp != root {
			t.Errorf("root in history = %+v", m.Msg)
		}
		p, err := api.GetConversationHistoryContext(ctx(t), &slack.GetConversationHistoryParameters{ChannelID: ch, Limit: 1})
		if err != nil || len(p.Messages) != 1 || !p.HasMore || p.ResponseMetaData.NextCursor == "" {
			t.Fatalf("first page = %+v, %v", p, err)
		}
		_, err = api.GetConversationHistoryContext(ctx(t), &slack.GetConversationHistoryParameters{ChannelID: outside})
		wantCode(t, err, "not_in_channel")
	})
	t.Run("replies", func(t *testing.T) {
		for _, ts := range []string{root, r1} {
			msgs, _, _, err := api.GetConversationRepliesContext(ctx(t), &slack.GetConversationRepliesParameters{ChannelID: ch, Timestamp: ts})
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != 3 || msgs[0].Timestamp != root || msgs[1].Timestamp != r1 || msgs[2].Timestamp != r2 {
				t.Fatalf("replies(%s) = %+v", ts, msgs)
			}
			if msgs[2].BotID != srv.BotID || msgs[2].User != srv.BotUserID || msgs[1].User != ann.ID {
				t.Errorf("authors: %+v / %+v", msgs[1].Msg, msgs[2].Msg)
			}
		}
		_, _, _, err := api.GetConversationRepliesContext(ctx(t), &slack.GetConversationRepliesParameters{ChannelID: ch, Timestamp: "1.000003"})
		wantCode(t, err, "thread_not_found")
	})
	t.Run("users.info", func(t *testing.T) {
		u, err := api.GetUserInfoContext(ctx(t), ann.ID)
		if err != nil || u.ID != ann.ID || u.Name != "ann" || u.IsBot {
			t.Fatalf("users.info = %+v, %v", u, err)
		}
		b, err := api.GetUserInfoContext(ctx(t), srv.BotUserID)
		if err != nil || !b.IsBot {
			t.Fatalf("users.info(bot) = %+v, %v", b, err)
		}
		_, err = api.GetUserInfoContext(ctx(t), "U404")
		wantCode(t, err, "user_not_found")
	})
	t.Run("permalink", func(t *testing.T) {
		link, err := api.GetPermalinkContext(ctx(t), &slack.PermalinkParameters{Channel: ch, Ts: r1})
		if err != nil || !strings.Contains(link, "/archives/"+ch+"/p"+strings.ReplaceAll(r1, ".", "")) || !strings.Contains(link, "thread_ts="+root) {
			t.Fatalf("permalink = %q, %v", link, err)
		}
		_, err = api.GetPermalinkContext(ctx(t), &slack.PermalinkParameters{Channel: ch, Ts: "1.000004"})
		wantCode(t, err, "message_not_found")
	})
}

func TestReactions(t *testing.T) {
	srv, api, ch, ann := setup(t, slacktest.Options{})
	ts := srv.Post(ann, ch, "", "react to me")
	item := slack.NewRefToMessage(ch, ts)
	steps := []struct {
		name   string
		remove bool
		emoji  string
		item   slack.ItemRef
		code   string
	}{
		{"add", false, "eyes", item, ""},
		{"add twice", false, "eyes", item, "already_reacted"},
		{"add another", false, "white_check_mark", item, ""},
		{"remove", true, "eyes", item, ""},
		{"remove again", true, "eyes", item, "no_reaction"},
		{"unknown message", false, "eyes", slack.NewRefToMessage(ch, "1.000005"), "message_not_found"},
		{"no item", false, "eyes", slack.ItemRef{}, "no_item_specified"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			var err error
			if st.remove {
				err = api.RemoveReactionContext(ctx(t), st.emoji, st.item)
			} else {
				err = api.AddReactionContext(ctx(t), st.emoji, st.item)
			}
			wantCode(t, err, st.code)
		})
	}
	m, _ := srv.Message(ch, ts)
	if len(m.Reactions) != 1 || len(m.Reactions["white_check_mark"]) != 1 || m.Reactions["white_check_mark"][0] != srv.BotUserID {
		t.Fatalf("reactions = %v", m.Reactions)
	}
}

func TestStreaming(t *testing.T) {
	t.Run("not offered", func(t *testing.T) {
		srv, api, ch, ann := setup(t, slacktest.Options{})
		root := srv.Post(ann, ch, "", "q")
		_, _, err := api.StartStreamContext(ctx(t), ch, slack.MsgOptionTS(root), slack.MsgOptionMarkdownText("a"))
		wantCode(t, err, "unknown_method")
		err = api.SetAssistantThreadsStatusContext(ctx(t), slack.AssistantThreadsSetStatusParameters{ChannelID: ch, ThreadTS: root, Status: "is working…"})
		wantCode(t, err, "not_allowed")
	})

	srv, api, ch, ann := setup(t, slacktest.Options{Streaming: true, AssistantThreads: true})
	root := srv.Post(ann, ch, "", "q")
	recipient := []slack.MsgOption{slack.MsgOptionRecipientTeamID(srv.TeamID), slack.MsgOptionRecipientUserID(ann.ID)}

	if err := api.SetAssistantThreadsStatusContext(ctx(t), slack.AssistantThreadsSetStatusParameters{ChannelID: ch, ThreadTS: root, Status: "is working…"}); err != nil {
		t.Fatal(err)
	}
	if got := srv.ThreadStatus(ch, root); got != "is working…" {
		t.Fatalf("status = %q", got)
	}
	_, _, err := api.StartStreamContext(ctx(t), ch, slack.MsgOptionTS(root), slack.MsgOptionMarkdownText("a"))
	wantCode(t, err, "missing_recipient_team_id")
	_, ts, err := api.StartStreamContext(ctx(t), ch, append(recipient, slack.MsgOptionTS(root), slack.MsgOptionMarkdownText("Hello"))...)
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.ThreadStatus(ch, root); got != "" {
		t.Errorf("status after the bot's reply = %q, want cleared", got)
	}
	if _, _, err := api.AppendStreamContext(ctx(t), ch, ts, slack.MsgOptionMarkdownText(", world")); err != nil {
		t.Fatal(err)
	}
	_, _, _, err = api.UpdateMessageContext(ctx(t), ch, ts, slack.MsgOptionText("x", false))
	wantCode(t, err, "streaming_state_conflict")
	if _, _, err := api.StopStreamContext(ctx(t), ch, ts, slack.MsgOptionMarkdownText("!")); err != nil {
		t.Fatal(err)
	}
	_, _, err = api.AppendStreamContext(ctx(t), ch, ts, slack.MsgOptionMarkdownText("late"))
	wantCode(t, err, "message_not_in_streaming_state")
	if m, _ := srv.Message(ch, ts); m.Text != "Hello, world!" || m.ThreadTS != root {
		t.Fatalf("streamed message = %+v", m)
	}
}
