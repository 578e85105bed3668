package slacktest_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
)

func TestAuth(t *testing.T) {
	srv := slacktest.NewServer(t, slacktest.Options{Scopes: []string{"chat:write", "users:read"}})
	api := newClient(srv)
	res, err := api.AuthTestContext(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.UserID != srv.BotUserID || res.BotID != srv.BotID || res.TeamID != srv.TeamID {
		t.Errorf("auth.test = %+v, want user %s bot %s team %s", res, srv.BotUserID, srv.BotID, srv.TeamID)
	}
	if got := res.Header.Get("X-OAuth-Scopes"); got != "chat:write,users:read" {
		t.Errorf("X-OAuth-Scopes = %q", got)
	}

	tests := []struct {
		name string
		api  *slack.Client
		call func(*slack.Client) error
		code string
	}{
		{"no token", slack.New("", slack.OptionAPIURL(srv.URL)), func(a *slack.Client) error { _, err := a.AuthTestContext(ctx(t)); return err }, "not_authed"},
		{"wrong token", slack.New("xoxb-wrong", slack.OptionAPIURL(srv.URL)), func(a *slack.Client) error { _, err := a.AuthTestContext(ctx(t)); return err }, "invalid_auth"},
		{"app token on a bot method", slack.New(srv.AppToken, slack.OptionAPIURL(srv.URL)), func(a *slack.Client) error { _, err := a.AuthTestContext(ctx(t)); return err }, "not_allowed_token_type"},
		{"bot token opening a connection", slack.New(srv.BotToken, slack.OptionAPIURL(srv.URL), slack.OptionAppLevelToken(srv.BotToken)), func(a *slack.Client) error { _, _, err := a.StartSocketModeContext(ctx(t)); return err }, "not_allowed_token_type"},
		{"missing scope", api, func(a *slack.Client) error {
			_, err := a.GetConversationInfoContext(ctx(t), &slack.GetConversationInfoInput{ChannelID: "C1"})
			return err
		}, "missing_scope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantCode(t, tt.call(tt.api), tt.code) })
	}

	t.Run("missing_scope names needed and provided", func(t *testing.T) {
		c := srv.NewChannel("general")
		_, err := api.GetConversationInfoContext(ctx(t), &slack.GetConversationInfoInput{ChannelID: c})
		var se slack.SlackErrorResponse
		if !errors.As(err, &se) || se.Err != "missing_scope" || !strings.Contains(se.Needed, "channels:read") || se.Provided != "chat:write,users:read" {
			t.Fatalf("error = %#v, want missing_scope needing channels:read", err)
		}
	})
	t.Run("app token without connections:write", func(t *testing.T) {
		srv := slacktest.NewServer(t, slacktest.Options{AppScopes: []string{"authorizations:read"}})
		_, _, err := newClient(srv).StartSocketModeContext(ctx(t))
		var se slack.SlackErrorResponse
		if !errors.As(err, &se) || se.Err != "missing_scope" || se.Needed != "connections:write" {
			t.Fatalf("error = %v, want missing_scope needing connections:write", err)
		}
	})
}

func TestPostMessage(t *testing.T) {
	srv, api, ch, ann := setup(t, slacktest.Options{})
	root := srv.Post(ann, ch, "", "hello")
	reply := srv.Post(ann, ch, root, "in the thread")
	outside := srv.NewChannelWithoutBot("elsewhere")
	archived := srv.NewChannel("old")
	srv.Archive(archived)
	button := slack.NewButtonBlockElement("answer", "yes", slack.NewTextBlockObject("plain_text", "Yes", false, false))

	tests := []struct {
		name       string
		channel    string
		opts       []slack.MsgOption
		code       string
		wantThread string // "" top-level
	}{
		{"text", ch, []slack.MsgOption{slack.MsgOptionText("hi", false)}, "", ""},
		{"thread reply", ch, []slack.MsgOption{slack.MsgOptionText("hi", false), slack.MsgOptionTS(root)}, "", root},
		{"a reply's ts names its thread", ch, []slack.MsgOption{slack.MsgOptionText("hi", false), slack.MsgOptionTS(reply)}, "", root},
		{"unknown thread posts to the channel", ch, []slack.MsgOption{slack.MsgOptionText("hi", false), slack.MsgOptionTS("1.000001")}, "", ""},
		{"markdown block", ch, []slack.MsgOption{slack.MsgOptionText("fallback", false), slack.MsgOptionBlocks(slack.NewMarkdownBlock("", "**bold**"))}, "", ""},
		{"blocks of every kind parley uses", ch, []slack.MsgOption{slack.MsgOptionText("fallback", false), slack.MsgOptionBlocks(
			slack.NewHeaderBlock(slack.NewTextBlockObject("plain_text", "Title", false, false)),
			slack.NewSectionBlock(slack.NewTextBlockObject("mrkdwn", "*hi*", false, false), nil, nil),
			slack.NewDividerBlock(),
			slack.NewContextBlock("", slack.NewTextBlockObject("mrkdwn", "ctx", false, false)),
			slack.NewActionBlock("", button),
			slack.NewRichTextBlock("", slack.NewRichTextSection(slack.NewRichTextSectionTextElement("rich", nil))),
		)}, "", ""},
		{"blocks only", ch, []slack.MsgOption{slack.MsgOptionBlocks(slack.NewMarkdownBlock("", "x"))}, "", ""},
		{"DM by user id", ann.ID, []slack.MsgOption{slack.MsgOptionText("hi", false)}, "", ""},
		{"channel by name", "#parley", []slack.MsgOption{slack.MsgOptionText("hi", false)}, "", ""},
		{"unknown channel", "C404", []slack.MsgOption{slack.MsgOptionText("hi", false)}, "channel_not_found", ""},
		{"bot not in channel", outside, []slack.MsgOption{slack.MsgOptionText("hi", false)}, "not_in_channel", ""},
		{"archived", archived, []slack.MsgOption{slack.MsgOptionText("hi", false)}, "is_archived", ""},
		{"no text", ch, nil, "no_text", ""},
		{"40,000 characters", ch, []slack.MsgOption{slack.MsgOptionText(strings.Repeat("é", 40000), false)}, "", ""},
		{"too long", ch, []slack.MsgOption{slack.MsgOptionText(strings.Repeat("é", 40001), false)}, "msg_too_long", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			channel, ts, err := api.PostMessageContext(ctx(t), tt.channel, tt.opts...)
			wantCode(t, err, tt.code)
			if tt.code != "" {
				return
			}
			m, ok := srv.Message(channel, ts)
			if !ok || m.User != srv.BotUserID || m.BotID != srv.BotID || m.ThreadTS != tt.wantThread {
				t.Fatalf("stored %+v (found %v), want the bot's message in thread %q", m, ok, tt.wantThread)
			}
		})
	}

	t.Run("blocks stored raw, text kept", func(t *testing.T) {
		ts := post(t, api, ch, slack.MsgOptionText("fallback", false), slack.MsgOptionBlocks(slack.NewMarkdownBlock("b1", "# Title")))
		m, _ := srv.Message(ch, ts)
		if m.Text != "fallback" || string(m.Blocks) != `[{"type":"markdown","block_id":"b1","text":"# Title"}]` {
			t.Fatalf("stored text %q blocks %s", m.Text, m.Blocks)
		}
	})
	t.Run("thread", func(t *testing.T) {
		got := srv.Replies(ch, root)
		if len(got) < 4 || got[0].TS != root || got[1].TS != reply {
			t.Fatalf("Replies = %+v", got)
		}
		for _, m := range srv.Messages(ch) {
			if m.ThreadTS != "" && m.ThreadTS != m.TS {
				t.Fatalf("Messages holds the reply %+v", m)
			}
		}
	})
}

func TestInvalidBlocks(t *testing.T) {
	_, api, ch, _ := setup(t, slacktest.Options{})
	md := func(n int) slack.Block { return slack.NewMarkdownBlock("", strings.Repeat("m", n)) }
	btn := func(actionID, value string) slack.Block {
		return slack.NewActionBlock("", slack.NewButtonBlockElement(actionID, value, slack.NewTextBlockObject("plain_text", "ok", false, false)))
	}
	many := make([]slack.Block, 51)
	for i := range many {
		many[i] = slack.NewDividerBlock()
	}
	tests := []struct {
		name   string
		blocks []slack.Block
		code   string
	}{
		{"50 blocks", many[:50], ""},
		{"51 blocks", many, "invalid_blocks"},
		{"markdown 12,000 in total", []slack.Block{md(6000), md(6000)}, ""},
		{"markdown over 12,000 in total", []slack.Block{md(6000), md(6001)}, "invalid_blocks"},
		{"button value 2,000", []slack.Block{btn("a", strings.Repeat("v", 2000))}, ""},
		{"button value over 2,000", []slack.Block{btn("a", strings.Repeat("v", 2001))}, "invalid_blocks"},
		{"action_id over 255", []slack.Block{btn(strings.Repeat("a", 256), "v")}, "invalid_blocks"},
		{"section text over 3,000", []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject("mrkdwn", strings.Repeat("s", 3001), false, false), nil, nil)}, "invalid_blocks"},
		{"unknown type", []slack.Block{&slack.UnknownBlock{Type: "sparkle"}}, "invalid_blocks"},
		{"header over 150", []slack.Block{slack.NewHeaderBlock(slack.NewTextBlockObject("plain_text", strings.Repeat("h", 151), false, false))}, "invalid_blocks"},
		{"duplicate block_id", []slack.Block{slack.NewMarkdownBlock("same", "a"), slack.NewMarkdownBlock("same", "b")}, "invalid_blocks"},
		{"empty markdown", []slack.Block{slack.NewMarkdownBlock("", "")}, "invalid_blocks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := api.PostMessageContext(ctx(t), ch, slack.MsgOptionText("x", false), slack.MsgOptionBlocks(tt.blocks...))
			wantCode(t, err, tt.code)
			var se slack.SlackErrorResponse
			if tt.code != "" && (!errors.As(err, &se) || len(se.Errors) == 0 || se.Errors[0].Message == nil) {
				t.Fatalf("invalid_blocks without Slack's messages: %#v", err)
			}
		})
	}
}

