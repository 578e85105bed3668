package slacktest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
)

func TestResponseURL(t *testing.T) {
	srv, api, ch, ann := setup(t, slacktest.Options{})
	sock := startSocket(t, srv, ackAll)
	q := post(t, api, ch, slack.MsgOptionText("Pick", false), slack.MsgOptionBlocks(
		slack.NewActionBlock("", slack.NewButtonBlockElement("pick", "1", slack.NewTextBlockObject("plain_text", "One", false, false)))))
	srv.Click(ann, ch, q, "pick", "1")
	click := sock.next(t, "interactive").Data.(slack.InteractionCallback)
	if acts := click.ActionCallback.BlockActions; len(acts) != 1 || acts[0].BlockID == "" {
		t.Fatalf("a block without block_id gets one from Slack: %+v", click.ActionCallback)
	}
	srv.Slash(ann, ch, "/parley", "status")
	cmd := sock.next(t, "slash_commands").Data.(slack.SlashCommand)

	respond := func(opts ...slack.MsgOption) error {
		_, _, err := api.PostMessageContext(ctx(t), "", append([]slack.MsgOption{slack.MsgOptionText("answer", false)}, opts...)...)
		return err
	}
	before := len(srv.Messages(ch))
	steps := []struct {
		name     string
		opts     []slack.MsgOption
		messages int // top-level messages after the step, relative to before
		fails    bool
	}{
		{"ephemeral reply to a command", []slack.MsgOption{slack.MsgOptionResponseURL(cmd.ResponseURL, slack.ResponseTypeEphemeral)}, 0, false},
		{"in_channel reply to a command", []slack.MsgOption{slack.MsgOptionResponseURL(cmd.ResponseURL, slack.ResponseTypeInChannel)}, 1, false},
		{"replace the clicked message", []slack.MsgOption{slack.MsgOptionReplaceOriginal(click.ResponseURL)}, 1, false},
		{"delete the clicked message", []slack.MsgOption{slack.MsgOptionDeleteOriginal(click.ResponseURL)}, 0, false},
		{"unknown response URL", []slack.MsgOption{slack.MsgOptionResponseURL(strings.TrimSuffix(srv.URL, "api/")+"commands/T/1/nope", slack.ResponseTypeEphemeral)}, 0, true},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			err := respond(st.opts...)
			if (err != nil) != st.fails {
				t.Fatalf("error = %v, want failure %v", err, st.fails)
			}
			if got := len(srv.Messages(ch)) - before; got != st.messages {
				t.Fatalf("messages %+d, want %+d", got, st.messages)
			}
		})
	}
	for range 3 { // uses three to five
		_ = respond(slack.MsgOptionResponseURL(cmd.ResponseURL, slack.ResponseTypeEphemeral))
	}
	err := respond(slack.MsgOptionResponseURL(cmd.ResponseURL, slack.ResponseTypeEphemeral))
	var sc slack.StatusCodeError
	if !errors.As(err, &sc) || sc.Code != 404 {
		t.Fatalf("sixth use = %v, want a 404: a response URL takes five", err)
	}
}
