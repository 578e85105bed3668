package slack

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/core"
)

// requiredScopes are the bot token scopes parley uses: posting, editing
// and the thread status (chat:write), the channel's details for this check
// (channels:read, groups:read for a private one), reading the channel's,
// private channels' and direct messages' messages (channels:history,
// groups:history, im:history), fetching and sending files, status
// reactions, people's names, and the /parley command. The README's
// manifest grants them.
var requiredScopes = []string{
	"chat:write", "channels:read", "groups:read", "channels:history", "groups:history", "im:history",
	"files:read", "files:write", "reactions:write", "users:read", "commands",
}

// Check verifies the configuration against Slack before parley starts, and
// learns the bot's identity: the bot token works (auth.test), it has every
// scope parley needs (Slack lists the granted ones in the X-OAuth-Scopes
// header), the bot is a member of the channel, and in Socket Mode the
// app-level token may open connections. Its errors say what to fix.
// Slack's refusals (an error code in its answer) are core.Permanent, so
// the daemon retries them slowly; a Web API that does not answer is not.
func (a *Adapter) Check(ctx context.Context) error {
	auth, err := a.api.AuthTestContext(ctx)
	if err != nil {
		if code := errorCode(err); code != "" {
			return core.Permanent(fmt.Errorf("slack: Slack refused the bot token (%s): check [slack] bot_token (PARLEY_SLACK_BOT_TOKEN), the Bot User OAuth Token (xoxb-…) on the app's OAuth & Permissions page", code))
		}
		return core.WithFix(fmt.Errorf("slack: cannot reach the Web API at %s: %w", a.opts.APIURL, err),
			"check that this machine reaches "+a.opts.APIURL+" (its network, DNS, firewall, an HTTPS_PROXY it needs); parley serve keeps serving without Slack and tries again")
	}
	a.self.Store(&identity{UserID: auth.UserID, BotID: auth.BotID, TeamID: auth.TeamID, Team: auth.Team})
	if err := checkScopes(auth.Header.Get("X-OAuth-Scopes")); err != nil {
		return core.Permanent(err)
	}
	ch, err := a.api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: a.opts.Channel})
	switch {
	case hasCode(err, "channel_not_found"):
		return core.Permanent(fmt.Errorf("slack: channel %s not found: check [slack] channel (the id from the channel's details, C…); for a private channel, invite the bot first (/invite @%s)", a.opts.Channel, auth.User))
	case err != nil:
		return core.WithFix(refusal(fmt.Errorf("slack: conversations.info %s: %w", a.opts.Channel, err)),
			"check [slack] channel (PARLEY_SLACK_CHANNEL) and that the bot token has the scopes channels:read and groups:read; if Slack did not answer, check this machine's network")
	case ch.IsArchived:
		return core.Permanent(fmt.Errorf("slack: channel #%s (%s) is archived: unarchive it, or set [slack] channel to another", ch.Name, a.opts.Channel))
	case !ch.IsMember:
		return core.Permanent(fmt.Errorf("slack: the bot is not a member of #%s (%s): invite it by typing /invite @%s in the channel", ch.Name, a.opts.Channel, auth.User))
	}
	if !a.opts.Events {
		if _, _, err := a.api.StartSocketModeContext(ctx); err != nil {
			if code := errorCode(err); code != "" {
				return core.Permanent(fmt.Errorf("slack: the app-level token cannot open Socket Mode connections (%s): set [slack] app_token (PARLEY_SLACK_APP_TOKEN) to a token (xapp-…) with the connections:write scope, made under Basic Information → App-Level Tokens, and turn Socket Mode on", code))
			}
			return core.WithFix(fmt.Errorf("slack: apps.connections.open: %w", err),
				"check that this machine reaches "+a.opts.APIURL+"; parley serve keeps serving without Slack and tries again")
		}
	}
	a.log.Info("connected to Slack", "team", auth.Team, "bot", auth.User, "channel", ch.Name)
	return nil
}

// refusal marks err permanent when Slack answered it with an error code.
func refusal(err error) error {
	if errorCode(err) != "" {
		return core.Permanent(err)
	}
	return err
}

// checkScopes names the required scopes that granted (X-OAuth-Scopes,
// comma-separated) lacks. A server that does not send the header (a proxy,
// a test server) is not checked.
func checkScopes(granted string) error {
	if strings.TrimSpace(granted) == "" {
		return nil
	}
	have := strings.Split(granted, ",")
	for i := range have {
		have[i] = strings.TrimSpace(have[i])
	}
	var missing []string
	for _, s := range requiredScopes {
		if !slices.Contains(have, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return errors.New("slack: the bot token lacks the scope" + plural(len(missing)) + " " + strings.Join(missing, ", ") +
		": add " + them(len(missing)) + " under OAuth & Permissions → Bot Token Scopes (or use the README's app manifest) and reinstall the app to the workspace")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func them(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}
