package slacktest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
)

// A workspace that does not offer streaming refuses all three methods with
// the code the test chose, and a refused start posts nothing.
func TestStreamingRefused(t *testing.T) {
	for _, code := range []string{"", "access_denied", "channel_type_not_supported"} {
		t.Run("refusal="+code, func(t *testing.T) {
			srv, api, ch, ann := setup(t, slacktest.Options{StreamingRefusal: code})
			root := srv.Post(ann, ch, "", "q")
			want := code
			if want == "" {
				want = "unknown_method"
			}
			_, _, err := api.StartStreamContext(ctx(t), ch, slack.MsgOptionTS(root), slack.MsgOptionMarkdownText("a"),
				slack.MsgOptionRecipientTeamID(srv.TeamID), slack.MsgOptionRecipientUserID(ann.ID))
			wantCode(t, err, want)
			_, _, err = api.AppendStreamContext(ctx(t), ch, root, slack.MsgOptionMarkdownText("a"))
			wantCode(t, err, want)
			_, _, err = api.StopStreamContext(ctx(t), ch, root)
			wantCode(t, err, want)
			if n := len(srv.Replies(ch, root)); n != 1 {
				t.Fatalf("thread has %d messages, want the root only", n)
			}
		})
	}
}

// Slack ends a stream on its own a while after it started: appends are
// then refused, the message keeps its text, and chat.update works on it.
func TestStreamLifetime(t *testing.T) {
	const life = 200 * time.Millisecond
	srv, api, ch, ann := setup(t, slacktest.Options{Streaming: true, StreamLifetime: life})
	root := srv.Post(ann, ch, "", "q")
	_, ts, err := api.StartStreamContext(ctx(t), ch, slack.MsgOptionTS(root), slack.MsgOptionMarkdownText("Hello"),
		slack.MsgOptionRecipientTeamID(srv.TeamID), slack.MsgOptionRecipientUserID(ann.ID))
	if err != nil {
		t.Fatal(err)
	}
	// The stream started before the answer came back: a lifetime after
	// now, it has surely ended.
	<-time.After(life)
	_, _, err = api.AppendStreamContext(ctx(t), ch, ts, slack.MsgOptionMarkdownText(" late"))
	wantCode(t, err, "message_not_in_streaming_state")
	if m, _ := srv.Message(ch, ts); m.Text != "Hello" {
		t.Fatalf("expired stream shows %q, want Hello", m.Text)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx(t), ch, ts, slack.MsgOptionText("Hello, updated", false)); err != nil {
		t.Fatalf("chat.update after the stream ended: %v", err)
	}
}

// Each method has its own window per workspace: chat.startStream's 20 a
// minute (Tier 2) run out while chat.appendStream (Tier 4) still has room.
func TestStreamingTiers(t *testing.T) {
	srv, api, ch, ann := setup(t, slacktest.Options{Streaming: true, Limits: true})
	root := srv.Post(ann, ch, "", "q")
	opts := []slack.MsgOption{slack.MsgOptionTS(root), slack.MsgOptionMarkdownText("a"),
		slack.MsgOptionRecipientTeamID(srv.TeamID), slack.MsgOptionRecipientUserID(ann.ID)}
	var ts string
	for i := range 20 {
		var err error
		if _, ts, err = api.StartStreamContext(ctx(t), ch, opts...); err != nil {
			t.Fatalf("start %d: %v", i+1, err)
		}
	}
	_, _, err := api.StartStreamContext(ctx(t), ch, opts...)
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) {
		t.Fatalf("21st start: %v, want a 429", err)
	}
	for i := range 30 {
		if _, _, err := api.AppendStreamContext(ctx(t), ch, ts, slack.MsgOptionMarkdownText("b")); err != nil {
			t.Fatalf("append %d: %v", i+1, err)
		}
	}
}