func TestUpdateDelete(t *testing.T) {
	srv, api, ch, ann := setup(t, slacktest.Options{})
	people := srv.Post(ann, ch, "", "mine")
	own := post(t, api, ch, slack.MsgOptionText("v1", false), slack.MsgOptionBlocks(slack.NewMarkdownBlock("", "v1")))

	t.Run("update keeps what it does not name", func(t *testing.T) {
		if _, _, _, err := api.UpdateMessageContext(ctx(t), ch, own, slack.MsgOptionText("v2", false)); err != nil {
			t.Fatal(err)
		}
		m, _ := srv.Message(ch, own)
		if m.Text != "v2" || !strings.Contains(string(m.Blocks), "v1") || m.Edits != 1 || m.EditedAt.IsZero() {
			t.Fatalf("after update: %+v", m)
		}
		if _, _, _, err := api.UpdateMessageContext(ctx(t), ch, own, slack.MsgOptionBlocks()); err != nil {
			t.Fatal(err)
		}
		if m, _ = srv.Message(ch, own); m.Blocks != nil || m.Edits != 2 {
			t.Fatalf("blocks=[] should clear them: %+v", m)
		}
	})
	tests := []struct {
		name string
		call func() error
		code string
	}{
		{"update a person's message", func() error {
			_, _, _, err := api.UpdateMessageContext(ctx(t), ch, people, slack.MsgOptionText("x", false))
			return err
		}, "cant_update_message"},
		{"update unknown", func() error {
			_, _, _, err := api.UpdateMessageContext(ctx(t), ch, "1.000002", slack.MsgOptionText("x", false))
			return err
		}, "message_not_found"},
		{"update too long", func() error {
			_, _, _, err := api.UpdateMessageContext(ctx(t), ch, own, slack.MsgOptionText(strings.Repeat("x", 40001), false))
			return err
		}, "msg_too_long"},
		{"update to nothing", func() error {
			_, _, _, err := api.UpdateMessageContext(ctx(t), ch, own, slack.MsgOptionText("", false))
			return err
		}, "no_text"},
		{"delete a person's message", func() error { _, _, err := api.DeleteMessageContext(ctx(t), ch, people); return err }, "cant_delete_message"},
		{"delete own", func() error { _, _, err := api.DeleteMessageContext(ctx(t), ch, own); return err }, ""},
		{"delete again", func() error { _, _, err := api.DeleteMessageContext(ctx(t), ch, own); return err }, "message_not_found"},
		{"update deleted", func() error {
			_, _, _, err := api.UpdateMessageContext(ctx(t), ch, own, slack.MsgOptionText("x", false))
			return err
		}, "message_not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantCode(t, tt.call(), tt.code) })
	}
	if m, ok := srv.Message(ch, own); !ok || !m.Deleted {
		t.Fatalf("Message after delete = %+v, %v", m, ok)
	}
	if slices.ContainsFunc(srv.Messages(ch), func(m slacktest.Message) bool { return m.TS == own }) {
		t.Fatal("Messages shows a deleted message")
	}
}

// TestUpdateUnchanged: a chat.update that changes nothing is accepted, as
// at Slack, and counted as an identical re-send; one that changes the
// text or the blocks is not.
func TestUpdateUnchanged(t *testing.T) {
	srv, api, ch, _ := setup(t, slacktest.Options{})
	block := func(s string) slack.MsgOption {
		return slack.MsgOptionBlocks(slack.NewSectionBlock(slack.NewTextBlockObject("mrkdwn", s, false, false), nil, nil))
	}
	ts := post(t, api, ch, slack.MsgOptionText("v1", false), block("v1"))
	for _, opts := range [][]slack.MsgOption{
		{slack.MsgOptionText("v1", false), block("v1")}, // unchanged
		{slack.MsgOptionText("v1", false), block("v2")}, // new blocks
		{slack.MsgOptionText("v2", false), block("v2")}, // new text
		{slack.MsgOptionText("v2", false), block("v2")}, // unchanged
	} {
		if _, _, _, err := api.UpdateMessageContext(ctx(t), ch, ts, opts...); err != nil {
			t.Fatal(err)
		}
	}
	m, _ := srv.Message(ch, ts)
	if m.Edits != 4 || m.Unchanged != 2 {
		t.Errorf("Edits %d, Unchanged %d; want 4 and 2", m.Edits, m.Unchanged)
	}
}
