package slacktest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
)

// newClient is slack-go's Web API client for srv, with the bot token.
func newClient(srv *slacktest.Server) *slack.Client {
	return slack.New(srv.BotToken, slack.OptionAPIURL(srv.URL), slack.OptionAppLevelToken(srv.AppToken))
}

// setup starts a server with a channel the bot is in and a person.
func setup(tb testing.TB, opts slacktest.Options) (*slacktest.Server, *slack.Client, string, slacktest.User) {
	tb.Helper()
	srv := slacktest.NewServer(tb, opts)
	return srv, newClient(srv), srv.NewChannel("parley"), srv.NewUser("ann")
}

func ctx(tb testing.TB) context.Context {
	tb.Helper()
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	tb.Cleanup(cancel)
	return c
}

// wantCode checks that err is Slack's error code.
func wantCode(tb testing.TB, err error, code string) {
	tb.Helper()
	var se slack.SlackErrorResponse
	if code == "" {
		if err != nil {
			tb.Fatalf("error = %v, want none", err)
		}
		return
	}
	if !errors.As(err, &se) || se.Err != code {
		tb.Fatalf("error = %v (%T), want Slack's %q", err, err, code)
	}
}

// post posts text as the bot and returns its ts.
func post(tb testing.TB, api *slack.Client, channel string, opts ...slack.MsgOption) string {
	tb.Helper()
	_, ts, err := api.PostMessageContext(ctx(tb), channel, opts...)
	if err != nil {
		tb.Fatalf("chat.postMessage: %v", err)
	}
	return ts
}
