package slack

import (
	"fmt"
	"regexp"
	"strings"
)

// Modes of receiving from Slack.
const (
	// ModeSocket receives over a Socket Mode websocket: no public URL.
	ModeSocket = "socket"
	// ModeEvents receives the Events API, slash commands and button
	// clicks as HTTP requests to parley, signed with the signing secret.
	ModeEvents = "events"
)

// DefaultAPIURL is Slack's Web API.
const DefaultAPIURL = "https://slack.com/api/"

// Config is the [slack] section of parley's configuration: what a person
// writes in the file, as opposed to Options, which also carries what the
// daemon provides (the pacer, the file directory, a logger). The loader
// reads it through its toml tags (each key also gets its PARLEY_SLACK_<KEY>
// variable), redacts the keys tagged secret, checks that the keys tagged
// url are http or https URLs, and calls Validate for everything else.
type Config struct {
	// BotToken is the app's Bot User OAuth Token (xoxb-…). Setting it
	// enables the adapter.
	BotToken string `toml:"bot_token" secret:"true"`
	// AppToken is an app-level token (xapp-…) with connections:write, for
	// Socket Mode. Required in socket mode.
	AppToken string `toml:"app_token" secret:"true"`
	// APIURL is the Web API's base URL, slash included. Default
	// https://slack.com/api/.
	APIURL string `toml:"api_url" url:"true"`
	// Channel is the id of the channel whose threads hold the sessions
	// (C… or G…, not its name). Required with BotToken.
	Channel string `toml:"channel"`
	// AllowedUsers are the Slack member ids (U…) whose input is accepted;
	// everyone else is ignored. Required with BotToken.
	AllowedUsers []string `toml:"allowed_users"`
	// Mode is how parley hears from Slack: socket (default) or events.
	Mode string `toml:"mode"`
	// SigningSecret verifies the requests Slack sends in events mode
	// (Basic Information → App Credentials). Required in events mode.
	SigningSecret string `toml:"signing_secret" secret:"true"`
	// EventsPath is where parley's HTTP listener receives Slack's requests
	// in events mode: the path of the Request URL of the app's event
	// subscriptions, interactivity and slash command. Default /slack/events.
	EventsPath string `toml:"events_path"`
	// Stream carries the live output with Slack's streaming methods
	// (chat.startStream, appendStream, stopStream) instead of chat.update
	// edits, where the workspace offers them; refused, parley falls back
	// to chat.update by itself. Default false: see the package doc for
	// the measurements behind it.
	Stream bool `toml:"stream"`
}

// DefaultConfig is the section when the file and the environment say
// nothing: Slack's own Web API, Socket Mode, and no token, so the adapter
// is off.
func DefaultConfig() Config {
	return Config{APIURL: DefaultAPIURL, Mode: ModeSocket, EventsPath: "/slack/events"}
}

// Enabled reports whether the section turns the adapter on: a bot token is
// set.
func (c Config) Enabled() bool { return c.BotToken != "" }

// Allowed returns the member ids admitted to the adapter's origin, as the
// adapter writes core.Actor.ID. Never nil: an empty list admits nobody.
func (c Config) Allowed() []string {
	ids := make([]string, 0, len(c.AllowedUsers))
	for _, id := range c.AllowedUsers {
		ids = append(ids, strings.TrimSpace(id))
	}
	return ids
}

// Options returns the adapter options the section sets. The caller adds
// what the daemon provides (Platform does): Authorizer, Files, Pacer,
// Logger.
func (c Config) Options() Options {
	return Options{
		BotToken: c.BotToken, AppToken: c.AppToken, APIURL: c.APIURL, Channel: c.Channel,
		Events: c.Mode == ModeEvents, SigningSecret: c.SigningSecret,
		Stream: c.Stream, Recipients: c.Allowed(),
	}
}

// Validate reports each problem of the section through report, with the
// key inside the section ("channel") and what is wrong and how to fix it.
// The loader adds the section and where the key is set, and has already
// checked the URL keys' syntax. A problem never quotes a secret.
func (c Config) Validate(report func(key, problem string)) {
	switch {
	case c.APIURL == "":
		report("api_url", "empty; the default is "+DefaultAPIURL)
	case !strings.HasSuffix(c.APIURL, "/"):
		report("api_url", fmt.Sprintf("%q must end with a slash (method names are appended to it), like %s", c.APIURL, DefaultAPIURL))
	}
	if c.Mode != ModeSocket && c.Mode != ModeEvents {
		report("mode", fmt.Sprintf("%q is not one of socket, events", c.Mode))
	}
	if !strings.HasPrefix(c.EventsPath, "/") {
		report("events_path", fmt.Sprintf("%q must be a path starting with /, like /slack/events", c.EventsPath))
	}
	if !c.Enabled() {
		def := DefaultConfig()
		if c.AppToken != "" || c.Channel != "" || len(c.AllowedUsers) > 0 || c.SigningSecret != "" || c.Mode != def.Mode || c.Stream != def.Stream {
			report("bot_token", "empty, but other [slack] keys are set; set the bot token to enable Slack, or remove them")
		}
		return
	}
	if !strings.HasPrefix(c.BotToken, "xoxb-") {
		report("bot_token", "not a bot token: it starts with xoxb- (the app's OAuth & Permissions page, Bot User OAuth Token)")
	}
	switch {
	case c.Channel == "":
		report("channel", "required with slack.bot_token: the id of the channel where sessions live (C…; in Slack, the channel's details show it at the bottom)")
	case !channelID.MatchString(c.Channel):
		report("channel", fmt.Sprintf("%q is not a channel id: write the id (C… or G…, from the channel's details), not its name", c.Channel))
	}
	if len(c.AllowedUsers) == 0 {
		report("allowed_users", "empty, so the bot would ignore everyone; list the Slack member ids (U…, from each profile's ⋮ menu → Copy member ID) allowed to use it")
	}
	for _, id := range c.AllowedUsers {
		if !userID.MatchString(strings.TrimSpace(id)) {
			report("allowed_users", fmt.Sprintf("%q is not a member id (U… or W…, from the profile's ⋮ menu → Copy member ID)", id))
		}
	}
	switch c.Mode {
	case ModeSocket:
		switch {
		case c.AppToken == "":
			report("app_token", "required in socket mode: an app-level token (xapp-…) with the connections:write scope (Basic Information → App-Level Tokens)")
		case !strings.HasPrefix(c.AppToken, "xapp-"):
			report("app_token", "not an app-level token: it starts with xapp- (Basic Information → App-Level Tokens, scope connections:write)")
		}
	case ModeEvents:
		if c.SigningSecret == "" {
			report("signing_secret", "required when slack.mode is events: the app's Signing Secret (Basic Information → App Credentials)")
		}
	}
}

var (
	channelID = regexp.MustCompile(`^[CG][A-Z0-9]{2,}$`)
	userID    = regexp.MustCompile(`^[UW][A-Z0-9]{2,}$`)
)
