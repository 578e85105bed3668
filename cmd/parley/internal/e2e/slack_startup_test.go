package e2e

import (
	"strings"
	"testing"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
	"github.com/parley-chat/parley/cmd/parley/internal/platforms"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
)

// TestSlackStartupErrorsNameTheFix: parley serve, wired from its
// configuration, checks the Slack app as it starts it, and each mistake
// people make installing it is reported as a refusal with what is wrong
// and how to fix it, while parley serves without Slack.
func TestSlackStartupErrorsNameTheFix(t *testing.T) {
	without := func(scope string) []string {
		var out []string
		for _, s := range slacktest.DefaultScopes {
			if s != scope {
				out = append(out, s)
			}
		}
		return out
	}
	tests := []struct {
		name string
		opts slacktest.Options
		// botToken replaces the server's bot token when set; noBot puts
		// the bot outside the configured channel.
		botToken string
		noBot    bool
		want     []string
	}{
		{name: "missing scope", opts: slacktest.Options{Scopes: without("reactions:write")},
			want: []string{"lacks the scope reactions:write", "OAuth & Permissions", "reinstall"}},
		{name: "bot not in the channel", noBot: true,
			want: []string{"not a member of #agents", "/invite @parley"}},
		{name: "app token without connections:write", opts: slacktest.Options{AppScopes: []string{"authorizations:read"}},
			want: []string{"app-level token", "connections:write", "app_token"}},
		{name: "wrong bot token", botToken: "xoxb-1000000001-2000000002-NotTheRightToken",
			want: []string{"refused the bot token", "invalid_auth", "bot_token"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newSlackStackConfig(t, tt.opts)
			if tt.noBot {
				st.channel = st.srv.NewChannelWithoutBot("agents")
				slackConfig(&st.cfg).Channel = st.channel
			}
			if tt.botToken != "" {
				slackConfig(&st.cfg).BotToken = tt.botToken
			}
			// parley serves without Slack, which is refused (and
			// retried slowly), with the error and its fix in the log.
			m := servetest.Start(t, st.cfg, platforms.All())
			err := servetest.WaitDown(t, m, "slack", core.PlatformRefused)
			t.Log(err)
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), st.srv.BotToken) || strings.Contains(err.Error(), st.srv.AppToken) {
				t.Errorf("error %q quotes a token", err)
			}
		})
	}
}
