package slacktest_test

import (
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
)

// TestStreamStartRules: chat.startStream needs a thread that exists, the
// bot in an open channel, and in channels (not DMs) the recipient's team
// and an existing user; markdown_text is limited to 12,000 characters.
// A refused start posts nothing.
func TestStreamStartRules(t *testing.T) {
	srv, api, ch, ann := setup(t, slacktest.Options{Streaming: true})
	root := srv.Post(ann, ch, "", "q")
	outside := srv.NewChannelWithoutBot("outside")
	srv.Join(ann, outside)
	outsideRoot := srv.Post(ann, outside, "", "q")
	archived := srv.NewChannel("old")
	archivedRoot := srv.Post(ann, archived, "", "q")
	srv.Archive(archived)
	team := slack.MsgOptionRecipientTeamID(srv.TeamID)
	user := slack.MsgOptionRecipientUserID(ann.ID)
	text := slack.MsgOptionMarkdownText("a")

	for _, tt := range []struct {
		name, channel, code string
		opts                []slack.MsgOption
	}{
		{"no thread", ch, "invalid_arguments", []slack.MsgOption{team, user, text}},
		{"no such thread", ch, "thread_not_found", []slack.MsgOption{slack.MsgOptionTS("1.000099"), team, user, text}},
		{"no recipient user", ch, "missing_recipient_user_id", []slack.MsgOption{slack.MsgOptionTS(root), team, text}},
		{"unknown recipient", ch, "user_not_found", []slack.MsgOption{slack.MsgOptionTS(root), team, slack.MsgOptionRecipientUserID("U0NOBODY"), text}},
		{"bot not in channel", outside, "not_in_channel", []slack.MsgOption{slack.MsgOptionTS(outsideRoot), team, user, text}},
		{"archived", archived, "is_archived", []slack.MsgOption{slack.MsgOptionTS(archivedRoot), team, user, text}},
		{"too long", ch, "msg_too_long", []slack.MsgOption{slack.MsgOptionTS(root), team, user, slack.MsgOptionMarkdownText(strings.Repeat("x", 12001))}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := api.StartStreamContext(ctx(t), tt.channel, tt.opts...)
			wantCode(t, err, tt.code)
		})
	}
	if n := len(srv.Replies(ch, root)); n != 1 {
		t.Errorf("thread has %d messages after refused starts, want the root only", n)
	}

	// In a DM the recipient is the other member: none need be named.
	dm := srv.OpenDM(ann)
	dmRoot := srv.Post(ann, dm, "", "q")
	if _, _, err := api.StartStreamContext(ctx(t), dm, slack.MsgOptionTS(dmRoot), slack.MsgOptionMarkdownText(strings.Repeat("x", 12000))); err != nil {
		t.Errorf("a stream in a DM without recipients, 12,000 characters: %v", err)
	}
}

// TestStreamAppendAndStop: appendStream and stopStream act only on the
// app's own message while it streams; text comes as markdown_text or as
// markdown_text chunks (other chunk types add no text); stopStream may
// add blocks, checked as any message's.
func TestStreamAppendAndStop(t *testing.T) {
	srv, api, ch, ann := setup(t, slacktest.Options{Streaming: true})
	root := srv.Post(ann, ch, "", "q")
	_, ts, err := api.StartStreamContext(ctx(t), ch, slack.MsgOptionTS(root), slack.MsgOptionMarkdownText("Hello"),
		slack.MsgOptionRecipientTeamID(srv.TeamID), slack.MsgOptionRecipientUserID(ann.ID))
	if err != nil {
		t.Fatal(err)
	}
	posted := post(t, api, ch, slack.MsgOptionText("not a stream", false))

	for _, tt := range []struct {
		name, ts, code string
		opts           []slack.MsgOption
	}{
		{"no text", ts, "no_text", nil},
		{"unknown message", "1.000099", "message_not_found", []slack.MsgOption{slack.MsgOptionMarkdownText("x")}},
		{"a person's message", root, "message_not_owned_by_app", []slack.MsgOption{slack.MsgOptionMarkdownText("x")}},
		{"a posted message", posted, "message_not_in_streaming_state", []slack.MsgOption{slack.MsgOptionMarkdownText("x")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := api.AppendStreamContext(ctx(t), ch, tt.ts, tt.opts...)
			wantCode(t, err, tt.code)
		})
	}

	if _, _, err := api.AppendStreamContext(ctx(t), ch, ts, slack.MsgOptionChunks(slack.NewMarkdownTextChunk(", "),
		slack.NewPlanUpdateChunk("thinking"), slack.NewMarkdownTextChunk("world"))); err != nil {
		t.Fatal(err)
	}
	tooMany := make([]slack.Block, 51)
	for i := range tooMany {
		tooMany[i] = slack.NewDividerBlock()
	}
	_, _, err = api.StopStreamContext(ctx(t), ch, ts, slack.MsgOptionBlocks(tooMany...))
	wantCode(t, err, "invalid_blocks")
	done := slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, "done", false, false))
	if _, _, err := api.StopStreamContext(ctx(t), ch, ts, slack.MsgOptionMarkdownText("!"), slack.MsgOptionBlocks(done)); err != nil {
		t.Fatalf("stop after refused blocks: %v", err)
	}
	m, _ := srv.Message(ch, ts)
	if m.Text != "Hello, world!" || !strings.Contains(string(m.Blocks), `"done"`) {
		t.Errorf("stopped stream = %q with blocks %s, want Hello, world! and the context block", m.Text, m.Blocks)
	}
	_, _, err = api.StopStreamContext(ctx(t), ch, ts)
	wantCode(t, err, "message_not_in_streaming_state")
}

// TestEndStream: a stream Slack ended on its own refuses appends and
// stops and keeps what it showed.
func TestEndStream(t *testing.T) {
	srv, api, ch, ann := setup(t, slacktest.Options{Streaming: true})
	root := srv.Post(ann, ch, "", "q")
	_, ts, err := api.StartStreamContext(ctx(t), ch, slack.MsgOptionTS(root), slack.MsgOptionMarkdownText("partial"),
		slack.MsgOptionRecipientTeamID(srv.TeamID), slack.MsgOptionRecipientUserID(ann.ID))
	if err != nil {
		t.Fatal(err)
	}
	srv.EndStream(ch, ts)
	_, _, err = api.AppendStreamContext(ctx(t), ch, ts, slack.MsgOptionMarkdownText(" more"))
	wantCode(t, err, "message_not_in_streaming_state")
	_, _, err = api.StopStreamContext(ctx(t), ch, ts)
	wantCode(t, err, "message_not_in_streaming_state")
	if m, _ := srv.Message(ch, ts); m.Text != "partial" {
		t.Errorf("ended stream shows %q, want partial", m.Text)
	}
}

// TestThreadStatusRules: assistant.threads.setStatus needs a thread, and
// an empty status clears the one set.
func TestThreadStatusRules(t *testing.T) {
	srv, api, ch, ann := setup(t, slacktest.Options{AssistantThreads: true})
	root := srv.Post(ann, ch, "", "q")
	set := func(threadTS, status string) error {
		return api.SetAssistantThreadsStatusContext(ctx(t), slack.AssistantThreadsSetStatusParameters{ChannelID: ch, ThreadTS: threadTS, Status: status})
	}
	wantCode(t, set("", "is working…"), "invalid_arguments")
	if err := set(root, "is working…"); err != nil {
		t.Fatal(err)
	}
	if err := set(root, ""); err != nil {
		t.Fatal(err)
	}
	if got := srv.ThreadStatus(ch, root); got != "" {
		t.Errorf("status after clearing = %q, want none", got)
	}
}
